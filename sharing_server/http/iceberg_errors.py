"""The Iceberg REST catalogs' refusals: `IcebergError`, and `iceberg_error_model`, the one exception
handling of each catalog's mount, which names each refusal's type.

Clients turn the `type` of `{"error": {"message", "type", "code"}}` into their own exceptions
(`NoSuchTableException`, `CommitFailedException`, which makes them refresh and retry), so every
refusal names the type the spec gives it: the store's errors carry theirs (`iceberg_type`), a
404 without one takes its route's (`not_found`, by route name), others the type of their HTTP
status. The answer itself is made where every error's is (`sharing_server.http.errors.
error_response`), which also answers what no handler of the mount catches (a 500, an outage's
503, a middleware's refusal) in this model under the catalogs' prefixes.

Starlette's exception handlers are the app's; a mount's are installed by an `ExceptionMiddleware`
of its own (`Mount(..., middleware=[iceberg_error_model(...)])`), which the mount's routes find in
their scope, as they would find the app's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from share_store.errors import ShareStoreError
from sharing_server.http.error_models import ERROR_TYPES, iceberg_body
from sharing_server.http.errors import HTTP_CODES, body_cut_short, http_error, note_store_error, retry_after
from sharing_server.http.errors import error_response as answer

__all__ = ["ERROR_TYPES", "IcebergError", "error_answer", "error_response", "iceberg_error_model"]

#: A 404's type where neither the error nor its route names one (the spec's for tables).
MISSING = "NoSuchTableException"


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


class _IcebergHandlers:
    """The mount's handlers of the store's errors and its own `IcebergError`s."""

    def __init__(self, not_found: Mapping[Any, str], names_tokens: bool) -> None:
        #: A 404's type by the route's endpoint (the scope's `endpoint` once routed).
        self.not_found = not_found
        self.names_tokens = names_tokens

    async def iceberg_error(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, IcebergError)
        return answer(request, error.status, error.code, error.message, kind=error.kind)

    async def store_error(self, request: Request, error: Exception) -> Response:
        assert isinstance(error, ShareStoreError)
        note_store_error(request, error, names_tokens=self.names_tokens)
        mapped = _from_store_error(error, self.not_found.get(request.scope.get("endpoint"), MISSING))
        return answer(
            request, mapped.status, error.error_code, mapped.message, retry_after(error), mapped.kind
        )


async def error_answer(
    request: Request, error: Exception, missing: str = MISSING, names_tokens: bool = False
) -> Response | None:
    """The answer the mount's error model gives `error` (a 404 naming no type of its own takes
    `missing`), made by a handler's wrapper that keeps answers (an idempotency key's); None for
    an error the model does not answer (a bug: the app's 500)."""
    handlers = _IcebergHandlers({request.scope.get("endpoint"): missing}, names_tokens)
    if isinstance(error, IcebergError):
        return await handlers.iceberg_error(request, error)
    if isinstance(error, ShareStoreError):
        return await handlers.store_error(request, error)
    if isinstance(error, HTTPException):
        return await http_error(request, error)
    return None


def iceberg_error_model(
    routes: Sequence[BaseRoute], not_found: Mapping[str, str], names_tokens: bool = True
) -> Middleware:
    """The exception handling of an Iceberg catalog's mount over `routes`: a 404 that names no type
    of its own takes `not_found[route name]` (`NoSuchTableException` for routes not named there).
    `names_tokens`: whether a refused proof is a share token, named in the audit line (at
    `/iceberg`; `/_iceberg`'s callers are catalog users, named by `CatalogCallers` as they pass)."""
    by_endpoint = {
        route.endpoint: not_found[route.name]
        for route in routes
        if isinstance(route, Route) and route.name in not_found
    }
    handlers = _IcebergHandlers(by_endpoint, names_tokens)
    return Middleware(
        ExceptionMiddleware,
        handlers={
            ClientDisconnect: body_cut_short,
            HTTPException: http_error,
            ShareStoreError: handlers.store_error,
            IcebergError: handlers.iceberg_error,
        },
    )
