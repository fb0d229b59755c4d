"""When the background runs each kind on a table: pure decisions, from a table's last commit and runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from share_store.catalog.maintenance.configuration import (
    COMPACTION,
    KINDS,
    SNAPSHOT_MANAGEMENT,
    UNREFERENCED_FILE_REMOVAL,
)
from share_store.catalog.maintenance.schedule import Background, LastRun, TableState, due_kinds, due_tables
from share_store.catalog.names import TableName

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
BG = Background(interval_seconds=60, period_hours=24)


def state(updated: timedelta, runs: dict[str, timedelta], name: str = "t") -> TableState:
    """A table committed `updated` ago whose kinds last ran (and finished at once) that long ago."""
    return TableState(
        name, TableName.of("whs", ("ns",), name), NOW - updated,
        {kind: LastRun(NOW - ago, NOW - ago + timedelta(seconds=1)) for kind, ago in runs.items()},
    )  # fmt: skip


def test_a_table_never_kept_gets_every_kind() -> None:
    assert due_kinds(state(timedelta(hours=1), {}), NOW, BG) == KINDS


def test_a_table_written_since_its_last_run_is_compacted_and_expired_once_the_interval_passed() -> None:
    ran = {COMPACTION: timedelta(seconds=90), SNAPSHOT_MANAGEMENT: timedelta(seconds=90),
           UNREFERENCED_FILE_REMOVAL: timedelta(seconds=90)}  # fmt: skip
    # Unreferenced-file removal lists the whole folder: it waits for its period, not for commits.
    assert due_kinds(state(timedelta(seconds=10), ran), NOW, BG) == (COMPACTION, SNAPSHOT_MANAGEMENT)


def test_a_streaming_writer_does_not_make_a_run_per_append() -> None:
    ran = dict.fromkeys(KINDS, timedelta(seconds=30))
    assert due_kinds(state(timedelta(seconds=1), ran), NOW, BG) == ()


def test_an_unchanged_table_waits_for_its_period() -> None:
    ran = dict.fromkeys(KINDS, timedelta(hours=2))
    assert due_kinds(state(timedelta(hours=3), ran), NOW, BG) == ()
    ran = dict.fromkeys(KINDS, timedelta(hours=25))
    assert due_kinds(state(timedelta(hours=30), ran), NOW, BG) == KINDS


def test_a_commit_while_a_run_went_on_is_the_next_runs_to_look_at() -> None:
    """The writer appended after the compaction read the table and before it finished: the files
    it added are not compacted yet, so the next round after the interval runs again."""
    run = LastRun(NOW - timedelta(seconds=90), NOW - timedelta(seconds=70))
    name = TableName.of("whs", ("ns",), "t")
    during = TableState("t", name, NOW - timedelta(seconds=80), dict.fromkeys(KINDS, run))
    assert due_kinds(during, NOW, BG) == (COMPACTION, SNAPSHOT_MANAGEMENT)
    # Within the interval it still waits, as for any commit.
    assert due_kinds(during, NOW - timedelta(seconds=40), BG) == ()


def test_a_run_still_going_or_killed_counts_as_changed_since() -> None:
    unfinished = TableState("t", TableName.of("whs", ("ns",), "t"), NOW - timedelta(hours=1),
                            {COMPACTION: LastRun(NOW - timedelta(minutes=5), None)})  # fmt: skip
    assert COMPACTION in due_kinds(unfinished, NOW, BG)


def test_the_table_that_waited_longest_comes_first() -> None:
    old = state(timedelta(seconds=5), dict.fromkeys(KINDS, timedelta(hours=3)), "old")
    recent = state(timedelta(seconds=5), dict.fromkeys(KINDS, timedelta(minutes=5)), "recent")
    never = state(timedelta(seconds=5), {}, "never")
    quiet = state(timedelta(hours=5), dict.fromkeys(KINDS, timedelta(hours=1)), "quiet")
    order = [s.id for s, _ in due_tables([recent, quiet, old, never], NOW, BG)]
    assert order == ["never", "old", "recent"]


def test_settings_are_checked() -> None:
    assert Background().enabled and Background().cpu_share == 0.25
    assert Background(cpu_share=0.25).pause_after(1.0) == pytest.approx(3.0)
    for bad in ({"interval_seconds": 0}, {"cpu_share": 0}, {"cpu_share": 1.5}, {"period_hours": -1},
                {"interval_seconds": float("nan")}):  # fmt: skip
        with pytest.raises(ValueError, match=r"\[maintenance\]"):
            Background(**bad)  # type: ignore[arg-type]
