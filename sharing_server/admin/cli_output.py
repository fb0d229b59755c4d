"""How the CLI prints what the admin operations answer: times, and a token shown once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sharing_server.auth.profiles import write_profile_document


def when(value: str | None) -> str:
    return value.replace("T", " ") if value else "never"


def print_issued(issued: dict[str, Any], profile: Path | None) -> None:
    """A new token: its id and expiry, then its profile written to `profile` or printed once."""
    print(f"Token id:   {issued['id']}")
    print(f"Expires:    {when(issued['expiresAt'])}")
    print(f"Endpoint:   {issued['endpoint']}")
    if profile:
        write_profile_document(profile, issued["profile"])
        print(f"Profile:    {profile} (keep it secret)")
    else:
        print(f"Token:      {issued['token']}")
        print("The token is shown once; it is stored only as a hash.")
        # What `mc table share token create` users get back: the profile, ready to save.
        print("Profile (save as a .share file; keep it secret):")
        print(json.dumps(issued["profile"], indent=2))
