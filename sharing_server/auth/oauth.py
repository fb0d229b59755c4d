"""The OAuth2 token endpoint (RFC 6749 §4.4, client credentials grant).

Recipients holding a version 2 profile (`type: oauth_client_credentials`) post
their client id and secret with HTTP Basic auth and a form body
`grant_type=client_credentials`; the access token they get back is an ordinary
bearer token of the client's share, stored only as a hash like every other.
Errors use RFC 6749's `error` field and, like the rest of the server, carry
`errorCode` and `message` as well.
"""

from __future__ import annotations

import base64
import binascii
from datetime import timedelta
from urllib.parse import parse_qs, unquote_plus

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.errors import Unauthenticated
from share_store.persistence import ShareStore
from sharing_server.observability.audit import audit_fields

FORM = "application/x-www-form-urlencoded"


def oauth_error(status: int, error: str, message: str) -> Response:
    headers = {"Cache-Control": "no-store", "Pragma": "no-cache"}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="delta-sharing"'
    body = {"error": error, "error_description": message, "errorCode": error.upper(), "message": message}
    return JSONResponse(body, status_code=status, headers=headers)


def client_credentials(request: Request, form: dict[str, list[str]]) -> tuple[str, str] | None:
    """From Basic auth (RFC 6749 §2.3.1: each part form-encoded) or, failing that, the body."""
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        client_id, sep, secret = decoded.partition(":")
        return (unquote_plus(client_id), unquote_plus(secret)) if sep else None
    ids, secrets = form.get("client_id", []), form.get("client_secret", [])
    if len(ids) == 1 and len(secrets) == 1:
        return ids[0], secrets[0]
    return None


async def client_credentials_grant(request: Request) -> tuple[str, str] | Response:
    """A client-credentials token request's client id and secret, or the OAuth error that refuses it."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != FORM:
        return oauth_error(400, "invalid_request", f"the body must be {FORM}")
    try:
        form = parse_qs((await request.body()).decode(), strict_parsing=False, max_num_fields=16)
    except (UnicodeDecodeError, ValueError):
        return oauth_error(400, "invalid_request", "the form body cannot be parsed")
    if form.get("grant_type") != ["client_credentials"]:
        return oauth_error(400, "unsupported_grant_type", "only grant_type=client_credentials is supported")
    credentials = client_credentials(request, form)
    if credentials is None:
        return oauth_error(401, "invalid_client", "client authentication failed")
    return credentials


class OAuthTokens:
    """`{prefix}/oauth/token`: an OAuth client's credentials for an access token of its share."""

    def __init__(self, store: ShareStore, lifetime: timedelta) -> None:
        self.store = store
        self.lifetime = lifetime

    async def token_endpoint(self, request: Request) -> Response:
        credentials = await client_credentials_grant(request)
        if isinstance(credentials, Response):
            return credentials
        try:
            token, secret = await run_in_threadpool(
                self.store.issue_access_token, *credentials, self.lifetime
            )
        except Unauthenticated as error:
            return oauth_error(401, "invalid_client", error.message)
        audit_fields(request).update(token_id=token.id, share=token.share, oauth_client=token.oauth_client_id)
        assert token.expires_at is not None and token.created_at is not None
        expires_in = int((token.expires_at - token.created_at).total_seconds())
        return JSONResponse(
            {"access_token": secret, "token_type": "bearer", "expires_in": expires_in},
            headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
        )
