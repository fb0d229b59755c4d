"""How the CLI prints what the admin operations answer: times, a token shown once, restrictions."""

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


def restriction_text(restriction: dict[str, Any] | None) -> str:
    """A table's restriction after its line in `share info` ("" for a table shared whole)."""
    if not restriction:
        return ""
    parts = []
    if restriction.get("where") is not None:
        parts.append(f"where {restriction['where']}")
    if restriction.get("columns") is not None:
        parts.append("columns " + ",".join(restriction["columns"]))
    return "  restricted: " + "; ".join(parts)


def print_restriction(done: dict[str, Any]) -> None:
    """What `share restrict` did."""
    table = f"{done['share']}.{done['schema']}.{done['name']}"
    if done["restriction"] is None:
        print(f"Cleared the restriction of {table}: the whole table is shared.")
    else:
        print(f"Restricted {table}:{restriction_text(done['restriction']).removeprefix('  restricted:')}")
