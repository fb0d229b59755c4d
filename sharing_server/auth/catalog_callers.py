"""The one way in at `/_iceberg`: `CatalogAuthentication`, the caller a request proves it is (its
proof read off it by `credentials_of`, checked under it by `share_store.catalog.callers.
CatalogCallers`), and the OAuth2 token endpoint engines trade a catalog user's keys at for a bearer
token.

A dependency the handlers ask, not a middleware in front of them: the check reads the store, so it
runs in a worker thread, and the calls engines make most (a table's load and commit) check and do
their work in one trip there (`as_caller`); each trip is a wait for a thread under load."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.catalog.access import Principal
from share_store.catalog.callers import ACCESS_TOKEN_SECONDS, CatalogCallers, Credentials
from sharing_server.auth.oauth import client_credentials_grant, oauth_error
from sharing_server.observability.audit import audit_fields


async def credentials_of(request: Request) -> Credentials:
    """Everything the catalog needs to tell who sent `request`; nothing is decided here."""
    return Credentials(
        authorization=request.headers.get("authorization", ""),
        method=request.method,
        raw_path=request.scope.get("raw_path") or request.url.path.encode(),
        query=request.scope.get("query_string", b""),
        headers=request.headers,
        body=await request.body(),
        address=request.client.host if request.client else "",
        notes=audit_fields(request),
    )


T = TypeVar("T")

#: The request's scope key of what runs right after its caller is authenticated, in the same
#: worker thread, before the handler does anything else: an `Idempotency-Key`'s claim
#: (`sharing_server.catalog.idempotent_routes.KeyClaim`), which may stop the handler there. A
#: scope is the server's, never the client's: nothing a request sends can set it.
AFTER_AUTHENTICATION = "catalog.after_authentication"


class CatalogAuthentication:
    """Who sent a request of the catalog's: authenticated before anything else of it is read, its
    refusals `Unauthenticated` (401), `SignatureRejected` (403) or `RateLimited` (429, the admin
    token's throttle); the caller's name is noted in the audit line as it passes."""

    def __init__(self, callers: CatalogCallers) -> None:
        self.callers = callers

    async def caller(self, request: Request) -> Principal:
        credentials = await credentials_of(request)
        then = request.scope.get(AFTER_AUTHENTICATION)
        return await run_in_threadpool(self._authenticate, credentials, then)

    async def as_caller(self, request: Request, action: Callable[[Principal], T]) -> T:
        """`action` given the caller, in the one trip to a worker thread that authenticates it."""
        credentials = await credentials_of(request)
        then = request.scope.get(AFTER_AUTHENTICATION)

        def authenticated_action() -> T:
            return action(self._authenticate(credentials, then))

        return await run_in_threadpool(authenticated_action)

    def _authenticate(self, credentials: Credentials, then: Callable[[Principal], None] | None) -> Principal:
        principal = self.callers.authenticate(credentials)
        if then is not None:
            then(principal)  # before any of the handler's work, in the same trip
        return principal


class CatalogTokens:
    """OAuth2 client credentials at `/_iceberg/v1/oauth/tokens`: a catalog user's keys for a
    short-lived bearer token."""

    def __init__(self, callers: CatalogCallers) -> None:
        self.callers = callers

    async def token(self, request: Request) -> Response:
        credentials = await client_credentials_grant(request)
        if isinstance(credentials, Response):
            return credentials
        token = await run_in_threadpool(self.callers.issue_token, *credentials, audit_fields(request))
        if token is None:
            return oauth_error(401, "invalid_client", "client authentication failed")
        return JSONResponse(
            {
                "access_token": token,
                "token_type": "bearer",
                "expires_in": ACCESS_TOKEN_SECONDS,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            },
            headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
        )
