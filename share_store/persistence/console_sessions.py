"""Console sessions ended by signing out, so a copy of the cookie stops working on every replica.

Sessions live in signed cookies; only their end is stored, until the time the
session would have expired anyway.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from share_store.persistence.mappers import utc_now
from share_store.persistence.sql_schema import console_sessions_ended_table as t


def end_session(conn: Connection, session_id: str, until: datetime) -> None:
    conn.execute(delete(t).where(t.c.until < utc_now()))
    if conn.execute(select(t.c.id).where(t.c.id == session_id)).first() is None:
        conn.execute(insert(t).values(id=session_id, until=until))


def session_ended(conn: Connection, session_id: str) -> bool:
    return conn.execute(select(t.c.id).where(t.c.id == session_id)).first() is not None
