"""Recipient `.share` profile files (bearer tokens: always version 1)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path


def profile_document(endpoint: str, secret: str, expires_at: datetime | None) -> dict[str, object]:
    profile: dict[str, object] = {"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": secret}
    if expires_at is not None:
        profile["expirationTime"] = expires_at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return profile


def write_profile(path: Path, endpoint: str, secret: str, expires_at: datetime | None) -> None:
    """Write the profile readable by its owner only: it holds a live secret."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(profile_document(endpoint, secret, expires_at), handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)
