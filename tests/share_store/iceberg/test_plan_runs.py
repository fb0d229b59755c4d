"""Plans past their budget (`plan_runs`): who is told `submitted`, and one run per plan id."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from share_store.errors import RateLimited
from share_store.iceberg import plan_runs
from share_store.iceberg.plan_runs import PlanRuns, polls


@pytest.mark.parametrize(
    ("version", "told"),
    [
        ("Apache Iceberg 1.11.0 (commit 0123abc)", True),
        ("Apache Iceberg 1.12.1", True),
        ("Apache Iceberg 2.0.0", True),
        ("Apache Iceberg 1.10.0 (commit 0123abc)", False),  # before 1.11 Java did not poll
        ("PyIceberg 0.12.0", False),  # raises NotImplementedError on `submitted`
        ("", False),
        ("curl/8", False),
    ],
)
def test_only_clients_that_poll_are_told_submitted(version: str, told: bool) -> None:
    assert polls({"x-client-version": version} if version else {}) is told


def test_one_run_per_plan_id_its_result_kept_for_polls() -> None:
    runs, gate, calls = PlanRuns(budget=0.05), threading.Event(), []

    def work() -> dict[str, Any]:
        calls.append(1)
        gate.wait(5)
        return {"file-scan-tasks": []}

    async def scenario() -> None:
        assert await runs.answer("p", work) is None  # past the budget: submitted
        assert await runs.answer("p", work) is None  # polled: the same run, not a second
        gate.set()
        assert await runs.answer("p", work) == {"file-scan-tasks": []}
        assert await runs.answer("p", work) == {"file-scan-tasks": []}  # kept

    asyncio.run(scenario())
    assert len(calls) == 1
    runs.cancel("p")
    assert runs.cancelled("p")


def test_runs_past_the_bound_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_runs, "PENDING", 0)
    runs, gate = PlanRuns(budget=0.01, workers=1), threading.Event()

    async def scenario() -> None:
        for n in range(plan_runs.WORKERS):
            await runs.answer(f"p{n}", lambda: {"held": gate.wait(5)})
        with pytest.raises(RateLimited):
            await runs.answer("one-too-many", lambda: {})

    try:
        asyncio.run(scenario())
    finally:
        gate.set()
