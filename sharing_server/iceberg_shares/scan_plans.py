"""Server-side scan planning at `/iceberg` (a recipient's share catalog):

POST   .../namespaces/{schema}/tables/{t}/plan         plan a scan (`completed`, tasks inline or plan tasks)
GET    .../namespaces/{schema}/tables/{t}/plan/{plan-id}   the same plan, planned again
DELETE .../namespaces/{schema}/tables/{t}/plan/{plan-id}   cancel: nothing is held (204), unknown ids 404
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

from share_store.iceberg import scan_plans
from share_store.iceberg.scan_plans import PlanTokens
from share_store.iceberg_shares.planned_tables import share_binding, visible_table
from sharing_server.http.plan_bodies import plan_body
from sharing_server.iceberg_shares.delegation import read_access
from sharing_server.observability.audit import audit_fields

if TYPE_CHECKING:
    from sharing_server.iceberg_shares.routes import ShareCatalog

PLAN_ENDPOINTS = [
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
]
NO_STORE = {"Cache-Control": "no-store"}


class SharePlans:
    """The planning handlers, given the share catalog (its tables and grants) and the plans' tokens."""

    def __init__(self, catalog: ShareCatalog, tokens: PlanTokens) -> None:
        self.catalog = catalog
        self.tokens = tokens

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
        planned, plan_id = await run_in_threadpool(scan_plans.plan, visible, asked, self.tokens, bound)
        body: dict[str, Any] = {"status": "completed", "plan-id": plan_id, **planned.to_json()}
        audit_fields(request)["planned"] = (
            len(planned.file_scan_tasks) or f"{len(planned.plan_tasks)} plan tasks"
        )
        return await self._answer(request, body, table, token, grant)

    async def _answer(
        self, request: Request, body: dict[str, Any], table: Any, token: Any, grant: Any
    ) -> Response:
        catalog = self.catalog
        access = await run_in_threadpool(
            read_access, request, catalog.metrics, catalog.grants, table, token, grant
        )
        if "storage-credentials" in access:
            body["storage-credentials"] = access["storage-credentials"]
        return JSONResponse(body, headers=NO_STORE)

    async def plan_by_id(self, request: Request) -> Response:
        plan_id = str(request.path_params["plan_id"])
        token, table, (grant, visible), bound = await self._planned(request)
        payload = self.tokens.read("plan", plan_id, bound)
        if request.method == "DELETE":
            return Response(status_code=204)  # a plan holds nothing on the server to free
        scan = scan_plans.ScanAsked.from_json(payload["q"])
        planned, _ = await run_in_threadpool(scan_plans.plan, visible, scan, self.tokens, bound)
        body = {"status": "completed", "plan-id": plan_id, **planned.to_json()}
        return await self._answer(request, body, table, token, grant)

    async def tasks(self, request: Request) -> Response:
        plan_task = scan_plans.plan_task_of(await plan_body(request))
        _, _, (_, visible), bound = await self._planned(request)
        planned = await run_in_threadpool(scan_plans.fetch_tasks, visible, plan_task, self.tokens, bound)
        return JSONResponse(planned.to_json(), headers=NO_STORE)
