"""The two shapes an error answer takes, and which one a request gets: by its path.

The Delta Sharing protocol (and everything else the server answers) says `{"errorCode",
"message"}`; the Iceberg REST catalogs, `/iceberg` (the recipients') and `/_iceberg` (the
writable one), say `{"error": {"message", "type", "code"}}`, whose `type` clients turn into
their own exceptions. Whatever answers an error (a handler, an exception handler, a middleware's
refusal before routing) asks `is_iceberg` here, so that a client of a catalog never gets the
other protocol's body, be it for a 500 or a refused header.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Scope

from sharing_server import paths

#: The Iceberg REST error types by HTTP status, for errors that name none of their own.
ERROR_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NoSuchTableException",
    405: "MethodNotAllowedException",
    406: "UnsupportedOperationException",
    413: "RequestTooLargeException",
    429: "TooManyRequestsException",
    # The spec's own example of a 5xx; its clients go by the status.
    500: "InternalServerError",
    503: "ServiceUnavailableException",
}
ICEBERG_PREFIXES = (paths.ICEBERG_PREFIX, paths.WAREHOUSE_PREFIX)


def iceberg_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    kind = kind or ERROR_TYPES.get(status, "RESTException")
    return {"error": {"message": message, "type": kind, "code": status}}


def delta_body(code: str, message: str) -> dict[str, Any]:
    return {"errorCode": code, "message": message}


#: Where the app itself starts, kept in the scope as the app is entered (`SharingApp`): the root
#: path then is a server's (`root_path`) or an outer app's mount. Routing into our own mounts
#: moves `root_path` on, and an outer Starlette app's `app_root_path` is its own root, not ours.
APP_ROOT = "sharing.app_root_path"


def app_path(scope: Scope) -> str:
    """The request's path inside the app, without the root path it is served or mounted under."""
    path: str = scope["path"]
    root: str = scope.get(APP_ROOT, scope.get("root_path", ""))
    if root and path == root:
        return ""
    if root and path.startswith(root + "/"):
        return path[len(root) :]
    return path  # a proxy that strips the root path sends the path without it


def is_iceberg(scope: Scope) -> bool:
    """Whether the request is one of an Iceberg REST catalog's, whose errors take its model."""
    path = app_path(scope)
    return any(path == prefix or path.startswith(prefix + "/") for prefix in ICEBERG_PREFIXES)
