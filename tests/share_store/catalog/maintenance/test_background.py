"""The server's background maintenance on a real catalog (SQLite and PostgreSQL): a round keeps the
tables the schedule finds due, one holder of the store's lease at a time, and forgets dropped tables."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta

from sqlalchemy import func, select

from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.idempotency import REPLAY, Answer, Binding
from share_store.catalog.idempotency_keys import IdempotencyKeys
from share_store.catalog.maintenance import rows
from share_store.catalog.maintenance.background import LEASE, LEASE_SECONDS, BackgroundMaintenance
from share_store.catalog.maintenance.configuration import COMPACTION, KINDS
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.maintenance.schedule import Background
from share_store.persistence.mappers import utc_now
from share_store.persistence.sql_schema import (
    idempotency_keys_table,
    maintenance_configs_table,
    maintenance_leases_table,
    maintenance_runs_table,
)
from tests.share_store.catalog.maintenance.compaction.test_run import SCHEMA, T, data_files, table_of
from tests.share_store.catalog.maintenance.compaction.test_run import rows as batch

FAST = Background(interval_seconds=0.05, cpu_share=1.0)
BINDING = Binding("user:AK1", "POST", "warehouse_table", "/_iceberg/v1/whs/namespaces/ns/tables/t", "00" * 32)


def appended(catalog: WarehouseCatalog, appends: int = 6) -> None:
    catalog.create_table(T, NewTable(SCHEMA))
    for n in range(appends):
        table_of(catalog).append(batch(range(n * 10, n * 10 + 10)))


class Clock:
    def __init__(self) -> None:
        self.now = utc_now()

    def __call__(self) -> datetime:
        return self.now


def test_a_round_keeps_a_table_written_in_small_appends(catalog: WarehouseCatalog) -> None:
    appended(catalog)
    assert len(data_files(table_of(catalog))) == 6
    background = BackgroundMaintenance(Maintainer(catalog), FAST)
    assert background.run_round() == [("whs.ns.t", KINDS)]
    assert len(data_files(table_of(catalog))) == 1
    assert sorted(table_of(catalog).scan().to_arrow()["id"].to_pylist()) == list(range(60))
    status = Maintainer(catalog).status(T)
    assert {kind: s["status"] for kind, s in status.items()} == dict.fromkeys(KINDS, "Successful")
    # Its own rewrite came after the compaction started, as a writer's append might have: the next
    # round looks once more, finds nothing worth it and commits nothing; the one after leaves it alone.
    assert background.run_round() == [("whs.ns.t", (COMPACTION,))]
    assert len(data_files(table_of(catalog))) == 1
    assert background.run_round() == []


def test_one_holder_of_the_lease_at_a_time(catalog: WarehouseCatalog) -> None:
    appended(catalog, 3)
    clock = Clock()
    first = BackgroundMaintenance(Maintainer(catalog), FAST, clock, holder="replica-a")
    second = BackgroundMaintenance(Maintainer(catalog), FAST, clock, holder="replica-b")
    assert first.run_round() != []
    table_of(catalog).append(batch(range(100, 110)))
    assert second.run_round() == []  # replica-a's lease runs
    assert len(data_files(table_of(catalog))) == 2
    clock.now += timedelta(seconds=LEASE_SECONDS + 1)  # replica-a died: its lease ran out
    assert second.run_round() != []
    assert len(data_files(table_of(catalog))) == 1
    with catalog.transactions.read() as conn:
        holders = conn.execute(select(maintenance_leases_table.c.holder)).scalars().all()
    assert holders == ["replica-b"]


def test_taking_the_lease_is_atomic_between_replicas(catalog: WarehouseCatalog) -> None:
    now = utc_now()
    with catalog.transactions.change() as conn:
        assert rows.take_lease(conn, LEASE, "a", now, 60)
        assert not rows.take_lease(conn, LEASE, "b", now, 60)
        assert rows.take_lease(conn, LEASE, "a", now + timedelta(seconds=30), 60)  # renewed
        assert not rows.take_lease(conn, LEASE, "b", now + timedelta(seconds=80), 60)
        assert rows.take_lease(conn, LEASE, "b", now + timedelta(seconds=91), 60)
        rows.release_lease(conn, LEASE, "a")  # no longer a's: nothing released
        assert not rows.take_lease(conn, LEASE, "a", now + timedelta(seconds=92), 60)


def test_a_dropped_table_is_forgotten_once_purged(catalog: WarehouseCatalog) -> None:
    """A table dropped without purge keeps its maintenance (an undrop brings it back as it was) and
    is not maintained; the round after its warehouse's retention (7 days) purges it and forgets it."""
    appended(catalog, 2)
    clock = Clock()
    background = BackgroundMaintenance(Maintainer(catalog), FAST, clock)
    background.run_round()
    background.maintainer.configure_table(T, "icebergCompaction", {"status": "disabled"})
    catalog.drop_table(T)
    clock.now += timedelta(days=2)
    assert background.run_round() == []  # dropped: not maintained

    def counted() -> tuple[int, int]:
        with catalog.transactions.read() as conn:
            runs = conn.execute(select(func.count()).select_from(maintenance_runs_table)).scalar()
            configs = conn.execute(select(func.count()).select_from(maintenance_configs_table)).scalar()
        return int(runs or 0), int(configs or 0)

    assert counted()[0] > 0 and counted()[1] == 1
    clock.now += timedelta(days=5, seconds=1)
    background.run_round()
    assert counted() == (0, 0)
    with catalog.transactions.read() as conn:
        assert rows.configs(conn, "whs") == {}


def test_the_thread_keeps_tables_and_gives_back_the_lease(catalog: WarehouseCatalog) -> None:
    appended(catalog, 4)
    background = BackgroundMaintenance(Maintainer(catalog), FAST)
    background.start()
    try:
        deadline = time.monotonic() + 60
        while len(data_files(table_of(catalog))) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        background.stop()
    assert len(data_files(table_of(catalog))) == 1
    with catalog.transactions.read() as conn:
        assert conn.execute(select(func.count()).select_from(maintenance_leases_table)).scalar() == 0


def test_off_runs_nothing(catalog: WarehouseCatalog) -> None:
    appended(catalog, 3)
    background = BackgroundMaintenance(Maintainer(catalog), Background(enabled=False, interval_seconds=0.01))
    background.start()
    time.sleep(0.3)
    background.stop()
    assert len(data_files(table_of(catalog))) == 3


def test_a_round_removes_the_idempotency_keys_past_their_lifetime(catalog: WarehouseCatalog) -> None:
    """`/_iceberg`'s idempotency keys (issue 52) go with the round after their lifetime, on one
    replica (the lease's holder); a key still alive stays, and is still replayed."""
    clock = Clock()
    keys = IdempotencyKeys(catalog.transactions, b"background-tests-server-key-0123", clock)
    old, young = str(uuid.uuid4()), str(uuid.uuid4())
    for key in (old, young):
        _, claim = keys.claim(key, BINDING)
        assert isinstance(claim, str)
        keys.finish(BINDING.caller, key, claim, Answer(204, {}, b""))
        clock.now += timedelta(minutes=20)
    background = BackgroundMaintenance(Maintainer(catalog), FAST, clock)
    clock.now -= timedelta(minutes=9)  # old's 30 minutes are over, young's are not
    background.run_round()
    with catalog.transactions.read() as conn:
        left = conn.execute(select(idempotency_keys_table.c.key)).scalars().all()
    assert left == [young] and keys.claim(young, BINDING)[0] == REPLAY
