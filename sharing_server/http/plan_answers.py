"""What both Iceberg catalogs' scan planning answers alike: the endpoints they list in `/v1/config`,
and a plan's answer, made while the caller waits or, for a client that polls, in the background
past the budget (`share_store.iceberg.plan_runs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.iceberg import plan_runs
from share_store.iceberg.plan_runs import PlanRuns

PLAN_ENDPOINTS = [
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
]
NO_STORE = {"Cache-Control": "no-store"}
#: A plan's making, run when the caller waits or in the background (`PlanRuns`): the plan's JSON.
Planning = Callable[[], dict[str, Any]]


async def planned(
    request: Request, runs: PlanRuns, plan_id: str, planning: Planning
) -> dict[str, Any] | None:
    """The plan's JSON; None when a client that polls is to be told `submitted` (the plan took
    longer than the budget and goes on in the background). Other clients wait for the plan."""
    if plan_runs.polls(request.headers):
        return await runs.answer(plan_id, planning)
    return await run_in_threadpool(planning)


def submitted(plan_id: str) -> Response:
    return JSONResponse({"status": "submitted", "plan-id": plan_id}, headers=NO_STORE)


def cancelled() -> Response:
    return JSONResponse({"status": "cancelled"}, headers=NO_STORE)
