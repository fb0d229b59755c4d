"""`Transactions`: the only code that opens a connection or a transaction on the store's engine.

The share store (`ShareStore`), the own warehouses' catalog, its table locations
and its users each decide what goes in one transaction, and all take it from
here: one object, made by `ShareStore` over its one engine, is handed to each, so
that no component holds the engine or opens a transaction of its own, and a
change of how transactions are opened (isolation, retries, a read replica) is
made in one place.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection, Engine


class Transactions:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reads: what it sees is each statement's own snapshot."""
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def change(self) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self.engine.begin() as conn:
            yield conn

    @contextmanager
    def change_flushed_later(self) -> Iterator[Connection]:
        """`change`, committed without waiting for the disk: visible to every connection (and
        replica) at once, made durable by the next transaction that waits for it, or lost with
        the machine, never half. For a row whose only use is to come before a change of its own
        (an idempotency key's claim before its commit): the log is written in order, so that
        change's flush takes the row with it, and a row lost without one was of no use anyway.
        SQLite: `synchronous=NORMAL` for the transaction (WAL); PostgreSQL: `synchronous_commit
        = off` for it; any other store: `change`."""
        dialect = self.engine.dialect.name
        if dialect == "postgresql":
            with self.engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
                yield conn
            return
        if dialect != "sqlite":
            with self.change() as conn:
                yield conn
            return
        with self.engine.connect() as conn:
            # PRAGMAs run outside the transaction the driver opens at the first write.
            level = conn.exec_driver_sql("PRAGMA synchronous").scalar()
            conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
            try:
                yield conn
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
            finally:
                conn.exec_driver_sql(f"PRAGMA synchronous={int(level or 2)}")
                conn.commit()
