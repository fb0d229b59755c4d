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
