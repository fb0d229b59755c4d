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

from sqlalchemy import create_engine, event, make_url
from sqlalchemy.engine import Engine, ExceptionContext

from share_store.errors import StoreDiskFull
from share_store.outages import disk_full

SQLITE_IOERR = 10
# SQLite reports a full disk as SQLITE_FULL, or, when it cannot even grow its
# shared-memory file, as a plain I/O error: then the free space tells.
LOW_SPACE_BYTES = 1024 * 1024


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


# Connections a SQLite store keeps open: more than the threads that may read at once (the
# server's 40 worker threads and its background ones). SQLAlchemy's default keeps 5 and
# closes any further one when it is handed back: under 64 clients a fifth of all reads
# opened a connection again, and set its pragmas, for a lookup that takes far less.
SQLITE_POOL_SIZE = 48
SQLITE_POOL_OVERFLOW = 32


# A database server that stalls (stopped, failed over, a black-holed route) must fail a request
# fast, as an outage (503 with Retry-After), not hold it for the kernel's TCP timeout: a
# connection is given up after CONNECT_SECONDS, a statement after STATEMENT_MS, a wait for a
# pooled connection after POOL_SECONDS (SQLAlchemy's 30 s answered 500s under a 45 s stall),
# and an idle connection whose peer vanished is found by TCP keepalives within a minute.
CONNECT_SECONDS = 5
STATEMENT_MS = 30_000
POOL_SECONDS = 10
POSTGRES_CONNECT_ARGS: dict[str, Any] = {
    "connect_timeout": CONNECT_SECONDS,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    # Sent data unacknowledged this long aborts the connection (Linux), as keepalives do idle ones.
    "tcp_user_timeout": STATEMENT_MS,
    "options": f"-c statement_timeout={STATEMENT_MS}",
}


def _sqlite_file(url: str) -> bool:
    parsed = make_url(url)
    return parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:")


def make_engine(url: str) -> Engine:
    if _sqlite_file(url):
        # A file, not a server: there is no restart or failover that leaves pooled connections
        # dead, and pinging each before use was a third of every lookup's time.
        engine = create_engine(
            url, future=True, pool_size=SQLITE_POOL_SIZE, max_overflow=SQLITE_POOL_OVERFLOW
        )
    else:
        # Pre-ping: after the database restarts or fails over, pooled connections are
        # dead; checking each before use lets service resume without a restart.
        backend = make_url(url).get_backend_name()
        server: dict[str, Any] = {} if backend == "sqlite" else {"pool_timeout": POOL_SECONDS}
        if backend == "postgresql":
            server["connect_args"] = POSTGRES_CONNECT_ARGS
        engine = create_engine(url, future=True, pool_pre_ping=True, **server)
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
