"""The admin token offered on a connection, checked by the server's one `AdminToken` (the admin API,
the console's sign-in and the own warehouses' API): throttled per address and in all, audited."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from share_store.authentication.sign_in_throttle import AdminToken
from sharing_server.observability.audit import audit_fields


def admin_token_matches(connection: HTTPConnection, admin_token: AdminToken, token: str) -> bool:
    """Whether `token` is the admin token; `RateLimited` while the connection's address is
    throttled. The audit line notes each failure and refusal, never the token."""
    address = connection.client.host if connection.client else ""
    return admin_token.matches(token, address, audit_fields(connection))
