"""Which maintenance runs may start: a queue with limits per table, per caller and per process.

A run is CPU and I/O for as long as it takes; one caller asking for runs of forty tables at
once had them all run at once in the server's thread pool, and the provider's own requests
waited behind them. Runs asked for (`turn`, on the event loop) and the background's
(`background_turn`, in its thread) take their turn here:

- one run of a table at a time: asking for a table with a run of its own running or waiting
  is refused;
- `runs_per_caller` runs running or waiting per caller (the provider is a caller too);
- `runs_at_once` runs at once in the process, asked-for or background; beyond, an asked-for run
  waits its turn (first come, first served) on the event loop, holding no thread, up to
  `wait_seconds`, and at most `runs_waiting` wait;
- the background runs one table at a time, and only while no asked-for run waits: it yields.

A refusal is `RateLimited` (429 with `Retry-After`, the seconds a run has taken lately times
the runs ahead of it). Limits hold per server process, as the rate limits do.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field

from share_store.catalog.maintenance.configuration import Limits
from share_store.catalog.names import TableName
from share_store.errors import RateLimited

#: A run's seconds before any has finished (tiny tables take about one).
FIRST_GUESS_SECONDS = 5.0
#: Retry-After is at most this: a client told to come back later comes back within it.
MOST_RETRY_SECONDS = 300
#: How often a waiting background run looks whether the server stops.
BACKGROUND_POLL_SECONDS = 0.5


@dataclass(eq=False)  # told apart by identity
class _Ticket:
    table: TableName
    caller: str | None  # None: the background's
    wake: Callable[[], None] = lambda: None
    granted: bool = False
    withdrawn: bool = False
    started: float = 0.0
    done: asyncio.Future[None] | None = field(default=None, repr=False)


class RunQueue:
    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._running: list[_Ticket] = []
        self._waiting: deque[_Ticket] = deque()
        self._callers: Counter[str] = Counter()  # asked-for runs running or waiting, per caller
        self._asked: Counter[TableName] = Counter()  # asked-for runs running or waiting, per table
        self._background: _Ticket | None = None
        self._seconds = FIRST_GUESS_SECONDS  # a run's recent seconds (moving average)

    # -- asked for ---------------------------------------------------------------------------

    @asynccontextmanager
    async def turn(self, table: TableName, caller: str) -> AsyncIterator[None]:
        """The block runs once it is the run's turn; RateLimited beyond a limit, or when the turn
        did not come within `wait_seconds`."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not done.done():
                done.set_result(None)

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(resolve)
            except RuntimeError:  # the loop closed: nobody waits any more
                pass

        ticket = self._enter(_Ticket(table, caller, wake, done=done))
        try:
            if not ticket.granted:
                try:
                    await asyncio.wait_for(asyncio.shield(done), self.limits.wait_seconds)
                except TimeoutError:
                    if self._withdraw(ticket):  # else its turn came as the wait ended: it runs
                        raise RateLimited(
                            f"No maintenance run could start within {self.limits.wait_seconds:g} s: "
                            f"retry after {self._retry_after()} s.",
                            self._retry_after(),
                        ) from None
            yield
        finally:
            self._leave(ticket)

    def check_caller(self, caller: str) -> None:
        """RateLimited if `caller` has its most runs running or waiting: checked before anything else
        of a run is looked up, so that a caller flooding the server is refused for the least work."""
        with self._lock:
            if self._callers[caller] >= self.limits.runs_per_caller:
                raise self._caller_limited(caller)

    def _caller_limited(self, caller: str) -> RateLimited:
        wait = self._retry_after_locked(0)
        return RateLimited(
            f"{caller} has {self.limits.runs_per_caller} maintenance runs running or waiting, "
            f"the most one caller may: retry after {wait} s.",
            wait,
        )

    def _enter(self, ticket: _Ticket) -> _Ticket:
        limits = self.limits
        assert ticket.caller is not None
        with self._lock:
            if self._asked[ticket.table]:
                wait = self._retry_after_locked(0)
                raise RateLimited(
                    f"A maintenance run of this table is running or waiting already: retry after {wait} s.",
                    wait,
                )
            if self._callers[ticket.caller] >= limits.runs_per_caller:
                raise self._caller_limited(ticket.caller)
            if not self._may_start(ticket) and len(self._waiting) >= limits.runs_waiting:
                wait = self._retry_after_locked(len(self._waiting))
                raise RateLimited(
                    f"The server has {limits.runs_at_once} maintenance runs running and {len(self._waiting)} "
                    f"waiting, the most it takes: retry after {wait} s.",
                    wait,
                )
            self._asked[ticket.table] += 1
            self._callers[ticket.caller] += 1
            if self._may_start(ticket):
                self._start(ticket)
            else:
                self._waiting.append(ticket)
        return ticket

    def _withdraw(self, ticket: _Ticket) -> bool:
        """Take a waiting run out of the queue (False: its turn came meanwhile, it runs)."""
        with self._lock:
            if ticket.granted:
                return False
            self._waiting.remove(ticket)
            self._forget(ticket)
            ticket.withdrawn = True  # `_leave` has nothing more to give back
            self._dispatch()
        return True

    # -- the background ------------------------------------------------------------------------

    @contextmanager
    def background_turn(self, table: TableName, stopped: threading.Event) -> Iterator[bool]:
        """Whether the background may run `table` now (the block then runs it): it waits while
        asked-for runs wait or the process runs its most; False when a run of the table is asked
        for (it is kept by that run) or the server stops."""
        ticket = _Ticket(table, None)
        with self._lock:
            if not self._asked[table] and self._background is None:
                self._background = ticket
                while True:
                    if stopped.is_set() or self._asked[table]:
                        self._background = None
                        break
                    if self._may_start(ticket) and not self._waiting:
                        self._start(ticket)
                        break
                    self._changed.wait(BACKGROUND_POLL_SECONDS)
        if not ticket.granted:
            yield False
            return
        try:
            yield True
        finally:
            self._leave(ticket)

    # -- shared --------------------------------------------------------------------------------

    def _may_start(self, ticket: _Ticket) -> bool:
        busy = {running.table for running in self._running}
        return len(self._running) < self.limits.runs_at_once and ticket.table not in busy

    def _start(self, ticket: _Ticket) -> None:
        ticket.granted, ticket.started = True, self._clock()
        self._running.append(ticket)
        ticket.wake()

    def _leave(self, ticket: _Ticket) -> None:
        with self._lock:
            if ticket.withdrawn:
                return
            if ticket in self._running:
                self._running.remove(ticket)
                # A moving average of what runs take, for the Retry-After of the next refusal.
                self._seconds = 0.7 * self._seconds + 0.3 * max(0.0, self._clock() - ticket.started)
            elif ticket in self._waiting:
                self._waiting.remove(ticket)
            if ticket.caller is None:
                self._background = None
            else:
                self._forget(ticket)
            self._dispatch()

    def _forget(self, ticket: _Ticket) -> None:
        assert ticket.caller is not None
        self._asked[ticket.table] -= 1
        self._callers[ticket.caller] -= 1
        if not self._asked[ticket.table]:
            del self._asked[ticket.table]
        if not self._callers[ticket.caller]:
            del self._callers[ticket.caller]

    def _dispatch(self) -> None:
        """Start what may start, first come first served; then tell the background to look."""
        for ticket in list(self._waiting):
            if len(self._running) >= self.limits.runs_at_once:
                break
            if self._may_start(ticket):
                self._waiting.remove(ticket)
                self._start(ticket)
        self._changed.notify_all()

    def _retry_after(self) -> int:
        with self._lock:
            return self._retry_after_locked(len(self._waiting))

    def _retry_after_locked(self, ahead: int) -> int:
        """Seconds until a place is likely free: a run's recent time for each round of the runs ahead."""
        rounds = 1 + ahead / self.limits.runs_at_once
        return max(1, min(MOST_RETRY_SECONDS, math.ceil(self._seconds * rounds)))

    def state(self) -> tuple[int, int]:
        """Runs running and waiting now (for the tests and the operators)."""
        with self._lock:
            return len(self._running), len(self._waiting)
