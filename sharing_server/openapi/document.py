"""The OpenAPI document of an app, built by walking its routes, and the endpoint serving it.

Paths and methods come from the route table alone; each area (`protocol`,
`admin`, `iceberg`, `warehouses`, `service`) only says what its operations
take and answer, found by route name and method. A route without a spec, or a
spec no route serves, stops the build, so the document cannot describe a
server other than the one it is built from.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from sharing_server import __version__, paths
from sharing_server.openapi import admin, catalog, delta_sharing, iceberg_shares, recipients, service
from sharing_server.openapi.components import SECURITY_SCHEMES, error_responses, shared_schemas
from sharing_server.openapi.shapes import Area, OperationKey, Schema

OPENAPI_VERSION = "3.0.3"
# Within a path, operations in the order HTTP documentation usually lists them.
METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

Value = TypeVar("Value")


class SpecMismatch(LookupError):
    """The routes and the operation specs do not pair up one to one."""


def openapi_document(prefix: str, routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The description of `routes`, an app serving the protocol under `prefix` (e.g. `/delta-sharing`)."""
    areas = (
        delta_sharing.area(),
        admin.area(),
        recipients.area(),
        iceberg_shares.area(),
        catalog.area(),
        service.area(),
    )
    document = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Delta Sharing server",
            "version": __version__,
            "description": "The Delta Sharing protocol under `" + prefix + "`, its OAuth token endpoint "
            "and local file URLs, the admin API under `" + paths.ADMIN_PREFIX + "`, a read-only Iceberg REST "
            "catalog under `" + paths.ICEBERG_PREFIX + "`, AIStor Tables' writable Iceberg REST catalog "
            "under `" + paths.WAREHOUSE_PREFIX + "`, and the service probes.",
        },
        "tags": [
            {"name": name, "description": description}
            for name, description in _merge("tag", (area.tags for area in areas)).items()
        ],
        "paths": _paths(routes, _merge("operation", (area.operations for area in areas))),
        "components": _components(areas),
    }
    # Shapes such as STRING are module constants shared all over the tree: a
    # caller editing its document must not change every later one.
    return copy.deepcopy(document)


def _components(areas: Sequence[Area]) -> dict[str, Any]:
    return {
        "securitySchemes": SECURITY_SCHEMES,
        "schemas": _merge("schema", [shared_schemas(), *(area.schemas for area in areas)]),
        "responses": error_responses(),
        "parameters": _merge("parameter", (area.parameters for area in areas)),
    }


def _merge(kind: str, parts: Iterable[dict[Any, Value]]) -> dict[Any, Value]:
    """One dict of the areas' `parts`, which must not name the same thing twice."""
    merged: dict[Any, Value] = {}
    for part in parts:
        if twice := merged.keys() & part.keys():
            raise SpecMismatch(f"{kind} defined by two areas: {sorted(twice)}")
        merged.update(part)
    return merged


def _served(routes: Sequence[BaseRoute], prefix: str = "") -> Iterator[tuple[str, str, set[str]]]:
    """The OpenAPI path, name and methods of every route, into mounts."""
    for route in routes:
        if isinstance(route, Mount) and prefix + route.path == paths.CONSOLE_PREFIX:
            continue  # the console's HTML pages are no API
        if isinstance(route, Mount):
            yield from _served(route.routes, prefix + route.path)
        elif isinstance(route, Route):
            # path_format writes `{key:path}` as OpenAPI's `{key}`.
            yield prefix + route.path_format, route.name, set(route.methods or ())
        else:
            raise SpecMismatch(f"no OpenAPI description of a {type(route).__name__}: {route!r}")


def _method_order(method: str) -> tuple[int, str]:
    return (METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER), method)


def _paths(routes: Sequence[BaseRoute], operations: dict[OperationKey, Schema]) -> dict[str, Schema]:
    described: dict[str, Schema] = {}
    unserved = dict(operations)
    undescribed: list[str] = []
    for path, name, methods in _served(routes):
        for method in sorted(methods, key=_method_order):
            spec = unserved.pop((name, method), None)
            if spec is not None:
                described.setdefault(path, {})[method.lower()] = spec
            # Starlette answers HEAD wherever it answers GET: OpenAPI leaves that HEAD implied.
            elif not (method == "HEAD" and "GET" in methods):
                undescribed.append(f"{method} {path} ({name})")
    if undescribed or unserved:
        raise SpecMismatch(
            f"routes without an operation spec (or served twice): {undescribed or 'none'}; "
            f"operation specs no route serves: {sorted(unserved) or 'none'}"
        )
    return described


class OpenApiEndpoint:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.document: dict[str, Any] | None = None

    async def openapi_endpoint(self, request: Request) -> Response:
        # Built once per app: its routes and prefix never change while it runs.
        if self.document is None:
            self.document = openapi_document(self.prefix, request.app.routes)
        return JSONResponse(self.document)
