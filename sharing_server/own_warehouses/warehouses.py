"""AIStor Tables' catalog API under `/_iceberg`: configuration, warehouses and namespaces.

/_iceberg/v1/config?warehouse=NAME                      the warehouse's prefix and the endpoints served
/_iceberg/v1/oauth/tokens                               a catalog user's keys → a bearer token
/_iceberg/v1/warehouses[/{warehouse}]                   list, create, load, drop (when empty)
/_iceberg/v1/{prefix}/namespaces[/{namespace}]          list (with parent), create, load, exists, drop
/_iceberg/v1/{prefix}/namespaces/{namespace}/properties update properties

Tables, commits and transactions are in `tables`; what a request names is read
by `requests`. Handlers are thin: authenticate (`callers`), check the policy, call
`share_store.warehouses.catalog` in a thread, answer in the spec's shapes; every
refusal is the spec's error model.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.errors import InvalidParameter
from share_store.warehouses import policies as actions
from share_store.warehouses.errors import NoSuchWarehouse
from share_store.warehouses.names import check_namespace, check_warehouse, parse_namespace_path
from share_store.warehouses.policies import warehouse_arn
from sharing_server.http.iceberg_errors import IcebergError, iceberg_errors
from sharing_server.own_warehouses.callers import caller_of
from sharing_server.own_warehouses.requests import catalog, json_body, namespace_of, no_content, warehouse_of

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
    caller = await caller_of(request)
    warehouse = request.query_params.get("warehouse")
    if not warehouse:
        raise InvalidParameter("name the warehouse: GET /v1/config?warehouse=NAME (a plain name, no s3://)")
    check_warehouse(warehouse)
    caller.require(actions.GET_TABLE_BUCKET, warehouse_arn(warehouse))
    if not await run_in_threadpool(catalog(request).has_warehouse, warehouse):
        raise NoSuchWarehouse(f"Warehouse does not exist: {warehouse}")
    return JSONResponse({"defaults": {}, "overrides": {"prefix": warehouse}, "endpoints": ENDPOINTS})


@iceberg_errors("NoSuchWarehouseException")
async def list_warehouses(request: Request) -> Response:
    caller = await caller_of(request)
    names = await run_in_threadpool(catalog(request).list_warehouses)
    visible = [n for n in names if caller.allows(actions.LIST_TABLE_BUCKETS, warehouse_arn(n))]
    return JSONResponse({"warehouses": [{"name": name} for name in visible]})


@iceberg_errors("NoSuchWarehouseException")
async def create_warehouse(request: Request) -> Response:
    caller = await caller_of(request)
    body = await json_body(request)
    name, adopt = body.get("name"), body.get("adopt", False)
    if not isinstance(name, str):
        raise InvalidParameter('the body must name the warehouse: {"name": "..."}')
    if not isinstance(adopt, bool):
        raise InvalidParameter("adopt must be true or false")
    check_warehouse(name)
    caller.require(actions.CREATE_TABLE_BUCKET, warehouse_arn(name))
    if adopt and caller.policy is not None:
        # Taking a bucket as it is makes its objects a warehouse's: the provider decides that.
        raise IcebergError(403, "only the admin token may adopt an existing bucket", "ForbiddenException")
    await run_in_threadpool(catalog(request).create_warehouse, name, adopt)
    return JSONResponse({"name": name}, status_code=200)


@iceberg_errors("NoSuchWarehouseException")
async def warehouse(request: Request) -> Response:
    caller = await caller_of(request)
    name = check_warehouse(request.path_params["warehouse"])
    if request.method == "DELETE":
        caller.require(actions.DELETE_TABLE_BUCKET, warehouse_arn(name))
        await run_in_threadpool(catalog(request).drop_warehouse, name)
        return no_content()
    caller.require(actions.GET_TABLE_BUCKET, warehouse_arn(name))
    if not await run_in_threadpool(catalog(request).has_warehouse, name):
        raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
    return no_content() if request.method == "HEAD" else JSONResponse({"name": name})


# -- namespaces ---------------------------------------------------------------------------


@iceberg_errors("NoSuchNamespaceException")
async def namespaces(request: Request) -> Response:
    caller = await caller_of(request)
    warehouse = warehouse_of(request)
    arn = warehouse_arn(warehouse)
    if request.method == "POST":
        caller.require(actions.CREATE_NAMESPACE, arn)
        body = await json_body(request)
        levels = body.get("namespace")
        properties = body.get("properties") or {}
        if not isinstance(levels, list) or not all(isinstance(level, str) for level in levels):
            raise InvalidParameter('the body must name the namespace: {"namespace": ["level", ...]}')
        levels = check_namespace(levels)
        await run_in_threadpool(catalog(request).create_namespace, warehouse, levels, properties)
        stored = await run_in_threadpool(catalog(request).load_namespace, warehouse, levels)
        return JSONResponse({"namespace": list(levels), "properties": stored})
    caller.require(actions.LIST_NAMESPACES, arn)
    parent_text = request.query_params.get("parent")
    parent = parse_namespace_path(parent_text) if parent_text else ()
    found = await run_in_threadpool(catalog(request).list_namespaces, warehouse, parent)
    return JSONResponse({"namespaces": [list(levels) for levels in found], "next-page-token": None})


@iceberg_errors("NoSuchNamespaceException")
async def namespace(request: Request) -> Response:
    caller = await caller_of(request)
    warehouse, levels = warehouse_of(request), namespace_of(request)
    arn = warehouse_arn(warehouse)
    if request.method == "DELETE":
        caller.require(actions.DELETE_NAMESPACE, arn)
        await run_in_threadpool(catalog(request).drop_namespace, warehouse, levels)
        return no_content()
    caller.require(actions.GET_NAMESPACE, arn)
    properties = await run_in_threadpool(catalog(request).load_namespace, warehouse, levels)
    if request.method == "HEAD":
        return no_content()
    return JSONResponse({"namespace": list(levels), "properties": properties})


@iceberg_errors("NoSuchNamespaceException")
async def namespace_properties(request: Request) -> Response:
    caller = await caller_of(request)
    warehouse, levels = warehouse_of(request), namespace_of(request)
    caller.require(actions.UPDATE_NAMESPACE_PROPERTIES, warehouse_arn(warehouse))
    body = await json_body(request)
    removals, updates = body.get("removals") or [], body.get("updates") or {}
    if not isinstance(removals, list) or not all(isinstance(key, str) for key in removals):
        raise InvalidParameter("removals must be a list of property names")
    if not isinstance(updates, dict):
        raise InvalidParameter("updates must be an object of property names and values")
    updated, removed, missing = await run_in_threadpool(
        catalog(request).update_namespace_properties, warehouse, levels, removals, updates
    )
    return JSONResponse({"updated": updated, "removed": removed, "missing": missing or None})
