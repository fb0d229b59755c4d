"""Every error leaves as JSON in its protocol's model; internals never leave at all.

`error_response` is where every error answer is made, by the app's exception handlers below,
by the middleware's refusals and by the Iceberg mounts' `iceberg_error_model`: under `/iceberg`
and `/_iceberg` in the Iceberg REST model (`{"error": {"message", "type", "code"}}`), elsewhere
as `{"errorCode", "message"}` (`error_models`). The audit line gets the error's code either way.
Paths in log lines go through `redact_path`: a signing grant or an activation code never
reaches them.

Besides the handlers, this module holds the errors the server raises itself,
as opposed to those of the share store (`share_store.errors`):

    ShareStoreError (share_store.errors)
    ├── Refusal                     an HTTP-level refusal, before or instead of any table work
    │   ├── AdminDisabled           403 PERMISSION_DENIED (no [admin] token_hash configured)
    │   ├── RequestTimedOut         408 REQUEST_TIMEOUT (the body came too slowly)
    │   ├── RequestTooLarge         413 REQUEST_TOO_LARGE
    │   ├── ServerBusy              503 TEMPORARILY_UNAVAILABLE, with Retry-After (a RateLimited of
    │   │                           share_store.errors: the process is at a limit of its own)
    │   └── ClientGone              499 CLIENT_CLOSED_REQUEST: work stopped, nobody to answer
    └── ConfigError                 the configuration is invalid (the CLI exits with status 2)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from share_store.errors import (
    DerivationPending,
    RateLimited,
    ShareStoreError,
    StorageUnavailable,
    StoreDiskFull,
    TableLogDamaged,
    Unauthenticated,
)
from share_store.outages import disk_full, is_outage
from sharing_server.http.error_models import delta_body, iceberg_body, is_iceberg
from sharing_server.observability.audit import audit_fields, note_refused_token
from sharing_server.observability.redaction import redact_path

logger = logging.getLogger("sharing_server")


class Refusal(ShareStoreError):
    """Refused by the server itself; like the store's errors, its message is safe to show."""


class AdminDisabled(Refusal):
    error_code = "PERMISSION_DENIED"
    status_code = 403


class RequestTimedOut(Refusal):
    error_code = "REQUEST_TIMEOUT"
    status_code = 408


class RequestTooLarge(Refusal):
    error_code = "REQUEST_TOO_LARGE"
    status_code = 413


class ServerBusy(RateLimited, Refusal):
    """The process is at a limit of its own (not the client's): come back later, like a 429."""

    error_code = "TEMPORARILY_UNAVAILABLE"
    status_code = 503


class ClientGone(Refusal):
    """The client disconnected mid-request, so its work was stopped; the status is only logged."""

    error_code = "CLIENT_CLOSED_REQUEST"
    status_code = 499  # nginx's code for it: no client is left to read a real one

    def __init__(self, message: str = "the client closed the connection before the answer was ready") -> None:
        super().__init__(message)


class ConfigError(ShareStoreError):
    """A setting is missing, unknown or out of range; reported on one line at start-up."""

    error_code = "INVALID_CONFIG"


HTTP_CODES = {
    400: "MALFORMED_REQUEST",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "RESOURCE_DOES_NOT_EXIST",
    405: "METHOD_NOT_ALLOWED",
    406: "UNSUPPORTED_OPERATION",
    413: "REQUEST_TOO_LARGE",
    429: "TOO_MANY_REQUESTS",
}


#: `Retry-After` of a 503 whose error names no wait of its own (a database or a storage service
#: unreachable, the disk full): long enough that a fleet of clients retrying does not hammer a
#: service coming back, short against the faults' measured recovery (docs/production.md).
OUTAGE_RETRY_AFTER = "5"


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    kind: str | None = None,
) -> Response:
    """The one answer of an error: `code` in the audit line, `WWW-Authenticate` on a 401,
    `Retry-After` on every 503, no body for HEAD, and the body of the request's protocol; `kind` is
    the Iceberg REST type where the error names one (else its status's)."""
    audit_fields(request)["error_code"] = code
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if status == 503 and not any(name.lower() == "retry-after" for name in headers):
        headers["Retry-After"] = OUTAGE_RETRY_AFTER
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers)
    body = iceberg_body(status, message, kind) if is_iceberg(request.scope) else delta_body(code, message)
    return JSONResponse(body, status_code=status, headers=headers)


