"""Maintenance of the catalog's tables over HTTP, in the spirit of S3 Tables' API (under `/_iceberg`):

    GET  /v1/warehouses/{w}/maintenance                    the warehouse's configuration
    PUT  /v1/warehouses/{w}/maintenance/{type}             {"value": {"status", "settings"}}
    GET  /v1/{prefix}/namespaces/{ns}/tables/{t}/maintenance          the table's configuration
    PUT  /v1/{prefix}/namespaces/{ns}/tables/{t}/maintenance/{type}   {"value": ...}
    GET  /v1/{prefix}/namespaces/{ns}/tables/{t}/maintenance-job-status
    POST /v1/{prefix}/namespaces/{ns}/tables/{t}/maintenance/run      run it now; each kind's run
                                                    (optionally {"types": [...]}: only those kinds)

Handlers read the request; `MaintenanceAccess` decides who may, `RunQueue` when a run may start
(429 with Retry-After beyond its limits), `Maintainer` what happens.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.catalog.callers import CatalogCallers
from share_store.catalog.maintenance.access import MaintenanceAccess
from share_store.catalog.maintenance.configuration import KINDS
from share_store.catalog.maintenance.maintainer import Maintainer, described_run
from share_store.catalog.maintenance.queue import RunQueue
from share_store.catalog.names import check_warehouse
from share_store.errors import InvalidParameter
from sharing_server.auth.catalog_callers import CatalogAuthentication
from sharing_server.catalog import codec


class MaintenanceEndpoints:
    def __init__(
        self, maintainer: Maintainer, callers: CatalogCallers, queue: RunQueue | None = None
    ) -> None:
        self.maintainer = maintainer
        self.authentication = CatalogAuthentication(callers)
        self.queue = queue or RunQueue(maintainer.limits)

    async def access(self, request: Request) -> MaintenanceAccess:
        return MaintenanceAccess(self.maintainer, await self.authentication.caller(request))

    async def warehouse(self, request: Request) -> Response:
        access = await self.access(request)
        warehouse = check_warehouse(request.path_params["warehouse"])
        if request.method == "PUT":
            kind, value = request.path_params["kind"], _value(await request.body())
            await run_in_threadpool(access.configure_warehouse, warehouse, kind, value)
            return Response(status_code=204)
        configuration = await run_in_threadpool(access.warehouse_configuration, warehouse)
        return JSONResponse({"warehouse": warehouse, "configuration": configuration})

    async def table(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        name = codec.table_at(params["prefix"], params["namespace"], params["table"])
        if request.method == "PUT":
            kind, value = params["kind"], _value(await request.body())
            await run_in_threadpool(access.configure_table, name, kind, value)
            return Response(status_code=204)
        configuration = await run_in_threadpool(access.table_configuration, name)
        return JSONResponse({"table": str(name), "configuration": configuration})

    async def status(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        name = codec.table_at(params["prefix"], params["namespace"], params["table"])
        return JSONResponse({"status": await run_in_threadpool(access.status, name)})

    async def run(self, request: Request) -> Response:
        params = request.path_params
        access = await self.access(request)
        name = codec.table_at(params["prefix"], params["namespace"], params["table"])
        kinds = _kinds(await request.body())
        self.queue.check_caller(access.who.name)  # before the store is asked anything of the table
        await run_in_threadpool(access.may_run, name)
        # The turn is waited for on the event loop: a waiting run holds no thread of the pool.
        async with self.queue.turn(name, access.who.name):
            runs = await run_in_threadpool(access.run, name, kinds)
        return JSONResponse({"runs": {kind: described_run(run) for kind, run in runs.items()}})


def _kinds(body: bytes) -> tuple[str, ...]:
    """A run's kinds: every kind without a body, else the body's `types` (checked by the Maintainer)."""
    if not body.strip():
        return KINDS
    parsed = codec.json_object(body)
    kinds = parsed["types"] if set(parsed) == {"types"} else None
    if not isinstance(kinds, list) or not kinds or not all(isinstance(kind, str) for kind in kinds):
        raise InvalidParameter('a maintenance run\'s body is {"types": ["icebergCompaction", ...]} or none')
    return tuple(kinds)


def _value(body: bytes) -> Any:
    parsed = codec.json_object(body)
    if set(parsed) != {"value"}:
        raise InvalidParameter('a maintenance configuration is {"value": {"status": ..., "settings": ...}}')
    return parsed["value"]
