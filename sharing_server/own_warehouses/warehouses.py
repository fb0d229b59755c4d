"""AIStor Tables' catalog API under `/_iceberg`: configuration, warehouses and namespaces.

/_iceberg/v1/config?warehouse=NAME                      the warehouse's prefix and the endpoints served
/_iceberg/v1/oauth/tokens                               a catalog user's keys → a bearer token
/_iceberg/v1/warehouses[/{warehouse}]                   list, create, load, drop (when empty)
/_iceberg/v1/{prefix}/namespaces[/{namespace}]          list (with parent), create, load, exists, drop
/_iceberg/v1/{prefix}/namespaces/{namespace}/properties update properties

Tables, commits and transactions are in `tables`; what a request names is read
by `requests`. Handlers are thin: parse the request, then call the catalog as the
authenticated caller may use it (`share_store.warehouses.access`, which checks
the policy) in a thread, answer in the spec's shapes; every
refusal is the spec's error model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.errors import InvalidParameter
from share_store.warehouses.errors import NoSuchWarehouse
from share_store.warehouses.names import check_namespace, check_warehouse, parse_namespace_path
from sharing_server.http.iceberg_errors import iceberg_errors
from sharing_server.own_warehouses.requests import (
    catalog_for,
    json_body,
    namespace_of,
    no_content,
    warehouse_of,
)

Handler = Callable[[Request], Awaitable[Response]]

#: What `GET /v1/config` says this catalog serves (clients skip what is not listed).
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
]


# -- configuration and warehouses --------------------------------------------------------


@iceberg_errors("NoSuchWarehouseException")
async def get_config(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse = request.query_params.get("warehouse")
    if not warehouse:
        raise InvalidParameter("name the warehouse: GET /v1/config?warehouse=NAME (a plain name, no s3://)")
    check_warehouse(warehouse)
    if not await run_in_threadpool(access.has_warehouse, warehouse):
        raise NoSuchWarehouse(f"Warehouse does not exist: {warehouse}")
    return JSONResponse({"defaults": {}, "overrides": {"prefix": warehouse}, "endpoints": ENDPOINTS})


@iceberg_errors("NoSuchWarehouseException")
async def list_warehouses(request: Request) -> Response:
    access = await catalog_for(request)
    names = await run_in_threadpool(access.list_warehouses)
    return JSONResponse({"warehouses": [{"name": name} for name in names]})


@iceberg_errors("NoSuchWarehouseException")
async def create_warehouse(request: Request) -> Response:
    access = await catalog_for(request)
    body = await json_body(request)
    name, adopt = body.get("name"), body.get("adopt", False)
    if not isinstance(name, str):
        raise InvalidParameter('the body must name the warehouse: {"name": "..."}')
    if not isinstance(adopt, bool):
        raise InvalidParameter("adopt must be true or false")
    await run_in_threadpool(access.create_warehouse, check_warehouse(name), adopt)
    return JSONResponse({"name": name}, status_code=200)


@iceberg_errors("NoSuchWarehouseException")
async def warehouse(request: Request) -> Response:
    access = await catalog_for(request)
    name = check_warehouse(request.path_params["warehouse"])
    if request.method == "DELETE":
        await run_in_threadpool(access.drop_warehouse, name)
        return no_content()
    if not await run_in_threadpool(access.has_warehouse, name):
        raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
    return no_content() if request.method == "HEAD" else JSONResponse({"name": name})


# -- namespaces ---------------------------------------------------------------------------


@iceberg_errors("NoSuchNamespaceException")
async def namespaces(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse = warehouse_of(request)
    if request.method == "POST":
        body = await json_body(request)
        levels = body.get("namespace")
        properties = body.get("properties") or {}
        if not isinstance(levels, list) or not all(isinstance(level, str) for level in levels):
            raise InvalidParameter('the body must name the namespace: {"namespace": ["level", ...]}')
        levels = check_namespace(levels)
        stored = await run_in_threadpool(access.create_namespace, warehouse, levels, properties)
        return JSONResponse({"namespace": list(levels), "properties": stored})
    parent_text = request.query_params.get("parent")
    parent = parse_namespace_path(parent_text) if parent_text else ()
    found = await run_in_threadpool(access.list_namespaces, warehouse, parent)
    return JSONResponse({"namespaces": [list(levels) for levels in found], "next-page-token": None})


@iceberg_errors("NoSuchNamespaceException")
async def namespace(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse, levels = warehouse_of(request), namespace_of(request)
    if request.method == "DELETE":
        await run_in_threadpool(access.drop_namespace, warehouse, levels)
        return no_content()
    properties = await run_in_threadpool(access.load_namespace, warehouse, levels)
    if request.method == "HEAD":
        return no_content()
    return JSONResponse({"namespace": list(levels), "properties": properties})


@iceberg_errors("NoSuchNamespaceException")
async def namespace_properties(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse, levels = warehouse_of(request), namespace_of(request)
    body = await json_body(request)
    removals, updates = body.get("removals") or [], body.get("updates") or {}
    if not isinstance(removals, list) or not all(isinstance(key, str) for key in removals):
        raise InvalidParameter("removals must be a list of property names")
    if not isinstance(updates, dict):
        raise InvalidParameter("updates must be an object of property names and values")
    updated, removed, missing = await run_in_threadpool(
        access.update_namespace_properties, warehouse, levels, removals, updates
    )
    return JSONResponse({"updated": updated, "removed": removed, "missing": missing or None})
