"""Bearer-token authentication: a token opens exactly one share."""

from __future__ import annotations

from starlette.requests import Request

from share_store.errors import NotFound, Unauthenticated
from share_store.model import Token
from share_store.persistence import ShareStore
from sharing_server.audit import audit_fields


def bearer_secret(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Unauthenticated("Missing bearer token: send 'Authorization: Bearer <token>'.")
    return secret.strip()


def authenticate(store: ShareStore, request: Request) -> Token:
    token = store.authenticate(bearer_secret(request))
    fields = audit_fields(request)
    fields.update(token_id=token.id, share=token.share)
    if token.oauth_client_id:
        fields["oauth_client"] = token.oauth_client_id
    return token


def require_share(token: Token, share_id: str, share_name: str) -> None:
    """Other shares answer as if absent, so a token cannot probe share names."""
    if token.share_id != share_id:
        raise NotFound(f"share '{share_name}' not found")
