"""Snapshots built in the background: every shared table at start, hot tables after each commit."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pyarrow as pa
from deltalake import write_deltalake

from share_store.delta.snapshot import SnapshotCache
from share_store.model import TableSpec
from share_store.persistence import ShareStore
from share_store.persistence.engine import sqlite_url
from share_store.readers import TableReaders
from share_store.signing import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.metrics import Metrics
from sharing_server.warming import SnapshotWarmer
from tests.conftest import deploy


def rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64())})


def setting(tmp_path: Path, tables: int, max_files: int = 1_000) -> tuple[ShareStore, TableReaders, Metrics]:
    root = tmp_path / "buckets"
    for index in range(tables):
        for part in range(3):  # three commits, one file each
            write_deltalake(str(root / "bucket" / f"t{index}"), rows(part * 10, 10), mode="append")
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    specs = [TableSpec.parse(f"s:t{index}:delta:bucket:t{index}") for index in range(tables)]
    store.create_share("warm", specs)
    storage = LocalStorage(root, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"))
    return store, TableReaders(storage, snapshots=SnapshotCache(max_files)), Metrics()


def warms(metrics: Metrics, why: str, outcome: str) -> float:
    return (
        metrics.registry.get_sample_value("sharing_snapshot_warms_total", {"why": why, "outcome": outcome})
        or 0
    )


def test_every_shared_table_is_built_at_start(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=3)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert len(readers.snapshots) == 3 and readers.snapshots.files == 9
    assert warms(metrics, "start", "built") == 3
    assert readers.recently_used(60) == []  # the warmer's reads do not make a table hot
    store.close()


def test_warming_at_start_stops_before_the_cache_is_full(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=3, max_files=7)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert len(readers.snapshots) == 2  # 3 files, then 6 >= 80% of 7: no third table
    store.close()
    # A table that does not fit beside those built before ends the warming, evicting no more.
    store, readers, metrics = setting(tmp_path / "small", tables=3, max_files=5)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "start", "built") == 2 and len(readers.snapshots) == 1
    store.close()


def test_a_table_a_recipient_read_first_does_not_stop_the_warming(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=3)
    readers.reader(store.get_table("warm", "s", "t0")).snapshot()  # a query came before the warmer
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert len(readers.snapshots) == 3
    store.close()


def test_a_table_that_cannot_be_read_is_counted_and_left_for_its_query(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=1)
    store.update_share("warm", add=[TableSpec.parse("s:gone:delta:bucket:nothing-here")], remove=[])
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "start", "built") == 1 and warms(metrics, "start", "failed") == 1
    store.close()


def test_a_hot_table_is_brought_up_to_its_new_commits_before_the_next_query(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=2)
    hot = store.get_table("warm", "s", "t0")
    assert readers.reader(hot).snapshot().version == 2  # a recipient reads t0
    warmer = SnapshotWarmer(store, readers, metrics, warm_on_start=False, refresh_seconds=0.05)
    warmer.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and warms(metrics, "refresh", "current") < 1:
            time.sleep(0.05)
        assert warms(metrics, "refresh", "current") >= 1  # rounds with no new commit build nothing
        built_before = warms(metrics, "refresh", "built")
        write_deltalake(str(tmp_path / "buckets" / "bucket" / "t0"), rows(100, 10), mode="append")
        deadline = time.monotonic() + 10
        cache = readers.snapshots
        while time.monotonic() < deadline and not any(key[1] == 3 for key in cache._entries):
            time.sleep(0.05)
        assert any(key[1] == 3 for key in cache._entries)  # version 3 built with no query asking
        assert warms(metrics, "refresh", "built") == built_before + 1
        # t1 was never read for a recipient: not kept fresh.
        assert len(cache) == 2
    finally:
        warmer.stop()
    store.close()


def test_a_refresh_round_does_not_rebuild_hot_tables_the_cache_evicted(tmp_path: Path) -> None:
    # Room for two tables' snapshots (3 files each) of the three read.
    store, readers, metrics = setting(tmp_path, tables=3, max_files=7)
    for index in range(3):
        readers.reader(store.get_table("warm", "s", f"t{index}")).snapshot()
    cache = readers.snapshots
    kept = list(cache._entries)
    assert len(kept) == 2
    SnapshotWarmer(store, readers, metrics, warm_on_start=False).refresh_hot_tables()
    # t0 was evicted by the later reads: the round leaves it so, and t1 is still the one evicted next.
    assert list(cache._entries) == kept
    assert warms(metrics, "refresh", "failed") == 0
    assert not readers.reader(store.get_table("warm", "s", "t0"), used=False).holds_snapshot
    store.close()


def test_a_started_server_has_warmed_its_tables_and_says_so_in_its_metrics(tmp_path: Path) -> None:
    first = deploy(tmp_path / "a", {"type": "local", "root": str(tmp_path / "buckets")})
    write_deltalake(str(tmp_path / "buckets" / "bucket" / "t"), rows(0, 10))
    first.store.create_share("warm", [TableSpec.parse("s:t:delta:bucket:t")])
    first.server.stop()
    first.store.close()
    # The same store and storage, restarted: the share exists before the server starts.
    restarted = deploy(tmp_path / "a", {"type": "local", "root": str(tmp_path / "buckets")})
    try:
        base = restarted.endpoint.removesuffix("/delta-sharing")
        deadline = time.monotonic() + 10
        text = ""
        while time.monotonic() < deadline:
            text = httpx.get(base + "/metrics").text
            if 'sharing_snapshot_warms_total{outcome="built",why="start"} 1.0' in text:
                break
            time.sleep(0.1)
        assert 'sharing_snapshot_warms_total{outcome="built",why="start"} 1.0' in text
    finally:
        restarted.server.stop()
        restarted.store.close()
