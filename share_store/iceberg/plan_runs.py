"""Scan plans that take longer than a budget, answered `submitted` and fetched by their plan id
(Iceberg REST 1.11: `POST …/plan` answers `submitted` with a `plan-id`; the client polls
`GET …/plan/{plan-id}` until `completed`, or cancels with `DELETE`).

A plan runs in one of this process's worker threads. Its caller waits up to the budget
(`[limits] scan_plan_budget`); if the plan is not done by then, the answer is `submitted`. The run
goes on, and its result is kept for polls (`KEPT` plans, each for `KEPT_SECONDS`). A poll that
reaches another replica, or this one after a restart, finds no run there: it starts the plan
again from its id, which names the scan and its snapshot (`scan_plans.PlanTokens`), and waits the
budget again. So no plan state is shared, and every replica answers every plan id.

Only clients that poll are told `submitted` (`polls`): pyiceberg 0.12 raises
`NotImplementedError` on it, so it is always answered in full, however long planning takes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from share_store.errors import RateLimited
from share_store.iceberg.scan_plans import NoSuchPlanId, PlanTokens, ScanAsked, scan_of

#: Seconds a caller that polls waits for its plan before it is told `submitted` (`[limits]`).
SCAN_PLAN_BUDGET = 10.0
#: Plans run in the background at once, and waiting for a worker, per process.
WORKERS = 2
PENDING = 16
#: Runs whose result is kept for polls, and for how long after they end.
KEPT = 64
KEPT_SECONDS = 600.0

#: Java's REST client polls a submitted plan since 1.11 (`X-Client-Version: Apache Iceberg 1.11.0 …`).
_JAVA = re.compile(r"Apache Iceberg (\d+)\.(\d+)")


def polls(headers: Mapping[str, str]) -> bool:
    """Whether the client asking polls a `submitted` plan: Java's REST client from 1.11 on. Others
    (pyiceberg 0.12 raises on `submitted`; clients we do not know) get every plan in full."""
    version = _JAVA.match(headers.get("x-client-version", ""))
    return version is not None and (int(version[1]), int(version[2])) >= (1, 11)


class PlanRuns:
    """The plans this process is making in the background, by plan id."""

    def __init__(self, budget: float, workers: int = WORKERS) -> None:
        self.budget = budget
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scan-plan")
        self._runs: OrderedDict[str, tuple[Future[dict[str, Any]], float]] = OrderedDict()
        self._cancelled: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    async def answer(self, plan_id: str, work: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """The plan's result once `work` (its planning, in a worker thread) is done within the
        budget; None when it is not (the caller answers `submitted`). A run of the same plan id
        already going or done is waited for, not started again. Its errors are raised."""
        future = self._run(plan_id, work)
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.budget)
        except TimeoutError:
            return None

    def cancelled(self, plan_id: str) -> bool:
        with self._lock:
            return plan_id in self._cancelled

    def cancel(self, plan_id: str) -> None:
        """Stop a plan (if it has not started yet) and forget its result: a poll then says
        `cancelled` here. Another replica knows nothing of it, and would plan it again."""
        with self._lock:
            run = self._runs.pop(plan_id, None)
            self._cancelled[plan_id] = time.monotonic()
            while len(self._cancelled) > KEPT:
                self._cancelled.popitem(last=False)
        if run is not None:
            run[0].cancel()

    def _run(self, plan_id: str, work: Callable[[], dict[str, Any]]) -> Future[dict[str, Any]]:
        now = time.monotonic()
        with self._lock:
            self._forget_old(now)
            run = self._runs.get(plan_id)
            if run is not None and not (run[0].done() and run[0].exception() is not None):
                self._runs.move_to_end(plan_id)
                return run[0]
            if sum(1 for f, _ in self._runs.values() if not f.done()) >= WORKERS + PENDING:
                raise RateLimited("too many scans are being planned at once; try again shortly", 5)
            future = self._pool.submit(work)
            self._runs[plan_id] = (future, now)
            while len(self._runs) > KEPT:
                oldest = next(iter(self._runs))
                if not self._runs[oldest][0].done():
                    break  # never drop a run still going: its poll would start it again
                self._runs.popitem(last=False)
            return future

    def _forget_old(self, now: float) -> None:
        for plan_id, (future, started) in list(self._runs.items()):
            if future.done() and now - started > KEPT_SECONDS:
                del self._runs[plan_id]
        for plan_id, when in list(self._cancelled.items()):
            if now - when > KEPT_SECONDS:
                del self._cancelled[plan_id]


def pinned(table: Any, scan: ScanAsked, tokens: PlanTokens, bound: str) -> tuple[ScanAsked, str]:
    """`scan` pinned to the snapshot it reads now, and the plan id naming it, made before any
    manifest is read: a `submitted` answer carries the id, and every poll plans that snapshot,
    whatever is committed meanwhile. A scan the table cannot plan is refused here (400)."""
    snapshot = scan_of(table, scan).snapshot()
    if snapshot is None:  # an empty table
        return scan, tokens.make("plan", bound, scan, -1, {})
    at = dataclasses.replace(scan, snapshot_id=snapshot.snapshot_id)
    return at, tokens.make("plan", bound, at, snapshot.snapshot_id, {})


def of_plan_id(table: Any, plan_id: str, tokens: PlanTokens, bound: str) -> ScanAsked:
    """The scan a plan id names, at the snapshot it was made for (404 for an id not ours, not
    this table's and caller's, or expired)."""
    payload = tokens.read("plan", plan_id, bound)
    scan = ScanAsked.from_json(payload["q"])
    snapshot = payload.get("n")
    if scan.snapshot_id is None and isinstance(snapshot, int) and snapshot >= 0:
        scan = dataclasses.replace(scan, snapshot_id=snapshot)
    if scan.snapshot_id is not None and table.metadata.snapshot_by_id(scan.snapshot_id) is None:
        raise NoSuchPlanId("the plan's snapshot is no longer visible: plan the scan again")
    return scan
