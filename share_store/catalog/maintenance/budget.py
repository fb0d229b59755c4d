"""A run's budget: the CPU and wall-clock seconds the provider lets one compaction take.

Checked where a run can stop cleanly (between two batches of rows, two files, two groups), so
that past its budget a run stops there and commits only what it finished (`compaction`).
The CPU is the running thread's own (`time.thread_time`): the run reads and writes Parquet in
that thread (pyarrow's readers are asked for no threads of their own), while the server's other
threads answer requests; so a budget is made and checked in the thread that runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from share_store.catalog.maintenance.configuration import Limits


class OverBudget(Exception):
    """The run went past its budget where it was checked: its message says which."""


class Budget:
    def __init__(
        self,
        cpu_seconds: float,
        seconds: float,
        cpu: Callable[[], float] = time.thread_time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cpu_seconds, self.seconds = cpu_seconds, seconds
        self._cpu, self._clock = cpu, clock
        self._cpu_start, self._start = cpu(), clock()

    @classmethod
    def of(cls, limits: Limits) -> Budget:
        return cls(limits.run_cpu_seconds, limits.run_seconds)

    def check(self) -> None:
        """OverBudget once either budget is spent."""
        if self._cpu() - self._cpu_start > self.cpu_seconds:
            raise OverBudget(
                f"the run's CPU budget of {self.cpu_seconds:g} s ([maintenance] run_cpu_seconds)"
            )
        if self._clock() - self._start > self.seconds:
            raise OverBudget(f"the run's budget of {self.seconds:g} s ([maintenance] run_seconds)")
