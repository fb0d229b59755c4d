"""The store's engine: a SQLite file keeps a connection per reading thread, and pings none; a
database server that stalls fails a request fast, as an outage."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy.exc
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from share_store.outages import is_outage
from share_store.persistence.engine import (
    CONNECT_SECONDS,
    POOL_SECONDS,
    SQLITE_POOL_SIZE,
    STATEMENT_MS,
    make_engine,
    sqlite_url,
)


def test_a_sqlite_file_keeps_its_connections(tmp_path: Path) -> None:
    """Under 40 threads reading at once, SQLAlchemy's default pool (5) closed each connection past
    its fifth when handed back, and the next read opened one again, pragmas and all."""
    engine = make_engine(sqlite_url(tmp_path / "store.db"))
    opened: list[object] = []
    pings: list[object] = []
    event.listen(engine, "connect", lambda connection, _record: opened.append(connection))
    event.listen(engine, "engine_connect", lambda connection: pings.append(connection))
    threads = 40
    assert SQLITE_POOL_SIZE >= threads
    together = threading.Barrier(threads, timeout=30)

    def read() -> None:
        together.wait()
        for _ in range(5):
            with engine.connect() as conn:
                together.wait()  # every thread holds a connection at once
                conn.execute(text("SELECT 1"))

    for _ in range(2):
        workers = [threading.Thread(target=read) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert len(opened) == threads  # the second round, and each of the first's later reads, reused them
    # A file: no server to restart, nothing to ping.
    assert engine.pool._pre_ping is False  # type: ignore[attr-defined]
    engine.dispose()


def test_other_databases_ping_before_use() -> None:
    """A server's restart or failover leaves pooled connections dead: checked before use, service resumes."""
    engine = make_engine("sqlite://")  # not a file: SQLAlchemy's own pool, pinged
    assert engine.pool._pre_ping is True  # type: ignore[attr-defined]
    engine.dispose()


def test_a_database_that_never_answers_fails_fast_as_an_outage() -> None:
    """A black-holed PostgreSQL (it accepts, then says nothing) is given up after the connect
    timeout, as an outage (503 with Retry-After), not after the kernel's minutes."""
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(8)
        port = hole.getsockname()[1]
        engine = make_engine(f"postgresql+psycopg://nobody@127.0.0.1:{port}/store")
        started = time.monotonic()
        with pytest.raises(OperationalError) as raised:
            with engine.connect():
                pass
        assert time.monotonic() - started < CONNECT_SECONDS * 3
        assert is_outage(raised.value)
        engine.dispose()


def test_a_pool_that_stays_exhausted_is_an_outage() -> None:
    """SQLAlchemy's pool timeout (no connection came free) was a 500; it is an outage like the rest."""
    assert is_outage(sqlalchemy.exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached"))


def test_postgres_statements_and_idle_connections_are_bounded(postgres_url: str) -> None:
    engine = make_engine(postgres_url)
    with engine.connect() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar() == f"{STATEMENT_MS // 1000}s"
        # The client's own keepalives, on its socket (the server's `tcp_keepalives_idle` is its own).
        raw = conn.connection.driver_connection
        assert raw is not None
        with socket.socket(fileno=os.dup(raw.fileno())) as sock:
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30
    assert engine.pool.timeout() == POOL_SECONDS  # type: ignore[attr-defined]
    engine.dispose()
