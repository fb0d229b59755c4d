"""The admin operations' JSON shapes of tokens, clients and times, and their one error mapping.

Shared by the share and token commands (`commands`) and the recipient commands
(`recipient_commands`), which the admin API and the CLI print alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ParamSpec, TypeVar

from share_store.errors import AdminNotFound, NotFound
from share_store.model import OAuthClient, Token
from sharing_server.auth.profiles import profile_document

P = ParamSpec("P")
R = TypeVar("R")


def admin_not_found(operation: Callable[P, R]) -> Callable[P, R]:
    """Report the store's `NotFound` as bad admin input: the CLI exits 2, the admin API answers 404.

    The store has one `NotFound` for every caller; only here is a missing name
    the admin's mistake rather than a recipient's.
    """

    @functools.wraps(operation)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return operation(*args, **kwargs)
        except NotFound as error:
            raise AdminNotFound(error.message) from None

    return run


def iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else None


def token_state(token: Token | OAuthClient, now: datetime) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if not token.is_active(now):
        return "expired"
    if isinstance(token, Token) and token.replaced_by:
        return "rotating"
    return "active"


def token_entry(token: Token, now: datetime) -> dict[str, Any]:
    return {
        "id": token.id,
        "state": token_state(token, now),
        "description": token.description,
        "createdAt": iso(token.created_at),
        "expiresAt": iso(token.expires_at),
        "replacedBy": token.replaced_by,
    }


def client_entry(client: OAuthClient, now: datetime) -> dict[str, Any]:
    return {
        "clientId": client.id,
        "state": token_state(client, now),
        "description": client.description,
        "createdAt": iso(client.created_at),
        "expiresAt": iso(client.expires_at),
    }


def issued_token(endpoint: str, token: Token, secret: str) -> dict[str, Any]:
    """A bearer token just made, as shown once: its secret and its `.share` profile."""
    return {
        "id": token.id,
        "token": secret,
        "expiresAt": iso(token.expires_at),
        "endpoint": endpoint,
        "profile": profile_document(endpoint, secret, token.expires_at),
    }
