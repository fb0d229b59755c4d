"""The store's SQLAlchemy engine, with the connection settings every store needs.

Any SQLAlchemy URL works; SQLite (the default, one file in the data dir)
needs pragmas on every new connection to behave as a store several threads
share.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def make_engine(url: str) -> Engine:
    # Pre-ping: after the database restarts or fails over, pooled connections are
    # dead; checking each before use lets service resume without a restart.
    engine = create_engine(url, future=True, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # SQLite ignores foreign keys (shared_tables → shares) unless asked, per connection.
    cursor.execute("PRAGMA foreign_keys=ON")
    # Readers (the protocol) then never wait for a writer (an admin command), nor it for them.
    cursor.execute("PRAGMA journal_mode=WAL")
    # Writers queue for up to 5 s instead of failing at once with "database is locked".
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
