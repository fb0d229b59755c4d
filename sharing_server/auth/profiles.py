"""Recipient `.share` profile files: bearer tokens (version 1) and OAuth clients (version 2)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any


def profile_document(endpoint: str, secret: str, expires_at: datetime | None) -> dict[str, Any]:
    profile: dict[str, Any] = {"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": secret}
    if expires_at is not None:
        profile["expirationTime"] = expires_at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return profile


def oauth_profile_document(
    endpoint: str, token_endpoint: str, client_id: str, client_secret: str
) -> dict[str, Any]:
    """A profile the clients turn into access tokens themselves, renewing them before expiry."""
    return {
        "shareCredentialsVersion": 2,
        "type": "oauth_client_credentials",
        "endpoint": endpoint,
        "tokenEndpoint": token_endpoint,
        "clientId": client_id,
        "clientSecret": client_secret,
    }


def write_profile_document(path: Path, document: dict[str, Any]) -> None:
    """Write the profile readable by its owner only: it holds a live secret."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(document, handle, indent=2)
        handle.write("\n")
    os.replace(tmp, path)


def write_profile(path: Path, endpoint: str, secret: str, expires_at: datetime | None) -> None:
    write_profile_document(path, profile_document(endpoint, secret, expires_at))
