"""The store's engine: a SQLite file keeps a connection per reading thread, and pings none."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event, text

from share_store.persistence.engine import SQLITE_POOL_SIZE, make_engine, sqlite_url


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
