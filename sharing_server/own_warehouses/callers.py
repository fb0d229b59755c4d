"""Who is calling the writable catalog, and whether their policy allows what they ask.

Three ways in, checked in this order:

* **SigV4** (`Authorization: AWS4-HMAC-SHA256 ...`, signing name `s3tables`, any
  region), as AIStor Tables takes it: the request is signed again with the
  catalog user's secret and compared in constant time;
* **a catalog access token** (`Authorization: Bearer ...`) from
  `/_iceberg/v1/oauth/tokens`, for engines that cannot sign SigV4 (Spark
  without the AWS bundle, DuckDB, ClickHouse): the user's keys are its client
  id and secret; the token expires, and stops working when the user is removed;
* **the admin token** as a bearer token: the provider, allowed everything. A
  bearer token that is not a catalog token is checked as the admin API checks
  the admin token, so wrong ones are throttled and audited the same way (429).

Anything else is a 401. A user's policy is checked for every request, deny by
default (`share_store.warehouses.policies`).
"""

from __future__ import annotations

import hmac
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.signing.sigv4_verify import SignatureRejected, verify_request
from share_store.signing.token_codec import TokenCodec
from share_store.warehouses.access import Principal
from share_store.warehouses.users import CatalogUsers, KnownUser
from sharing_server.auth.oauth import client_credentials_grant, oauth_error
from sharing_server.http.iceberg_errors import IcebergError
from sharing_server.http.sign_in_throttle import admin_token_matches
from sharing_server.observability.audit import audit_fields

ACCESS_TOKEN_SECONDS = 3600
SIGV4 = "aws4-hmac-sha256"


def _users(request: Request) -> CatalogUsers:
    return request.app.state.catalog_users  # type: ignore[no-any-return]


def _tokens(request: Request) -> TokenCodec:
    return request.app.state.catalog_tokens  # type: ignore[no-any-return]


async def caller_of(request: Request) -> Principal:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() == SIGV4:
        return await _signed(request)
    if scheme.lower() == "bearer" and credentials.strip():
        return await _bearer(request, credentials.strip())
    raise IcebergError(401, "Authentication required: sign with SigV4 (s3tables) or send a bearer token",
                       "NotAuthorizedException")  # fmt: skip


async def _signed(request: Request) -> Principal:
    users = _users(request)
    body = await request.body()
    # The user read to check the signature is the caller: one read of the store, not two.
    found: dict[str, KnownUser] = {}

    def secret_for(access_key: str) -> str | None:
        hit = users.lookup(access_key)
        if hit is None:
            return None
        found[access_key] = hit[0]
        return hit[1]

    try:
        signed = await run_in_threadpool(
            verify_request,
            request.method,
            request.scope.get("raw_path") or request.url.path.encode(),
            request.scope.get("query_string", b""),
            request.headers,
            body,
            secret_for,
        )
    except SignatureRejected as error:
        raise IcebergError(403, error.message, "ForbiddenException") from None
    user = found[signed.access_key]
    audit_fields(request).update(catalog_user=user.name)
    return Principal(user.name, user.policy)


async def _bearer(request: Request, secret: str) -> Principal:
    # A catalog token first: it is HMAC-checked, cheap, and the common case. Only a token that is
    # not one is an admin-token attempt, so catalog users' requests never count as wrong admin tokens.
    try:
        payload = _tokens(request).decode(secret)
    except ValueError:
        return _admin(request, secret)
    if int(payload.get("e", 0)) < time.time():
        raise IcebergError(401, "The bearer token has expired", "NotAuthorizedException")
    user = await run_in_threadpool(_users(request).known, str(payload.get("k")))
    if user is None:
        raise IcebergError(401, "The bearer token's user no longer exists", "NotAuthorizedException")
    audit_fields(request).update(catalog_user=user.name)
    return Principal(user.name, user.policy)


def _admin(request: Request, secret: str) -> Principal:
    """The provider, if `secret` is the admin token: checked as the admin API and the console check
    it (`admin_token_matches`: throttled per address and in all, audited). While throttled,
    `RateLimited`, which `iceberg_errors` answers as a 429 with `Retry-After`."""
    expected = request.app.state.options.admin_token_hash
    if expected is None or not admin_token_matches(request, secret, expected):
        raise IcebergError(401, "The bearer token is not valid", "NotAuthorizedException")
    audit_fields(request).update(catalog_user="admin")
    return Principal("admin", None)


async def catalog_token_endpoint(request: Request) -> Response:
    """OAuth2 client credentials: a catalog user's keys for a short-lived bearer token."""
    credentials = await client_credentials_grant(request)
    if isinstance(credentials, Response):
        return credentials
    access_key, secret = credentials
    known = await run_in_threadpool(_users(request).secret_for, access_key)
    # Compared even for an unknown key, so that the answer takes as long either way.
    matched = hmac.compare_digest((known or "\x00" * len(secret)).encode(), secret.encode())
    if known is None or not matched:
        return oauth_error(401, "invalid_client", "client authentication failed")
    token = _tokens(request).encode({"k": access_key, "e": int(time.time()) + ACCESS_TOKEN_SECONDS})
    audit_fields(request).update(catalog_user=access_key)
    return JSONResponse(
        {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": ACCESS_TOKEN_SECONDS,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        },
        headers={"Cache-Control": "no-store", "Pragma": "no-cache"},
    )
