"""The Iceberg REST catalogs' refusals: `IcebergError`, and `iceberg_errors`, which names the type.

Clients turn the `type` of `{"error": {"message", "type", "code"}}` into their own exceptions
(`NoSuchTableException`, `CommitFailedException`, which makes them refresh and retry), so every
refusal names the type the spec gives it: the store's errors carry theirs (`iceberg_type`), a
404 is the handler's own `missing`, others get the type of their HTTP status. The answer itself
is made where every error's is (`sharing_server.http.errors.error_response`), which also answers
what no handler catches (a 500, an outage's 503, a middleware's refusal) in this model under the
catalogs' prefixes.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.errors import ShareStoreError
from sharing_server.http.error_models import ERROR_TYPES, iceberg_body
from sharing_server.http.errors import HTTP_CODES, note_store_error, retry_after
from sharing_server.http.errors import error_response as answer

__all__ = ["ERROR_TYPES", "IcebergError", "error_response", "iceberg_errors"]


class IcebergError(Exception):
    def __init__(self, status: int, message: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind or ERROR_TYPES.get(status, "RESTException")

    @property
    def code(self) -> str:
        """The audit line's error code for it."""
        return HTTP_CODES.get(self.status, "INTERNAL_ERROR")


def error_response(
    status: int, message: str, kind: str | None = None, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """An Iceberg error body made by a handler itself (one that has no request at hand to give
    `sharing_server.http.errors.error_response`)."""
    return JSONResponse(iceberg_body(status, message, kind), status_code=status, headers=headers)


def _from_store_error(error: ShareStoreError, missing: str) -> IcebergError:
    status = error.status_code
    own_type = getattr(error, "iceberg_type", None)
    if own_type is not None:
        return IcebergError(status, error.message, own_type)
    if status == 404 or error.error_code == "RESOURCE_DOES_NOT_EXIST":
        return IcebergError(404, error.message, missing)
    if error.error_code == "UNSUPPORTED_OPERATION":
        return IcebergError(406, error.message)
    return IcebergError(status, error.message)


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
                return answer(request, error.status, error.code, error.message, kind=error.kind)
            except ShareStoreError as error:
                note_store_error(request, error)
                mapped = _from_store_error(error, missing)
                return answer(
                    request, mapped.status, error.error_code, mapped.message, retry_after(error), mapped.kind
                )

        return handle

    return wrap
