"""Activity summed per UTC day, and the console's summaries read from days and events together.

A week at the retention cap is 100,000 events; grouping them three ways took
the Activity page half a second on SQLite. Events are also summed, as they are
written, into one row per day and (token, share, schema, table, version), and a
range is read as its whole days from those rows plus its partial days at either
end from the events: a 7-day view reads six days of sums and one day of events.
The three summaries (per share, table and token) are made from the same rows in
one pass, distinct versions included, so they equal what the events give.

A day that ended a while ago no longer changes, so its summaries are kept in
memory (`DaySummaries`, per store): a week's view then reads only its partial
days' events, about a day of them, whatever the retention holds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from share_store.persistence.mappers import utc
from share_store.persistence.sql_schema import activity_days_table, activity_table

days = activity_days_table
events = activity_table
KEYS = ("token_id", "share_name", "schema_name", "table_name", "version")
#: Which keys make each summary's group, by position in `KEYS`.
GROUPS: dict[str, tuple[int, ...]] = {"share": (1,), "table": (1, 2, 3), "token": (0, 1)}
NONE_TEXT, NONE_VERSION = "", -1
#: A day's sums are kept once it ended this long ago: events are written within seconds of their
#: request, so none of a day's arrive later.
SETTLED = timedelta(minutes=10)
KEPT_DAYS = 64

Summed = dict[str, dict[tuple[Any, ...], "Sums"]]


def day_of(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass
class Sums:
    requests: int = 0
    errors: int = 0
    files: int = 0
    bytes: int = 0
    last: datetime | None = None
    versions: set[int] = field(default_factory=set)

    def merge(self, other: Sums) -> None:
        assert other.last is not None
        self.add(other.requests, other.errors, other.files, other.bytes, other.last)
        self.versions |= other.versions

    def add(self, requests: int, errors: int, files: int, size: int, last: datetime) -> None:
        self.requests += requests
        self.errors += errors
        self.files += files
        self.bytes += size
        self.last = last if self.last is None or last > self.last else self.last


def add_days(conn: Connection, batch: Iterable[Any]) -> None:
    """Sum a batch of `ActivityEvent`s into their days (an upsert per day and key)."""
    sums: dict[tuple[Any, ...], Sums] = {}
    for event in batch:
        key = (
            day_of(event.time),
            event.token_id or NONE_TEXT,
            event.share_name or NONE_TEXT,
            event.schema_name or NONE_TEXT,
            event.table_name or NONE_TEXT,
            NONE_VERSION if event.version is None else event.version,
        )
        sums.setdefault(key, Sums()).add(1, int(event.status >= 400), event.files, event.bytes, event.time)
    if not sums:
        return
    rows = [
        dict(zip(("day", *KEYS), key, strict=True))
        | {"requests": s.requests, "errors": s.errors, "files": s.files, "bytes": s.bytes, "last": s.last}
        for key, s in sums.items()
    ]
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(days)
    excluded = statement.excluded
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["day", *KEYS],
            set_={
                "requests": days.c.requests + excluded.requests,
                "errors": days.c.errors + excluded.errors,
                "files": days.c.files + excluded.files,
                "bytes": days.c.bytes + excluded.bytes,
                "last": case((excluded["last"] > days.c["last"], excluded["last"]), else_=days.c["last"]),
            },
        ),
        rows,
    )


def prune_days(conn: Connection, before: datetime) -> None:
    """Drop the days wholly before `before` (the day it falls in stays, like its later events)."""
    conn.execute(delete(days).where(days.c.day < day_of(before)))


def _from_events(conn: Connection, since: datetime, until: datetime) -> Iterator[tuple[Any, ...]]:
    keys = [func.coalesce(events.c[name], NONE_VERSION if name == "version" else NONE_TEXT) for name in KEYS]
    query = (
        select(
            *keys,
            func.count(),
            func.sum(case((events.c.status >= 400, 1), else_=0)),
            func.coalesce(func.sum(events.c.files), 0),
            func.coalesce(func.sum(events.c.bytes), 0),
            func.max(events.c.time),
        )
        .where(events.c.time >= since, events.c.time < until)
        .group_by(*keys)
    )
    yield from conn.execute(query)


def _from_days(conn: Connection, first: datetime, end: datetime) -> Iterator[tuple[Any, ...]]:
    columns = [days.c[name] for name in KEYS]
    measures = (days.c.requests, days.c.errors, days.c.files, days.c.bytes, days.c["last"])
    query = (
        select(*columns, *(func.sum(m) for m in measures[:4]), func.max(measures[4]))
        .where(days.c.day >= first, days.c.day < end)
        .group_by(*columns)
    )
    yield from conn.execute(query)


class DaySummaries:
    """Each settled day's summaries, made once per process from its day sums."""

    def __init__(self) -> None:
        self._days: dict[datetime, Summed] = {}
        self._lock = threading.Lock()

    def day(self, conn: Connection, day: datetime, now: datetime) -> Summed:
        with self._lock:
            kept = self._days.get(day)
        if kept is not None:
            return kept
        made = _summed(_from_days(conn, day, day + timedelta(days=1)))
        if day + timedelta(days=1) + SETTLED <= now:
            with self._lock:
                if len(self._days) >= KEPT_DAYS:
                    self._days.pop(min(self._days))
                self._days[day] = made
        return made


def _summed(rows: Iterable[tuple[Any, ...]], into: Summed | None = None) -> Summed:
    result: Summed = into if into is not None else {group: {} for group in GROUPS}
    for row in rows:
        version, requests, errors, files, size = (int(value) for value in row[4:9])
        last = utc(row[9])
        for group, positions in GROUPS.items():
            key = tuple(row[p] or None for p in positions)
            sums = result[group].setdefault(key, Sums())
            sums.add(requests, errors, files, size, last)
            if version != NONE_VERSION:
                sums.versions.add(version)
    return result


def summed(conn: Connection, since: datetime, until: datetime, kept: DaySummaries, now: datetime) -> Summed:
    """Per summary ("share", "table", "token") and group: the range's sums and distinct versions,
    its whole days from the day sums (kept once settled), its partial days from the events."""
    first, end = day_of(since), day_of(until)
    if since > first:
        first += timedelta(days=1)
    if first >= end:
        return _summed(_from_events(conn, since, until))
    result = _summed(_from_events(conn, since, first)) if since < first else _summed(())
    if end < until:
        _summed(_from_events(conn, end, until), result)
    day = first
    while day < end:
        for group, sums in kept.day(conn, day, now).items():
            merged = result[group]
            for key, value in sums.items():
                merged.setdefault(key, Sums()).merge(value)
        day += timedelta(days=1)
    return result
