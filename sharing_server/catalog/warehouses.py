"""AIStor Tables' catalog API under `/_iceberg`: configuration, warehouses and namespaces.

/_iceberg/v1/config?warehouse=NAME                      the warehouse's prefix and the endpoints served
/_iceberg/v1/oauth/tokens                               a catalog user's keys → a bearer token
/_iceberg/v1/warehouses[/{warehouse}]                   list, create, load, drop (when empty)
/_iceberg/v1/{prefix}/namespaces[/{namespace}]          list (with parent), create, load, exists, drop
/_iceberg/v1/{prefix}/namespaces/{namespace}/properties update properties

Tables, commits and transactions are in `tables`, views in `views`. Handlers are thin: read the
request, then call down: names and bodies are checked by
`sharing_server.catalog.codec`, the caller's policy by `CatalogAccess`; every
refusal is the spec's error model.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.catalog.errors import NoSuchWarehouse
from share_store.catalog.names import IDENTIFIER_SUPPORT, NAMESPACE_SEPARATOR, check_warehouse
from share_store.errors import InvalidParameter
from sharing_server.catalog import codec
from sharing_server.catalog.endpoints import CatalogEndpoints
from sharing_server.catalog.scan_plans import PLAN_ENDPOINTS
from sharing_server.catalog.views import VIEW_ENDPOINTS

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
    *VIEW_ENDPOINTS,
]
#: Served when the provider vends keys to writers (`[warehouses] access_delegation`).
CREDENTIALS_ENDPOINTS = ["GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"]
#: Served when the provider signs writers' requests (Iceberg 1.11's signer, beside the grant's).
SIGN_ENDPOINTS = ["POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"]


class WarehouseEndpoints(CatalogEndpoints):
    #: The keys' lifetime as advertised (`PT30M`) when the mutations take an `Idempotency-Key`
    #: (`idempotent_routes`); None when they do not.
    idempotency: str | None = None

    # -- configuration and warehouses --------------------------------------------------

    async def config(self, request: Request) -> Response:
        warehouse = request.query_params.get("warehouse")
        access = await self.access(request)
        if not warehouse:
            raise InvalidParameter(
                "name the warehouse: GET /v1/config?warehouse=NAME (a plain name, no s3://)"
            )
        if not await run_in_threadpool(access.has_warehouse, check_warehouse(warehouse)):
            raise NoSuchWarehouse(f"Warehouse does not exist: {warehouse}")
        endpoints = ENDPOINTS + PLAN_ENDPOINTS + (CREDENTIALS_ENDPOINTS if self.data.vends else [])
        endpoints += SIGN_ENDPOINTS if self.data.signs else []
        overrides = {"prefix": warehouse, "namespace-separator": NAMESPACE_SEPARATOR}
        config = {"defaults": IDENTIFIER_SUPPORT, "overrides": overrides, "endpoints": endpoints}
        if self.idempotency:  # the spec's one signal of keys served: the top-level lifetime
            config["idempotency-key-lifetime"] = self.idempotency
        return JSONResponse(config)

    async def warehouses(self, request: Request) -> Response:
        access = await self.access(request)
        if request.method == "POST":
            name, adopt = codec.new_warehouse(await request.body())
            await run_in_threadpool(access.create_warehouse, name, adopt)
            return JSONResponse({"name": name})
        names = await run_in_threadpool(access.list_warehouses)
        return JSONResponse({"warehouses": [{"name": name} for name in names]})

    async def warehouse(self, request: Request) -> Response:
        raw = request.path_params["warehouse"]
        access = await self.access(request)
        name = check_warehouse(raw)
        if request.method == "DELETE":
            await run_in_threadpool(access.drop_warehouse, name)
            return Response(status_code=204)
        if request.method == "HEAD":
            exists = await run_in_threadpool(access.has_warehouse, name)
            return Response(status_code=204 if exists else 404)
        properties = await run_in_threadpool(access.warehouse_properties, name)
        return JSONResponse({"name": name, "properties": properties})

    async def warehouse_properties(self, request: Request) -> Response:
        """The warehouse's `table-default.*` properties changed, as a namespace's are (the provider's)."""
        raw = request.path_params["warehouse"]
        access = await self.access(request)
        name = check_warehouse(raw)
        removals, updates = codec.property_changes(await request.body())
        updated, removed, missing = await run_in_threadpool(
            access.update_warehouse_properties, name, removals, updates
        )
        return JSONResponse({"updated": updated, "removed": removed, "missing": missing or None})

    # -- namespaces ---------------------------------------------------------------------

    async def namespaces(self, request: Request) -> Response:
        raw, parent_text = request.path_params["prefix"], request.query_params.get("parent")
        access = await self.access(request)
        warehouse = check_warehouse(raw)
        if request.method == "POST":
            levels, properties = codec.new_namespace(await request.body())
            stored = await run_in_threadpool(access.create_namespace, warehouse, levels, properties)
            return JSONResponse({"namespace": list(levels), "properties": stored})
        parent = codec.parent_namespace(parent_text)
        found = await run_in_threadpool(access.list_namespaces, warehouse, parent)
        return JSONResponse({"namespaces": [list(levels) for levels in found], "next-page-token": None})

    async def namespace(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        warehouse, levels = codec.namespace_at(params["prefix"], params["namespace"])
        if request.method == "DELETE":
            await run_in_threadpool(access.drop_namespace, warehouse, levels)
            return Response(status_code=204)
        properties = await run_in_threadpool(access.load_namespace, warehouse, levels)
        if request.method == "HEAD":
            return Response(status_code=204)
        return JSONResponse({"namespace": list(levels), "properties": properties})

    async def namespace_properties(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        warehouse, levels = codec.namespace_at(params["prefix"], params["namespace"])
        removals, updates = codec.property_changes(await request.body())
        updated, removed, missing = await run_in_threadpool(
            access.update_namespace_properties, warehouse, levels, removals, updates
        )
        return JSONResponse({"updated": updated, "removed": removed, "missing": missing or None})
