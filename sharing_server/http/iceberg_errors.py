"""The Iceberg REST error model, for both catalogs: `{"error": {"message", "type", "code"}}`.

Clients turn the `type` into their own exceptions (`NoSuchTableException`,
`CommitFailedException`, which makes them refresh and retry), so every refusal
names the type the spec gives it; the store's errors carry theirs
(`iceberg_type`) or get the type of their HTTP status.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.errors import ShareStoreError, Unauthenticated
from sharing_server.observability.audit import note_refused_token

#: The Iceberg REST error types by HTTP status.
ERROR_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NoSuchTableException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    413: "RequestTooLargeException",
    429: "TooManyRequestsException",
    503: "ServiceUnavailableException",
}


class IcebergError(Exception):
    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or ERROR_TYPES.get(status, "RESTException")


def error_response(
    status: int, message: str, kind: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    kind = kind or ERROR_TYPES.get(status, "RESTException")
    body = {"error": {"message": message, "type": kind, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def _retry_after(error: ShareStoreError) -> dict[str, str] | None:
    """`Retry-After` for a refusal that says when to come back (the server's `RateLimited`, e.g. a
    throttled admin token), so that clients back off as they do at the other endpoints."""
    seconds = getattr(error, "retry_after", None)
    return None if seconds is None else {"Retry-After": str(math.ceil(max(seconds, 1)))}


def _from_store_error(error: ShareStoreError, missing: str) -> IcebergError:
    status = error.status_code
    own_type = getattr(error, "iceberg_type", None)
    if own_type is not None:
        return IcebergError(status, error.message, own_type)
    if status == 404 or error.error_code == "RESOURCE_DOES_NOT_EXIST":
        return IcebergError(404, error.message, missing)
    if error.error_code == "UNSUPPORTED_OPERATION":
        return IcebergError(406, error.message)
    return IcebergError(status if status in ERROR_TYPES else 500, error.message, None)


Handler = Callable[..., Awaitable[Response]]


def iceberg_errors(missing: str = "NoSuchTableException") -> Callable[[Handler], Handler]:
    """Answer the store's errors in the Iceberg REST error model, naming `missing` for a 404. For a
    handler function or method: its request is its last argument."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def handle(*args: Any) -> Response:
            request: Request = args[-1]
            try:
                return await handler(*args)
            except IcebergError as error:
                return error_response(error.status, error.message, error.kind)
            except ShareStoreError as error:
                if isinstance(error, Unauthenticated):
                    note_refused_token(request, error)
                mapped = _from_store_error(error, missing)
                return error_response(mapped.status, mapped.message, mapped.kind, _retry_after(error))

        return handle

    return wrap
