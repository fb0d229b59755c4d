"""AIStor Tables' catalog API for tables: list, create (staged too), load, commit, drop, rename,
register, multi-table transactions and metrics reports, under `/_iceberg/v1/{prefix}`.

Each handler reads the request (its proof, path and query), then calls down: the
body is read into pyiceberg's models and the names checked by
`share_store.own_warehouses.rest`, the caller's policy by `CatalogAccess`, the commit
and location rules by the catalog. A failed requirement, or a commit that lost
the race for the table's pointer, is a 409 `CommitFailedException`, which clients
answer by refreshing and retrying.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.own_warehouses import rest
from sharing_server.auth.catalog import credentials_of
from sharing_server.http.iceberg_errors import iceberg_errors
from sharing_server.own_warehouses.requests import CatalogEndpoints


class TableEndpoints(CatalogEndpoints):
    @iceberg_errors("NoSuchNamespaceException")
    async def tables(self, request: Request) -> Response:
        credentials = await credentials_of(request)
        params = request.path_params
        access = await self.access(credentials)
        warehouse, levels = rest.namespace_at(params["prefix"], params["namespace"])
        if request.method == "POST":
            table, new = rest.new_table(warehouse, levels, credentials.body)
            loaded = await run_in_threadpool(access.create_table, table, new)
            return JSONResponse(rest.load_result(loaded))
        names = await run_in_threadpool(access.list_tables, warehouse, levels)
        identifiers = [{"namespace": list(levels), "name": name} for name in names]
        return JSONResponse({"identifiers": identifiers, "next-page-token": None})

    @iceberg_errors("NoSuchTableException")
    async def table(self, request: Request) -> Response:
        credentials = await credentials_of(request)
        params, query = request.path_params, request.query_params
        access = await self.access(credentials)
        name = rest.table_at(params["prefix"], params["namespace"], params["table"])
        if request.method == "DELETE":
            purge = query.get("purgeRequested", "false").lower() == "true"
            await run_in_threadpool(access.drop_table, name, purge)
            return Response(status_code=204)
        if request.method == "POST":
            commit = rest.commit(name, credentials.body)
            loaded = await run_in_threadpool(access.commit, name, commit)
            return JSONResponse(rest.commit_result(loaded))
        if request.method == "HEAD":
            exists = await run_in_threadpool(access.table_exists, name)
            return Response(status_code=204 if exists else 404)
        snapshots = rest.snapshots_mode(query.get("snapshots"))
        loaded = await run_in_threadpool(access.load_table, name)
        return JSONResponse(rest.load_result(loaded, snapshots))

    @iceberg_errors("NoSuchNamespaceException")
    async def register(self, request: Request) -> Response:
        credentials = await credentials_of(request)
        params = request.path_params
        access = await self.access(credentials)
        warehouse, levels = rest.namespace_at(params["prefix"], params["namespace"])
        name, metadata_location, overwrite = rest.registration(warehouse, levels, credentials.body)
        loaded = await run_in_threadpool(access.register_table, name, metadata_location, overwrite)
        return JSONResponse(rest.load_result(loaded))

    @iceberg_errors("NoSuchTableException")
    async def rename(self, request: Request) -> Response:
        credentials = await credentials_of(request)
        warehouse = request.path_params["prefix"]
        access = await self.access(credentials)
        source, target = rest.renaming(warehouse, credentials.body)
        await run_in_threadpool(access.rename_table, source, target)
        return Response(status_code=204)

    @iceberg_errors("NoSuchTableException")
    async def transaction(self, request: Request) -> Response:
        credentials = await credentials_of(request)
        warehouse = request.path_params["prefix"]
        access = await self.access(credentials)
        await run_in_threadpool(access.commit_transaction, rest.transaction(warehouse, credentials.body))
        return Response(status_code=204)

    @iceberg_errors("NoSuchTableException")
    async def metrics(self, request: Request) -> Response:
        """Metrics reports are accepted and dropped: the audit line already records the request."""
        credentials = await credentials_of(request)
        params = request.path_params
        access = await self.access(credentials)
        name = rest.table_at(params["prefix"], params["namespace"], params["table"])
        access.report_metrics(name)
        rest.json_object(credentials.body)
        return Response(status_code=204)
