"""The time budget of resolving one snapshot's equality deletes: `Deadline`, and `OverBudget` past it.

Resolving equality deletes reads data files, the expensive part of serving an Iceberg
snapshot. Past the budget the snapshot is refused with the reason, never served with
rows that should be gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from share_store.errors import UnsupportedOperation

Clock = Callable[[], float]


class OverBudget(UnsupportedOperation):
    """Resolving the snapshot's equality deletes would take longer than the configured budget."""


class Deadline:
    """The time budget of resolving one snapshot; `check` raises `OverBudget` once it is spent."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.started = clock()

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def check(self) -> None:
        if self.elapsed > self.seconds:
            raise OverBudget(
                f"resolving its equality deletes took longer than the configured {self.seconds:g} s "
                "budget ([iceberg] equality_delete_budget_seconds); compacting the table applies them"
            )
