"""The maintenance run queue's rules, with runs held open by the test: one run of a table at a time,
a caller's limit, the process's, the waiting line and its patience, and a background that yields.

Asked-for runs take their turn on an event loop (as the API's handlers do), the background in a
thread of its own (as `BackgroundMaintenance` does). The HTTP side (429s, Retry-After, the
provider answered meanwhile) is `tests/end_to_end/test_maintenance_budget.py`'s.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from share_store.catalog.maintenance.configuration import Limits
from share_store.catalog.maintenance.queue import RunQueue
from share_store.catalog.names import TableName
from share_store.errors import RateLimited


def t(name: str) -> TableName:
    return TableName.of("whs", ("ns",), name)


class Held:
    """An asked-for run that holds its turn until released."""

    def __init__(self, queue: RunQueue, table: TableName, caller: str) -> None:
        self.started, self.release = asyncio.Event(), asyncio.Event()
        self.task = asyncio.create_task(self._run(queue, table, caller))

    async def _run(self, queue: RunQueue, table: TableName, caller: str) -> None:
        async with queue.turn(table, caller):
            self.started.set()
            await self.release.wait()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_one_run_of_a_table_at_a_time_whoever_asks() -> None:
    async def test() -> None:
        queue = RunQueue(Limits())
        first = Held(queue, t("a"), "alice")
        await first.started.wait()
        with pytest.raises(RateLimited, match="of this table is running or waiting") as refused:
            async with queue.turn(t("a"), "bob"):
                pass
        assert refused.value.retry_after >= 1
        first.release.set()
        await first.task
        async with queue.turn(t("a"), "bob"):
            pass

    run(test)


def test_a_caller_has_at_most_its_runs_running_or_waiting() -> None:
    async def test() -> None:
        queue = RunQueue(Limits(runs_at_once=1, runs_per_caller=2))
        running, waiting = Held(queue, t("a"), "alice"), Held(queue, t("b"), "alice")
        await running.started.wait()
        await settle()
        assert queue.state() == (1, 1)
        with pytest.raises(RateLimited, match="alice has 2 maintenance runs"):
            async with queue.turn(t("c"), "alice"):
                pass
        other = Held(queue, t("c"), "bob")  # another caller waits its turn
        running.release.set()
        await waiting.started.wait()  # first come, first served
        assert not other.started.is_set()
        waiting.release.set()
        await other.started.wait()
        other.release.set()
        await asyncio.gather(running.task, waiting.task, other.task)
        assert queue.state() == (0, 0)

    run(test)


def test_beyond_the_waiting_line_and_past_its_patience_a_run_is_refused() -> None:
    async def test() -> None:
        queue = RunQueue(Limits(runs_at_once=1, runs_waiting=1, wait_seconds=0.2))
        running = Held(queue, t("a"), "alice")
        await running.started.wait()
        waiting = Held(queue, t("b"), "bob")
        await settle()
        with pytest.raises(RateLimited, match="1 maintenance runs running and 1 waiting"):
            async with queue.turn(t("c"), "carol"):
                pass
        with pytest.raises(RateLimited, match=r"could start within 0\.2 s"):
            await waiting.task
        assert queue.state() == (1, 0)  # it left the line
        running.release.set()
        await running.task

    run(test)


def test_a_run_whose_caller_left_gives_its_place_back() -> None:
    async def test() -> None:
        queue = RunQueue(Limits(runs_at_once=1, runs_per_caller=1))
        running, waiting = Held(queue, t("a"), "alice"), Held(queue, t("b"), "bob")
        await running.started.wait()
        await settle()
        waiting.task.cancel()  # the client went away
        await settle()
        assert queue.state() == (1, 0)
        again = Held(queue, t("b"), "bob")  # nothing of bob's is counted any more: taken, it waits
        await settle()
        assert queue.state() == (1, 1) and not again.task.done()
        running.release.set()
        await again.started.wait()
        again.release.set()
        await asyncio.gather(running.task, again.task)

    run(test)


def test_the_background_waits_while_an_asked_for_run_waits_and_passes_over_its_table() -> None:
    async def test() -> None:
        queue = RunQueue(Limits(runs_at_once=1))
        stopped = threading.Event()
        order: list[str] = []
        running = Held(queue, t("a"), "alice")
        await running.started.wait()
        waiting = Held(queue, t("b"), "bob")
        await settle()

        def background(table: TableName) -> None:
            with queue.background_turn(table, stopped) as turn:
                order.append(f"background {table.name}: {turn}")

        kept = asyncio.create_task(asyncio.to_thread(background, t("c")))
        await asyncio.sleep(0.3)
        assert order == []  # a slot is taken and an asked-for run waits: the background waits
        running.release.set()
        await waiting.started.wait()
        order.append("bob")
        await asyncio.sleep(0.3)
        assert order == ["bob"]  # the one slot is bob's
        waiting.release.set()
        await kept
        assert order == ["bob", "background c: True"]
        # A table with an asked-for run is the run's: the background passes over it.
        held = Held(queue, t("d"), "alice")
        await held.started.wait()
        await asyncio.to_thread(background, t("d"))
        assert order[-1] == "background d: False"
        held.release.set()
        await asyncio.gather(running.task, waiting.task, held.task)

    run(test)


def test_a_waiting_background_stops_with_the_server() -> None:
    async def test() -> None:
        queue = RunQueue(Limits(runs_at_once=1))
        stopped = threading.Event()
        running = Held(queue, t("a"), "alice")
        await running.started.wait()

        def background() -> bool:
            with queue.background_turn(t("b"), stopped) as turn:
                return turn

        waiting = asyncio.create_task(asyncio.to_thread(background))
        await asyncio.sleep(0.1)
        stopped.set()
        assert await waiting is False
        running.release.set()
        await running.task

    run(test)


def test_an_asked_for_run_starts_while_the_background_runs_another_table_if_a_slot_is_free() -> None:
    async def test() -> None:
        queue = RunQueue(Limits(runs_at_once=2))
        stopped, inside, leave = threading.Event(), threading.Event(), threading.Event()

        def background() -> None:
            with queue.background_turn(t("a"), stopped) as turn:
                assert turn
                inside.set()
                leave.wait(5)

        kept = asyncio.create_task(asyncio.to_thread(background))
        await asyncio.to_thread(inside.wait, 5)
        asked = Held(queue, t("b"), "alice")
        await asyncio.wait_for(asked.started.wait(), 5)
        # The background's table waits for it: asked for now, the run waits its turn.
        same = Held(queue, t("a"), "bob")
        await settle()
        assert not same.started.is_set()
        leave.set()
        await kept
        await asyncio.wait_for(same.started.wait(), 5)
        asked.release.set()
        same.release.set()
        await asyncio.gather(asked.task, same.task)

    run(test)


def test_limits_are_checked() -> None:
    for wrong in ({"runs_at_once": 0}, {"run_cpu_seconds": 0.0}, {"wait_seconds": float("nan")},
                  {"row_group_decoded_mb": True}):  # fmt: skip
        with pytest.raises(ValueError, match=r"\[maintenance\]"):
            Limits(**wrong)  # type: ignore[arg-type]
