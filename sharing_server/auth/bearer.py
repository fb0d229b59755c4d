"""Bearer-token authentication: a token opens one share, a named recipient's token every share granted
to the recipient."""

from __future__ import annotations

from functools import partial

from starlette.requests import HTTPConnection, Request

from share_store.errors import Unauthenticated
from share_store.model import Share, SharedTable, Token
from share_store.persistence import ShareStore
from sharing_server.observability.audit import audit_fields


def parse_bearer(header: str) -> str | None:
    """The secret of an `Authorization: Bearer <secret>` value, None for any other value.

    The one reading of the header: the rate limits key on what it returns, so
    that no spelling (the scheme's case, spaces after it) reaches a bucket of
    its own while authenticating as the same token.
    """
    scheme, _, secret = header.partition(" ")
    secret = secret.strip()
    return secret if scheme.lower() == "bearer" and secret else None


def bearer_secret(request: HTTPConnection) -> str:
    # A request with several Authorization headers never gets here (`RequestLimits` answers 400).
    secret = parse_bearer(request.headers.get("authorization", ""))
    if secret is None:
        raise Unauthenticated("Missing bearer token: send 'Authorization: Bearer <token>'.")
    return secret


def record_token(request: HTTPConnection, token: Token) -> None:
    """Put who is asking in the audit line, 404s included."""
    fields = audit_fields(request)
    fields.update(token_id=token.id, share=token.share or request.path_params.get("share"))
    if token.recipient_id:
        fields["recipient_id"] = token.recipient_id
    if token.oauth_client_id:
        fields["oauth_client"] = token.oauth_client_id


def authenticate(store: ShareStore, request: Request) -> Token:
    token = store.authenticate(bearer_secret(request))
    record_token(request, token)
    return token


def authorize_share(store: ShareStore, request: Request) -> tuple[Token, Share]:
    """The token and the share its URL names; other shares answer as if absent."""
    return store.authorized_share(
        bearer_secret(request), request.path_params["share"], on_token=partial(record_token, request)
    )


def authorize_table(store: ShareStore, request: Request) -> tuple[Token, SharedTable]:
    """The token and the table its URL names, if the token's share holds it."""
    params = request.path_params
    return store.authorized_table(
        bearer_secret(request),
        params["share"],
        params["schema"],
        params["table"],
        on_token=partial(record_token, request),
    )
