"""Every error leaves as `{"errorCode", "message"}` JSON; internals never leave at all.

Besides the handlers, this module holds the errors the server raises itself,
as opposed to those of the share store (`share_store.errors`):

    ShareStoreError (share_store.errors)
    ├── Refusal                     an HTTP-level refusal, before or instead of any table work
    │   ├── Forbidden               403 PERMISSION_DENIED (bad file URL signature, files not ours)
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

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from share_store.errors import (
    RateLimited,
    ShareStoreError,
    StorageUnavailable,
    StoreDiskFull,
    TableLogDamaged,
    Unauthenticated,
)
from share_store.outages import disk_full, is_outage
from sharing_server.observability.audit import audit_fields, note_refused_token

logger = logging.getLogger("sharing_server")


class Refusal(ShareStoreError):
    """Refused by the server itself; like the store's errors, its message is safe to show."""


class Forbidden(Refusal):
    error_code = "PERMISSION_DENIED"
    status_code = 403


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
    413: "REQUEST_TOO_LARGE",
    429: "TOO_MANY_REQUESTS",
}


def error_response(
    request: Request, status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    audit_fields(request)["error_code"] = code
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers)
    return JSONResponse({"errorCode": code, "message": message}, status_code=status, headers=headers)


async def share_store_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, ShareStoreError)
    if isinstance(error, StorageUnavailable):
        logger.warning("storage unavailable: %s", error.__cause__ or error)
    elif isinstance(error, StoreDiskFull):
        logger.warning("the share store's disk is full on %s %s", request.method, request.url.path)
    elif isinstance(error, TableLogDamaged):
        # For the provider: which version and what is wrong (no paths or credentials in it).
        logger.error("table log damaged on %s %s: %s", request.method, request.url.path, error.detail)
    if isinstance(error, Unauthenticated):
        note_refused_token(request, error)
    headers = {"Retry-After": str(math.ceil(error.retry_after))} if isinstance(error, RateLimited) else None
    return error_response(request, error.status_code, error.error_code, error.message, headers)


async def http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    code = HTTP_CODES.get(error.status_code, "INTERNAL_ERROR")
    return error_response(request, error.status_code, code, str(error.detail))


async def internal_error(request: Request, error: Exception) -> Response:
    if disk_full(error):
        # Not an outage (nothing is unreachable) and not a bug: the server's own disk is full.
        path, kind = request.url.path, type(error).__name__
        logger.warning("no space left on disk on %s %s: %s", request.method, path, kind)
        message = "the server has no space left on its disk; try again later"
        return error_response(request, 503, "TEMPORARILY_UNAVAILABLE", message)
    if is_outage(error):
        # The share store's database (or a service the readers missed) is down:
        # the same request may work a moment later.
        logger.warning(
            "service unreachable on %s %s: %s", request.method, request.url.path, type(error).__name__
        )
        what = "the share store" if type(error).__module__.startswith("sqlalchemy") else "a storage service"
        return error_response(
            request, 503, "TEMPORARILY_UNAVAILABLE", f"{what} is unreachable; try again later"
        )
    # Logged with the type only: messages of storage and database errors can
    # carry URLs with credentials.
    logger.error("internal error on %s %s: %s", request.method, request.url.path, type(error).__name__)
    return error_response(request, 500, "INTERNAL_ERROR", "The server failed to process the request.")


async def body_cut_short(request: Request, error: Exception) -> Response:
    # The body ended before its end: the client went away, or sent what the ASGI
    # server could not read (malformed chunks, which Hypercorn answers 400 itself).
    # Nothing failed here, and the answer will most likely reach no one.
    logger.info("request body cut short on %s %s", request.method, request.url.path)
    return error_response(request, 400, "MALFORMED_REQUEST", "the request body ended early")


EXCEPTION_HANDLERS = {
    ClientDisconnect: body_cut_short,
    ShareStoreError: share_store_error,
    HTTPException: http_error,
    Exception: internal_error,
}
