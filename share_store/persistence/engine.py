"""The store's SQLAlchemy engine, with the connection settings every store needs.

Any SQLAlchemy URL works; SQLite (the default, one file in the data dir)
needs pragmas on every new connection to behave as a store several threads
share. On any database, a write that fails for want of space raises
`StoreDiskFull`, which says so, rather than a database error.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, ExceptionContext

from share_store.errors import StoreDiskFull
from share_store.outages import disk_full

SQLITE_IOERR = 10
# SQLite reports a full disk as SQLITE_FULL, or, when it cannot even grow its
# shared-memory file, as a plain I/O error: then the free space tells.
LOW_SPACE_BYTES = 1024 * 1024


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def make_engine(url: str) -> Engine:
    # Pre-ping: after the database restarts or fails over, pooled connections are
    # dead; checking each before use lets service resume without a restart.
    engine = create_engine(url, future=True, pool_pre_ping=True)
    directory = None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        if engine.url.database and engine.url.database != ":memory:":
            directory = Path(engine.url.database).parent
    event.listen(engine, "handle_error", partial(_when_disk_full, directory))
    return engine


def _when_disk_full(sqlite_directory: Path | None, context: ExceptionContext) -> None:
    """Raise `StoreDiskFull` for an error that comes from a full disk; leave others be."""
    error = context.original_exception
    io_error = (getattr(error, "sqlite_errorcode", 0) or 0) & 0xFF == SQLITE_IOERR
    if disk_full(error) or (sqlite_directory is not None and io_error and _low_on_space(sqlite_directory)):
        raise StoreDiskFull() from error


def _low_on_space(directory: Path) -> bool:
    try:
        return shutil.disk_usage(directory).free < LOW_SPACE_BYTES
    except OSError:
        return False


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # SQLite ignores foreign keys (shared_tables → shares) unless asked, per connection.
    cursor.execute("PRAGMA foreign_keys=ON")
    # Readers (the protocol) then never wait for a writer (an admin command), nor it for them.
    cursor.execute("PRAGMA journal_mode=WAL")
    # Writers queue for up to 5 s instead of failing at once with "database is locked".
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
