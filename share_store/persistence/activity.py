"""Recent audit events of recipients' requests, kept in the store for the console.

Every replica writes its own requests here, so any replica's console sees
them all. The table is bounded: `prune` drops events past the retention and
the oldest past a row cap. Summaries are grouped in SQL, so a page costs one
query whatever the number of events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, insert, literal_column, select
from sqlalchemy.engine import Connection

from share_store.persistence.activity_days import DaySummaries, add_days, prune_days, summed
from share_store.persistence.mappers import utc
from share_store.persistence.sql_schema import activity_table

t = activity_table


@dataclass(frozen=True)
class ActivityEvent:
    """One recipient request, as the audit log records it (no secret, no query string)."""

    time: datetime
    route: str
    status: int
    token_id: str | None = None
    share_name: str | None = None
    schema_name: str | None = None
    table_name: str | None = None
    error_code: str | None = None
    version: int | None = None
    files: int = 0
    bytes: int = 0
    duration_ms: float = 0.0


@dataclass(frozen=True)
class ActivityRow:
    """Requests of one group (a share, a table or a token) over a time range."""

    key: tuple[str | None, ...]
    requests: int
    versions: int
    files: int
    bytes: int
    errors: int
    last: datetime


GROUPS: dict[str, tuple[str, ...]] = {
    "share": ("share_name",),
    "table": ("share_name", "schema_name", "table_name"),
    "token": ("token_id", "share_name"),
}


#: An event's fields, which are its columns.
_COLUMNS = tuple(field.name for field in fields(ActivityEvent))


def _row(event: ActivityEvent) -> dict[str, Any]:
    # Not `asdict`, which deep-copies every value (a datetime, strings): 32 us an event, this 1.5.
    return {name: getattr(event, name) for name in _COLUMNS}


def insert_events(conn: Connection, events: Iterable[ActivityEvent]) -> None:
    batch = list(events)
    if batch:
        conn.execute(insert(t), [_row(event) for event in batch])
        add_days(conn, batch)


def _between(since: datetime, until: datetime) -> ColumnElement[bool]:
    return and_(t.c.time >= since, t.c.time < until)


def summaries(
    conn: Connection, since: datetime, until: datetime, kept: DaySummaries
) -> dict[str, list[ActivityRow]]:
    """Per share, table and token: requests, distinct versions, files, bytes and errors, busiest first.

    Read from the day sums and the partial days' events (`activity_days`).
    """
    result: dict[str, list[ActivityRow]] = {}
    for group, groups in summed(conn, since, until, kept, datetime.now(UTC)).items():
        rows = [
            ActivityRow(key, s.requests, len(s.versions), s.files, s.bytes, s.errors, s.last)
            for key, s in groups.items()
            if s.last is not None
        ]
        # Busiest first, then by key as SQL sorted them (NULLs first).
        rows.sort(key=lambda row: (-row.requests, tuple((k is not None, k or "") for k in row.key)))
        result[group] = rows
    return result


def summary(
    conn: Connection, group: str, since: datetime, until: datetime, kept: DaySummaries
) -> list[ActivityRow]:
    """One of `summaries`."""
    if group not in GROUPS:
        raise ValueError(f"unknown activity group {group!r}")
    return summaries(conn, since, until, kept)[group]


def hourly(conn: Connection, since: datetime, until: datetime) -> dict[datetime, int]:
    """Requests in the range per hour (UTC, each hour by its start), for the console's chart.

    Counted in SQL: a week at the row cap is 100,000 events, which fetched one
    by one made the Activity page wait on the store's driver.
    """
    if conn.dialect.name == "postgresql":
        # Literal arguments: as bound parameters the grouped expression would not match the selected one.
        utc_time = func.timezone(literal_column("'UTC'"), t.c.time)
        hour: ColumnElement[Any] = func.date_trunc(literal_column("'hour'"), utc_time)
    else:
        # SQLite keeps the UTC wall time as text: "YYYY-MM-DD HH" is its hour.
        hour = func.substr(t.c.time, 1, 13)
    query = select(hour.label("hour"), func.count().label("requests")).where(_between(since, until))
    counts: dict[datetime, int] = {}
    for row in conn.execute(query.group_by(hour)):
        start = datetime.strptime(row.hour, "%Y-%m-%d %H") if isinstance(row.hour, str) else row.hour
        counts[utc(start)] = int(row.requests)
    return counts


def recent(conn: Connection, since: datetime, until: datetime, limit: int) -> list[dict[str, Any]]:
    """The latest `limit` events of the range, newest first."""
    query = select(t).where(_between(since, until)).order_by(t.c.time.desc(), t.c.id.desc()).limit(limit)
    return [{**row._asdict(), "time": utc(row.time)} for row in conn.execute(query)]


def read_tables(conn: Connection, since: datetime) -> set[tuple[str, str, str]]:
    """(share, schema, table), lower-cased, of the tables recipients read successfully since `since`."""
    query = (
        select(t.c.share_name, t.c.schema_name, t.c.table_name)
        .where(t.c.time >= since, t.c.table_name.is_not(None), t.c.status < 400)
        .distinct()
    )
    return {(share.lower(), schema.lower(), table.lower()) for share, schema, table in conn.execute(query)}


def last_use(conn: Connection, token_ids: list[str]) -> dict[str, datetime]:
    """When each token was last seen, among the events still kept."""
    if not token_ids:
        return {}
    query = select(t.c.token_id, func.max(t.c.time)).where(t.c.token_id.in_(token_ids)).group_by(t.c.token_id)
    return {token_id: utc(when) for token_id, when in conn.execute(query)}


def prune(conn: Connection, before: datetime, max_events: int) -> int:
    """Drop events older than `before`, then the oldest beyond `max_events`; how many went."""
    dropped = conn.execute(delete(t).where(t.c.time < before)).rowcount or 0
    prune_days(conn, before)
    # The id of the newest event that is to go, if the table holds more than the cap.
    cutoff = conn.execute(select(t.c.id).order_by(t.c.id.desc()).offset(max_events).limit(1)).scalar()
    if cutoff is not None:
        dropped += conn.execute(delete(t).where(t.c.id <= cutoff)).rowcount or 0
    return dropped
