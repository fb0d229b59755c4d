"""`Transactions.change_flushed_later` (issue 52's key claims) on SQLite and PostgreSQL: committed and
seen by every connection at once, rolled back on an error, and the connection handed back to the
pool as it was (SQLite: its `synchronous` level restored, so other writes still wait for the disk)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from share_store.persistence import ShareStore, sqlite_url
from share_store.persistence.mappers import utc_now
from share_store.persistence.sql_schema import maintenance_leases_table as leases


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareStore]:
    sqlite = request.param == "sqlite"
    opened = ShareStore(
        sqlite_url(tmp_path / "store.db") if sqlite else request.getfixturevalue("postgres_url")
    )
    yield opened
    opened.close()


def held(store: ShareStore) -> list[str]:
    with store.transactions.read() as conn:
        return list(conn.execute(select(leases.c.name).order_by(leases.c.name)).scalars())


def test_a_change_flushed_later_is_committed_rolled_back_and_leaves_the_connection_as_it_was(
    store: ShareStore,
) -> None:
    with store.transactions.change_flushed_later() as conn:
        conn.execute(leases.insert().values(name="a", holder="h", expires_at=utc_now()))
    assert held(store) == ["a"]
    with pytest.raises(RuntimeError), store.transactions.change_flushed_later() as conn:
        conn.execute(leases.insert().values(name="b", holder="h", expires_at=utc_now()))
        raise RuntimeError("a failure mid-change")
    assert held(store) == ["a"]
    if store.engine.dialect.name == "sqlite":
        for _ in range(3):  # whichever pooled connection comes next
            with store.transactions.read() as conn:
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
