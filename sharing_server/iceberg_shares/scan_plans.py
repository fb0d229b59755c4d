"""Server-side scan planning at `/iceberg` (a recipient's share catalog):

POST   .../namespaces/{schema}/tables/{t}/plan         plan a scan (`completed`, tasks inline or plan
                                                    tasks; `submitted` past the budget, `plan_runs`)
GET    .../namespaces/{schema}/tables/{t}/plan/{plan-id}   the plan, done or still going
DELETE .../namespaces/{schema}/tables/{t}/plan/{plan-id}   cancel (204), unknown ids 404
POST   .../namespaces/{schema}/tables/{t}/tasks            one plan task's file scan tasks

The table is the one the token's share holds, planned over the metadata a load of it shows (a
restricted table's generated metadata: its allowed and derived files only); the decisions are
`share_store.iceberg.scan_plans`'. Keys are vended with a completed plan as with a load
(`X-Iceberg-Access-Delegation`, the table's grant); otherwise the client signs its reads as a
load told it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.iceberg import plan_runs, scan_plans
from share_store.iceberg.plan_runs import PlanRuns
from share_store.iceberg.scan_plans import PlanTokens
from share_store.iceberg_shares.planned_tables import share_binding, visible_table
from sharing_server.http.plan_answers import (
    NO_STORE,
    PLAN_ENDPOINTS,
    Planning,
    cancelled,
    planned,
    submitted,
)
from sharing_server.http.plan_bodies import plan_body
from sharing_server.iceberg_shares.delegation import read_access
from sharing_server.observability.audit import audit_fields

if TYPE_CHECKING:
    from sharing_server.iceberg_shares.routes import ShareCatalog

__all__ = ["PLAN_ENDPOINTS", "SharePlans"]


class SharePlans:
    """The planning handlers, given the share catalog (its tables and grants) and the plans' tokens."""

    def __init__(self, catalog: ShareCatalog, tokens: PlanTokens, runs: PlanRuns) -> None:
        self.catalog = catalog
        self.tokens = tokens
        self.runs = runs

    async def _planned(self, request: Request) -> tuple[Any, Any, Any, str]:
        """The token, the table the URL names, its grant and visible table, and the tokens' binding."""
        token, opened, table = await self.catalog._table(request)
        grants = self.catalog.grants

        def load() -> tuple[Any, Any]:
            grant = grants.load(table)
            return grant, visible_table(grant, table)

        grant, visible = await run_in_threadpool(load)
        return token, table, (grant, visible), share_binding(opened.name, table, grant, token.id)

    async def plan(self, request: Request) -> Response:
        asked = scan_plans.parse_plan_request(await plan_body(request))
        token, table, (grant, visible), bound = await self._planned(request)
        at, plan_id = await run_in_threadpool(plan_runs.pinned, visible, asked, self.tokens, bound)
        return await self._answer(
            request, plan_id, self._planning(request, visible, at, bound), table, token, grant
        )

    async def plan_by_id(self, request: Request) -> Response:
        plan_id = str(request.path_params["plan_id"])
        token, table, (grant, visible), bound = await self._planned(request)
        scan = plan_runs.of_plan_id(visible, plan_id, self.tokens, bound)
        if request.method == "DELETE":
            self.runs.cancel(plan_id)
            return Response(status_code=204)
        if self.runs.cancelled(plan_id):
            return cancelled()
        return await self._answer(
            request, plan_id, self._planning(request, visible, scan, bound), table, token, grant
        )

    def _planning(self, request: Request, visible: Any, scan: scan_plans.ScanAsked, bound: str) -> Planning:
        notes = audit_fields(request)

        def planning() -> dict[str, Any]:
            planned, _ = scan_plans.plan(visible, scan, self.tokens, bound)
            notes["planned"] = len(planned.file_scan_tasks) or f"{len(planned.plan_tasks)} plan tasks"
            return planned.to_json()

        return planning

    async def _answer(
        self,
        request: Request,
        plan_id: str,
        planning: Planning,
        table: Any,
        token: Any,
        grant: Any,
    ) -> Response:
        """`completed` with the plan (and keys, if the grant vends them), or `submitted` to a client
        that polls when the plan takes longer than the budget (`plan_runs`)."""
        plan = await planned(request, self.runs, plan_id, planning)
        if plan is None:
            return submitted(plan_id)
        body: dict[str, Any] = {"status": "completed", "plan-id": plan_id, **plan}
        catalog = self.catalog
        access = await run_in_threadpool(
            read_access, request, catalog.metrics, catalog.grants, table, token, grant
        )
        if "storage-credentials" in access:
            body["storage-credentials"] = access["storage-credentials"]
        return JSONResponse(body, headers=NO_STORE)

    async def tasks(self, request: Request) -> Response:
        plan_task = scan_plans.plan_task_of(await plan_body(request))
        _, _, (_, visible), bound = await self._planned(request)
        planned = await run_in_threadpool(scan_plans.fetch_tasks, visible, plan_task, self.tokens, bound)
        return JSONResponse(planned.to_json(), headers=NO_STORE)
