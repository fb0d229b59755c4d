"""Server-side scan planning at `/_iceberg` (a writer's own warehouse):

POST   /v1/{prefix}/namespaces/{ns}/tables/{t}/plan             plan a scan (`completed`, or
                                                                `submitted` past the budget)
GET    /v1/{prefix}/namespaces/{ns}/tables/{t}/plan/{plan-id}   the plan, done or still going
DELETE /v1/{prefix}/namespaces/{ns}/tables/{t}/plan/{plan-id}   cancel (204)
POST   /v1/{prefix}/namespaces/{ns}/tables/{t}/tasks            one plan task's file scan tasks

A plan names the table's files, so the caller must be allowed `s3tables:GetTableData` on it, as
for keys or signatures; its manifests are read through a FileIO confined to the table's recorded
location. A completed plan carries `storage-credentials` when the engine asks for vended keys
and the server vends them (`X-Iceberg-Access-Delegation`), as a load does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.catalog.access import CatalogAccess
from share_store.catalog.callers import CatalogCallers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.data_access import DataAccess, DataRights
from share_store.catalog.names import TableName
from share_store.errors import Forbidden
from share_store.iceberg import plan_runs, scan_plans
from share_store.iceberg.plan_runs import PlanRuns
from share_store.iceberg.scan_plans import PlanTokens
from sharing_server import paths
from sharing_server.catalog import codec
from sharing_server.catalog.endpoints import CatalogEndpoints
from sharing_server.http.access_delegation import asked_modes
from sharing_server.http.plan_answers import (
    NO_STORE,
    PLAN_ENDPOINTS,
    Planning,
    cancelled,
    planned,
    submitted,
)
from sharing_server.http.plan_bodies import plan_body
from sharing_server.observability.audit import audit_fields

__all__ = ["PLAN_ENDPOINTS", "PlanEndpoints"]
#: The `storage-credentials` of a completed plan, vended when it is answered.
Credentials = Callable[[], list[Any]]


class PlanEndpoints(CatalogEndpoints):
    def __init__(
        self,
        catalog: WarehouseCatalog,
        callers: CatalogCallers,
        data: DataAccess,
        tokens: PlanTokens,
        runs: PlanRuns,
    ) -> None:
        super().__init__(catalog, callers, data)
        self.tokens = tokens
        self.runs = runs

    def _table(self, request: Request, access: CatalogAccess) -> tuple[TableName, Any, Any, str]:
        """The table the path names, loaded for a caller who may read its data; its pyiceberg
        `Table` (manifests read only inside its location) and what its plan tokens are bound to."""
        from pyiceberg.catalog.noop import NoopCatalog

        from share_store.catalog.file_io import ConfinedFileIO
        from share_store.catalog.table_source import ServerTable

        params = request.path_params
        name = codec.table_at(params["prefix"], params["namespace"], params["table"])
        if not DataRights.of(access.who, name).read:
            raise Forbidden(f"{access.who.name} may not read the data of {name}: no plan is made for it")
        loaded = access.load_table(name)
        location = loaded.location or self.catalog.table_location(name)
        table = ServerTable(
            identifier=(*name.namespace, name.name),
            metadata=loaded.metadata,
            metadata_location=loaded.metadata_location or "",
            io=ConfinedFileIO(self.catalog.storage, location),
            catalog=NoopCatalog("scan-planning"),
        )
        who = f"{access.who.name}\x00{access.who.key or ''}"
        bound = scan_plans.binding("warehouse", name.warehouse, *name.namespace, name.name,
                                   str(loaded.metadata.table_uuid), who)  # fmt: skip
        return name, loaded, table, bound

    def _credentials(
        self, request: Request, access: CatalogAccess, name: TableName, loaded: Any
    ) -> list[Any]:
        """`storage-credentials` for a completed plan: vended keys, when asked for and served."""
        asked = [mode for mode in asked_modes(request.headers) if mode == "vended-credentials"]
        if not asked or not self.data.vends:
            return []
        signer = str(request.base_url).rstrip("/") + paths.WAREHOUSE_PREFIX
        _, credentials = self.data.delegate(asked, access, name, loaded, signer, audit_fields(request))
        return credentials

    async def plan(self, request: Request) -> Response:
        body = await plan_body(request)

        def prepare(access: CatalogAccess) -> tuple[str, Planning, Credentials]:
            asked = scan_plans.parse_plan_request(body)
            name, loaded, table, bound = self._table(request, access)
            at, plan_id = plan_runs.pinned(table, asked, self.tokens, bound)
            return plan_id, self._planning(table, at, bound), self._vending(request, access, name, loaded)

        return await self._answer(request, *await self.as_caller(request, prepare))

    async def plan_by_id(self, request: Request) -> Response:
        plan_id = str(request.path_params["plan_id"])

        def prepare(access: CatalogAccess) -> tuple[Planning, Credentials] | None:
            name, loaded, table, bound = self._table(request, access)
            scan = plan_runs.of_plan_id(table, plan_id, self.tokens, bound)
            if request.method == "DELETE":
                return None
            return self._planning(table, scan, bound), self._vending(request, access, name, loaded)

        prepared = await self.as_caller(request, prepare)
        if prepared is None:
            self.runs.cancel(plan_id)
            return Response(status_code=204)
        if self.runs.cancelled(plan_id):
            return cancelled()
        return await self._answer(request, plan_id, *prepared)

    def _vending(self, request: Request, access: CatalogAccess, name: TableName, loaded: Any) -> Credentials:
        # Vended only once the plan is complete: a `submitted` answer (and each poll of it) needs none.
        return lambda: self._credentials(request, access, name, loaded)

    def _planning(self, table: Any, scan: scan_plans.ScanAsked, bound: str) -> Planning:
        return lambda: scan_plans.plan(table, scan, self.tokens, bound)[0].to_json()

    async def _answer(
        self, request: Request, plan_id: str, planning: Planning, vending: Credentials
    ) -> Response:
        """`completed` with the plan (and keys, if vended), or `submitted` to a client that polls
        when the plan takes longer than the budget (`plan_runs`)."""
        plan = await planned(request, self.runs, plan_id, planning)
        if plan is None:
            return submitted(plan_id)
        answer = {"status": "completed", "plan-id": plan_id, **plan}
        credentials = await run_in_threadpool(vending)
        if credentials:
            answer["storage-credentials"] = credentials
        return JSONResponse(answer, headers=NO_STORE)

    async def tasks(self, request: Request) -> Response:
        plan_task = scan_plans.plan_task_of(await plan_body(request))

        def fetch(access: CatalogAccess) -> dict[str, Any]:
            _, _, table, bound = self._table(request, access)
            return scan_plans.fetch_tasks(table, plan_task, self.tokens, bound).to_json()

        return JSONResponse(await self.as_caller(request, fetch), headers=NO_STORE)
