"""When the server's background maintenance runs each kind on a table: pure decisions, no clock of
their own, testable without a store.

A kind is due on a table when the table was committed since that kind's last
run started and that run started at least `interval` ago (a streaming writer's
table is kept every `interval`, not after every append), or when it last ran
`period` ago or more whatever happened since (snapshots age out and files turn
unreferenced with time alone, and marks wait for a later run to be deleted).
Unreferenced-file removal lists the table's whole folder, so it only runs
every `period`. Tables that waited longest come first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from share_store.catalog.maintenance.configuration import KINDS, UNREFERENCED_FILE_REMOVAL
from share_store.catalog.names import TableName

#: The `[maintenance]` defaults: on, looking every minute, using at most a quarter of a core.
INTERVAL_SECONDS = 60.0
CPU_SHARE = 0.25
PERIOD_HOURS = 24.0


@dataclass(frozen=True)
class Background:
    """`[maintenance]`: whether the server keeps its tables by itself, and how often and how hard."""

    enabled: bool = True
    #: Seconds between rounds, and the least time between two runs of a kind on a changed table.
    interval_seconds: float = INTERVAL_SECONDS
    #: The share of one core the runs may take: after working t seconds, a run waits t * (1/share - 1).
    cpu_share: float = CPU_SHARE
    #: Every kind runs at least this often on every table, changed or not.
    period_hours: float = PERIOD_HOURS

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0:  # NaN too
            raise ValueError("[maintenance] interval_seconds must be above 0")
        if not 0 < self.cpu_share <= 1:
            raise ValueError("[maintenance] cpu_share must be above 0 and at most 1 (a whole core)")
        if not self.period_hours > 0:
            raise ValueError("[maintenance] period_hours must be above 0")

    @property
    def interval(self) -> timedelta:
        return timedelta(seconds=self.interval_seconds)

    @property
    def period(self) -> timedelta:
        return timedelta(hours=self.period_hours)

    def pause_after(self, worked_seconds: float) -> float:
        """How long to wait after working that long, to keep to `cpu_share`."""
        return worked_seconds * (1 / self.cpu_share - 1)


@dataclass(frozen=True)
class LastRun:
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class TableState:
    """What the schedule knows of a table: its last commit, and each kind's last run."""

    id: str
    name: TableName
    updated_at: datetime
    runs: dict[str, LastRun] = field(default_factory=dict)


def due_kinds(state: TableState, now: datetime, background: Background) -> tuple[str, ...]:
    """The kinds to run on the table now, in run order (the maintainer skips disabled ones)."""
    due: list[str] = []
    for kind in KINDS:
        last = state.runs.get(kind)
        if last is None:
            due.append(kind)
            continue
        if now - last.started_at >= background.period:
            due.append(kind)
            continue
        # Since the run *started*: a commit while it ran (a writer's append it did not read, or
        # its own rewrite) is the next run's to look at, or a streaming writer's last files would
        # wait a whole period. A run that finds nothing to do commits nothing, so this settles.
        changed = last.finished_at is None or state.updated_at > last.started_at
        if kind != UNREFERENCED_FILE_REMOVAL and changed and now - last.started_at >= background.interval:
            due.append(kind)
    return tuple(due)


def due_tables(
    states: list[TableState], now: datetime, background: Background
) -> list[tuple[TableState, tuple[str, ...]]]:
    """The tables with a kind due, those whose oldest run is oldest first (never run: first of all)."""
    due = [(state, kinds) for state in states if (kinds := due_kinds(state, now, background))]
    never = datetime.min.replace(tzinfo=now.tzinfo)

    def waited(item: tuple[TableState, tuple[str, ...]]) -> datetime:
        state, kinds = item
        if any(kind not in state.runs for kind in kinds):
            return never
        return min(state.runs[kind].started_at for kind in kinds)

    return sorted(due, key=waited)
