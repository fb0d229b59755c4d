"""Providers' changes and refused admin tokens, kept beside recipients' activity for the console.

Every replica writes its own, so the console shows them all; pruned with the
same retention as recipients' activity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from share_store.persistence.mappers import utc
from share_store.persistence.sql_schema import admin_events_table

t = admin_events_table


@dataclass(frozen=True)
class AdminEvent:
    """One change made through the admin API or the console, or one refused admin token."""

    time: datetime
    client: str
    method: str
    path: str  # never a query string or a secret: admin paths hold names and ids only
    status: int
    sign_in: str | None = None
    #: What the change set where its path does not say it (a restriction's text); never a secret.
    detail: str | None = None


def insert_events(conn: Connection, events: Iterable[AdminEvent]) -> None:
    rows = [asdict(event) for event in events]
    if rows:
        conn.execute(insert(t), rows)


def recent(conn: Connection, since: datetime, until: datetime, limit: int) -> list[dict[str, Any]]:
    """The latest `limit` events of the range, newest first."""
    query = (
        select(t)
        .where(t.c.time >= since, t.c.time < until)
        .order_by(t.c.time.desc(), t.c.id.desc())
        .limit(limit)
    )
    return [{**row._asdict(), "time": utc(row.time)} for row in conn.execute(query)]


def prune(conn: Connection, before: datetime) -> None:
    conn.execute(delete(t).where(t.c.time < before))