def _path(request: Request) -> str:
    return redact_path(request.url.path)


def retry_after(error: ShareStoreError) -> dict[str, str] | None:
    """`Retry-After` for an error that says when to come back (`RateLimited`, `DerivationPending`),
    at least 1 s."""
    if not isinstance(error, RateLimited | DerivationPending):
        return None
    return {"Retry-After": str(math.ceil(max(error.retry_after, 1)))}


def note_store_error(request: Request, error: ShareStoreError, names_tokens: bool = True) -> None:
    """What the provider is told of a store's error, wherever it is answered: outages and damage
    logged, a refused token named in the audit line (`names_tokens`: where the proofs are share
    tokens; the writable catalog's callers are catalog users)."""
    if isinstance(error, StorageUnavailable):
        logger.warning("storage unavailable: %s", error.__cause__ or error)
    elif isinstance(error, StoreDiskFull):
        logger.warning("the share store's disk is full on %s %s", request.method, _path(request))
    elif isinstance(error, TableLogDamaged):
        # For the provider: which version and what is wrong (no paths or credentials in it).
        logger.error("table log damaged on %s %s: %s", request.method, _path(request), error.detail)
    if names_tokens and isinstance(error, Unauthenticated):
        note_refused_token(request, error)


async def share_store_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ShareStoreError)
    note_store_error(request, error)
    kind = getattr(error, "iceberg_type", None)
    return error_response(
        request, error.status_code, error.error_code, error.message, retry_after(error), kind
    )


async def http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    code = HTTP_CODES.get(error.status_code, "INTERNAL_ERROR")
    # Starlette's own headers go too: a 405's `Allow`.
    return error_response(request, error.status_code, code, str(error.detail), error.headers)


async def internal_error(request: Request, error: Exception) -> Response:
    if disk_full(error):
        # Not an outage (nothing is unreachable) and not a bug: the server's own disk is full.
        path, kind = _path(request), type(error).__name__
        logger.warning("no space left on disk on %s %s: %s", request.method, path, kind)
        message = "the server has no space left on its disk; try again later"
        return error_response(request, 503, "TEMPORARILY_UNAVAILABLE", message)
    if is_outage(error):
        # The share store's database (or a service the readers missed) is down:
        # the same request may work a moment later.
        path, kind = _path(request), type(error).__name__
        logger.warning("service unreachable on %s %s: %s", request.method, path, kind)
        what = "the share store" if type(error).__module__.startswith("sqlalchemy") else "a storage service"
        return error_response(
            request, 503, "TEMPORARILY_UNAVAILABLE", f"{what} is unreachable; try again later"
        )
    # Logged with the type only: messages of storage and database errors can
    # carry URLs with credentials.
    logger.error("internal error on %s %s: %s", request.method, _path(request), type(error).__name__)
    return error_response(request, 500, "INTERNAL_ERROR", "The server failed to process the request.")


async def body_cut_short(request: Request, error: Exception) -> Response:
    # The body ended before its end: the client went away, or sent what the ASGI
    # server could not read (malformed chunks, which Hypercorn answers 400 itself).
    # Nothing failed here, and the answer will most likely reach no one.
    logger.info("request body cut short on %s %s", request.method, _path(request))
    return error_response(request, 400, "MALFORMED_REQUEST", "the request body ended early")


EXCEPTION_HANDLERS = {
    ClientDisconnect: body_cut_short,
    ShareStoreError: share_store_error,
    HTTPException: http_error,
    Exception: internal_error,
}
