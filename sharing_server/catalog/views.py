"""AIStor Tables' catalog API for views: list, create, load, exists, replace, drop, rename and register,
under `/_iceberg/v1/{prefix}`; dropped views listed (`GET .../views?dropped=true`) and undropped
(`POST /v1/{prefix}/views/undrop`), as tables are.

As for tables (`tables`): each handler reads the request (its proof, path and
query), authenticates the caller, then calls down: the body is read and the
names checked by `sharing_server.catalog.codec`, the caller's policy by
`CatalogAccess` (the table actions, on the view's table ARN), the commit and
location rules by the catalog. A replace that lost the race for the view's
pointer, or whose `assert-view-uuid` failed, is a 409 `CommitFailedException`.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.iceberg.etags import view_load_tag
from sharing_server.catalog import codec
from sharing_server.catalog.endpoints import CatalogEndpoints
from sharing_server.http.entity_tags import not_modified

#: What `GET /v1/config` lists of the views' endpoints.
VIEW_ENDPOINTS = [
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
]


class ViewEndpoints(CatalogEndpoints):
    async def views(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        warehouse, levels = codec.namespace_at(params["prefix"], params["namespace"])
        if request.method == "POST":
            view, new = codec.new_view(warehouse, levels, await request.body())
            loaded = await run_in_threadpool(access.create_view, view, new)
            return JSONResponse(codec.view_result(loaded))
        if codec.dropped_asked(request.query_params.get("dropped")):
            dropped = await run_in_threadpool(access.list_dropped_views, warehouse, levels)
            return JSONResponse(codec.dropped_result(dropped))
        names = await run_in_threadpool(access.list_views, warehouse, levels)
        return JSONResponse(codec.identifiers_result(levels, names))

    async def undrop(self, request: Request) -> Response:
        warehouse = request.path_params["prefix"]
        access = await self.access(request)
        targets = codec.undrop_targets(warehouse, await request.body())
        await run_in_threadpool(access.undrop_views, targets)
        return Response(status_code=204)

    async def view(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        name = codec.table_at(params["prefix"], params["namespace"], params["view"])
        if request.method == "DELETE":
            await run_in_threadpool(access.drop_view, name)
            return Response(status_code=204)
        if request.method == "POST":
            commit = codec.view_commit(await request.body())
            loaded = await run_in_threadpool(access.replace_view, name, commit)
            tag = view_load_tag(loaded.metadata_location)
            return JSONResponse(codec.view_result(loaded), headers={"ETag": tag})
        if request.method == "HEAD":
            exists = await run_in_threadpool(access.view_exists, name)
            return Response(status_code=204 if exists else 404)
        loaded = await run_in_threadpool(access.load_view, name)
        tag = view_load_tag(loaded.metadata_location)
        unchanged = not_modified(request.headers, tag)
        if unchanged is not None:
            return unchanged
        return JSONResponse(codec.view_result(loaded), headers={"ETag": tag})

    async def register(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        warehouse, levels = codec.namespace_at(params["prefix"], params["namespace"])
        name, metadata_location = codec.view_registration(warehouse, levels, await request.body())
        loaded = await run_in_threadpool(access.register_view, name, metadata_location)
        return JSONResponse(codec.view_result(loaded))

    async def rename(self, request: Request) -> Response:
        warehouse = request.path_params["prefix"]
        access = await self.access(request)
        source, target = codec.renaming(warehouse, await request.body())
        await run_in_threadpool(access.rename_view, source, target)
        return Response(status_code=204)
