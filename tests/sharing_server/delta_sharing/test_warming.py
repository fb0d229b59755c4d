"""Snapshots built in the background: every shared table at start, hot tables after each commit."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from share_store.delta.reader import DeltaTableReader
from share_store.errors import TableFilesMissing
from share_store.model import TableSpec
from share_store.persistence import ShareStore
from share_store.persistence.activity import ActivityEvent
from share_store.persistence.engine import sqlite_url
from share_store.readers.table_readers import TableReaders
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.tables.snapshot_cache import SnapshotCache
from share_store.tables.summaries import SnapshotSummary, SummarizedFiles
from sharing_server.delta_sharing import warming
from sharing_server.delta_sharing.warming import SnapshotWarmer
from sharing_server.observability.metrics import Metrics
from tests.conftest import deploy


def rows(start: int, count: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + count), pa.int64())})


def read_lately(store: ShareStore, share: str, names: list[str], hours_ago: float = 1.0) -> None:
    """Recipients' reads of `names` as the activity kept in the store has them: what start warms."""
    when = datetime.now(UTC) - timedelta(hours=hours_ago)
    store.record_activity(
        [ActivityEvent(when, "table_query", 200, "tok", share, "s", name) for name in names]
    )


def setting(
    tmp_path: Path, tables: int, max_files: int = 1_000, check_seconds: float = 5.0, read: bool = True
) -> tuple[ShareStore, TableReaders, Metrics]:
    root = tmp_path / "buckets"
    for index in range(tables):
        for part in range(3):  # three commits, one file each
            write_deltalake(str(root / "bucket" / f"t{index}"), rows(part * 10, 10), mode="append")
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    specs = [TableSpec.parse(f"s:t{index}:delta:bucket:t{index}") for index in range(tables)]
    store.create_share("warm", specs)
    if read:
        read_lately(store, "warm", [f"t{index}" for index in range(tables)])
    storage = LocalStorage(root, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"))
    readers = TableReaders(storage, snapshots=SnapshotCache(max_files), files_check_seconds=check_seconds)
    return store, readers, Metrics()


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
    read_lately(store, "warm", ["gone"])  # read before its files went
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
    # A recipient reads it: the activity kept says so to the next start.
    headers = {"Authorization": f"Bearer {first.token('warm')}"}
    assert (
        httpx.get(f"{first.endpoint}/shares/warm/schemas/s/tables/t/version", headers=headers).status_code
        == 200
    )
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


def delta_reader(readers: TableReaders, store: ShareStore, name: str) -> DeltaTableReader:
    reader = readers.reader(store.get_table("warm", "s", name), used=False)
    assert isinstance(reader, DeltaTableReader)
    return reader


def data_file(tmp_path: Path, name: str) -> Path:
    return next((tmp_path / "buckets" / "bucket" / name).glob("*.parquet"))


def until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Poll `condition` until it holds (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_files_of_a_warmed_table_are_checked_and_its_lines_made_before_any_query(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=2)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "check", "passed") == 2
    reader = delta_reader(readers, store, "t0")
    snapshot = reader.snapshot()
    # A query in either format finds the check trusted: it looks nothing up.
    assert not reader.check_files_exist(snapshot, with_dvs=False)
    assert not reader.check_files_exist(snapshot, with_dvs=True)
    # The lines of a request without capabilities (parquet) are made, one per file.
    lines = snapshot.memo[("lines", "parquet", "parquet", None)]
    assert len(lines) == 3 and all(template is not None for template in lines.values())
    store.close()


def test_a_check_made_by_the_warmer_expires_as_files_check_seconds_says(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=1, check_seconds=0.2)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    reader = delta_reader(readers, store, "t0")
    snapshot = reader.snapshot()
    data_file(tmp_path, "t0").unlink()  # as VACUUM does, after the warmer's check
    assert until(lambda: not readers_check_fresh(reader, snapshot.version))
    with pytest.raises(TableFilesMissing):
        reader.check_files_exist(snapshot)
    store.close()


def readers_check_fresh(reader: DeltaTableReader, version: int) -> bool:
    return reader._checked.fresh((version, False))  # no vectors: one check covers both formats


def test_the_warmer_checks_again_before_its_check_expires_and_counts_a_file_gone(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=1, check_seconds=0.2)
    warmer = SnapshotWarmer(store, readers, metrics, refresh_seconds=0.05)
    warmer.start()
    try:
        # Checked at start, then again and again as each check nears its end: five times within a second
        # or so (a check is trusted 0.2 s), with no query asking.
        assert until(lambda: warms(metrics, "check", "passed") >= 5)
        data_file(tmp_path, "t0").unlink()
        assert until(lambda: warms(metrics, "check", "failed") >= 1)
        # The failed check is not trusted: the query checks for itself and says what is gone.
        reader = delta_reader(readers, store, "t0")
        assert until(lambda: not readers_check_fresh(reader, 2))
        with pytest.raises(TableFilesMissing):
            reader.check_files_exist(reader.snapshot())
    finally:
        warmer.stop()
    store.close()


def warmed_once(tmp_path: Path, **options: Any) -> tuple[ShareStore, TableReaders, Metrics, SnapshotWarmer]:
    """One shared table whose files check is trusted 10 ms, warmed as at a start by a warmer of `options`."""
    store, readers, metrics = setting(tmp_path, tables=1, check_seconds=0.01)
    warmer = SnapshotWarmer(store, readers, metrics, **options)
    warmer.warm_shared_tables()
    return store, readers, metrics, warmer


def test_checks_ahead_of_queries_wait_once_they_took_their_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, metrics, warmer = warmed_once(tmp_path)  # at start, whatever the share: done once
    assert warms(metrics, "check", "passed") == 1
    monkeypatch.setattr(warming, "CHECK_SHARE", 0.0)
    time.sleep(0.02)  # the start's check has expired
    warmer.renew_checks()
    assert warms(metrics, "check", "deferred") == 1 and warms(metrics, "check", "passed") == 1
    store.close()


def test_checks_are_renewed_ahead_only_while_recipients_are_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, readers, metrics, warmer = warmed_once(tmp_path, warm_on_start=False, refresh_seconds=0.01)
    passed = warms(metrics, "check", "passed")
    readers.reader(store.get_table("warm", "s", "t0")).snapshot()  # a recipient reads the table
    time.sleep(0.02)  # the start's check has expired
    monkeypatch.setattr(warming, "QUIET_SECONDS", 60.0)
    warmer.refresh_hot_tables()
    assert warms(metrics, "check", "passed") == passed  # reading goes on: its queries check
    monkeypatch.setattr(warming, "QUIET_SECONDS", 0.0)
    warmer.refresh_hot_tables()
    assert warms(metrics, "check", "passed") == passed + 1  # quiet: checked ahead of the next query
    store.close()


def test_a_table_neither_built_nor_read_for_long_is_left_to_its_next_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, metrics, warmer = warmed_once(tmp_path)
    time.sleep(0.02)  # the start's check has expired
    warmer.renew_checks()
    assert warms(metrics, "check", "passed") == 2  # checked again: built a moment ago
    monkeypatch.setattr(warming, "KEEP_READY_SECONDS", 0.0)
    time.sleep(0.02)
    warmer.renew_checks()
    warmer.renew_checks()
    assert warms(metrics, "check", "passed") == 2
    store.close()


def test_no_check_is_made_ahead_when_every_query_checks(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=1, check_seconds=0)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "check", "passed") == 0 and warms(metrics, "start", "built") == 1
    store.close()


def test_a_new_commit_is_built_and_checked_for_the_next_query_by_a_running_server(tmp_path: Path) -> None:
    root = tmp_path / "buckets"
    write_deltalake(str(root / "bucket" / "t"), rows(0, 10))
    served = deploy(tmp_path / "a", {"type": "local", "root": str(root)})  # refresh_seconds = 1, the default
    try:
        served.store.create_share("warm", [TableSpec.parse("s:t:delta:bucket:t")])
        headers = {"Authorization": f"Bearer {served.token('warm')}"}
        url = f"{served.endpoint}/shares/warm/schemas/s/tables/t/query"
        assert httpx.post(url, json={}, headers=headers).headers["delta-table-version"] == "0"
        readers = served.server.app.state.services.readers  # type: ignore[attr-defined]
        reader = readers.reader(served.store.get_table("warm", "s", "t"), used=False)
        write_deltalake(str(root / "bucket" / "t"), rows(10, 10), mode="append")
        # The warmer's next round (within refresh_seconds) builds version 1 and checks its files.
        assert until(lambda: readers_check_fresh(reader, 1))
        assert not reader.check_files_exist(reader.snapshot(1))
        answer = httpx.post(url, json={}, headers=headers)
        assert answer.headers["delta-table-version"] == "1"
        assert len(answer.text.splitlines()) == 2 + 2  # protocol, metadata and both files
    finally:
        served.server.stop()
        served.store.close()


def summarized(store: ShareStore, table_id: str) -> int | None:
    """The version of the table's persisted summary."""
    found = store.snapshot_summary(table_id)
    return found.version if found is not None else None


def test_a_restarted_server_answers_metadata_from_the_summary_while_the_log_has_not_moved(
    tmp_path: Path,
) -> None:
    root = tmp_path / "buckets"
    storage = {"type": "local", "root": str(root)}
    for part in range(3):
        write_deltalake(str(root / "bucket" / "t"), rows(part * 10, 10), mode="append")
    first = deploy(tmp_path / "a", storage)
    first.store.create_share("warm", [TableSpec.parse("s:t:delta:bucket:t")])
    table = first.store.get_table("warm", "s", "t")
    try:
        # The warmer's refresh rounds bring a hot table up to date and save its summary.
        headers = {"Authorization": f"Bearer {first.token('warm')}"}
        url = f"{first.endpoint}/shares/warm/schemas/s/tables/t"
        assert httpx.post(url + "/query", json={}, headers=headers).status_code == 200
        assert until(lambda: summarized(first.store, table.id) == 2)
        built = httpx.get(url + "/metadata", headers=headers).text
    finally:
        first.server.stop()
        first.store.close()
    # Restarted without warming: nothing built, yet /metadata answers as the first server did.
    restarted = deploy(tmp_path / "a", storage, env={"SHARING_CACHE_WARM_ON_START": "false"})
    try:
        snapshots = restarted.server.app.state.services.readers.snapshots  # type: ignore[attr-defined]
        answer = httpx.get(url.replace(first.endpoint, restarted.endpoint) + "/metadata", headers=headers)
        assert answer.status_code == 200 and answer.headers["delta-table-version"] == "2"
        assert answer.text == built and '"numFiles":3' in answer.text
        assert len(snapshots) == 0  # the log was not replayed
        # A newer version than the summary's: the log is replayed for it.
        write_deltalake(str(root / "bucket" / "t"), rows(30, 10), mode="append")
        again = httpx.get(url.replace(first.endpoint, restarted.endpoint) + "/metadata", headers=headers)
        assert again.headers["delta-table-version"] == "3" and '"numFiles":4' in again.text
        assert len(snapshots) == 1
    finally:
        restarted.server.stop()
        restarted.store.close()


def test_a_reader_reads_a_summary_from_the_store_once_per_version(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=1)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    reads: list[str] = []

    class Counting:
        def snapshot_summary(self, table_id: str) -> SnapshotSummary | None:
            reads.append(table_id)
            return store.snapshot_summary(table_id)

        def save_snapshot_summary(self, table_id: str, summary: SnapshotSummary) -> None:
            store.save_snapshot_summary(table_id, summary)

    reader = TableReaders(readers.storage, summaries=Counting()).reader(store.get_table("warm", "s", "t0"))
    first, second = reader.head(), reader.head()
    assert second is first and isinstance(first.adds, SummarizedFiles) and len(reads) == 1
    write_deltalake(str(tmp_path / "buckets" / "bucket" / "t0"), rows(100, 10), mode="append")
    assert reader.head().version == 3 and len(reads) == 2  # another version: asked again (and replayed)
    store.close()


def test_a_summary_stands_for_its_very_commit_only(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, tables=1)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    table = store.get_table("warm", "s", "t0")
    # Another server's readers, on the same store: the latest version's head is the summary.
    restarted = TableReaders(readers.storage, summaries=store)
    head = restarted.reader(table).head()
    assert isinstance(head.adds, SummarizedFiles) and (head.version, head.num_files) == (2, 3)
    assert len(restarted.snapshots) == 0
    # The table deleted and written anew, as many versions: same numbers, other files.
    location = tmp_path / "buckets" / "bucket" / "t0"
    shutil.rmtree(location)
    for part in range(3):
        write_deltalake(str(location), rows(part * 1000, 1000), mode="append")
    again = TableReaders(readers.storage, summaries=store).reader(table).head()
    assert not isinstance(again.adds, SummarizedFiles) and again.version == 2
    assert again.size != head.size
    store.close()


def test_only_the_tables_recipients_read_lately_are_warmed_at_start(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, 4, read=False)
    read_lately(store, "warm", ["t1"])
    read_lately(store, "warm", ["T3"], hours_ago=2)  # the same table, however the request spelled it
    read_lately(store, "warm", ["t2"], hours_ago=30)  # before the window: built on its first read
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "start", "built") == 2
    assert [t for t in ("t0", "t1", "t2", "t3") if delta_reader(readers, store, t).holds_snapshot] == [
        "t1",
        "t3",
    ]


def test_a_path_named_by_several_shares_is_warmed_once(tmp_path: Path) -> None:
    store, readers, metrics = setting(tmp_path, 1)
    for share in ("again", "thrice"):
        store.create_share(share, [TableSpec.parse("s:t0:delta:bucket:t0")])
        read_lately(store, share, ["t0"])
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "start", "built") == 1


def test_warming_at_start_takes_at_most_its_share_of_a_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, readers, metrics = setting(tmp_path, 3)
    clock = [100.0]
    waits: list[float] = []
    monkeypatch.setattr(warming.time, "monotonic", lambda: clock[0])
    warmer = SnapshotWarmer(store, readers, metrics)
    monkeypatch.setattr(warmer._stopped, "wait", lambda seconds: waits.append(seconds) or False)
    with warmer._sharing_a_core():
        clock[0] += 1.5  # a build that took 1.5 s
    assert waits == [1.5 * (1 / warming.START_SHARE - 1)]  # as long again: half a core
    waits.clear()
    warmer.warm_shared_tables()
    assert len(waits) == 6  # each of the three builds, then each check and lines, waits its turn


def test_summaries_of_the_start_are_written_together_and_only_for_tables_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, readers, metrics = setting(tmp_path, 3, read=False)
    read_lately(store, "warm", ["t0", "t2"])
    batches: list[list[str]] = []
    save = store.save_snapshot_summaries

    def saved_together(pending: list) -> None:
        batches.append([table_id for table_id, _ in pending])
        save(pending)

    monkeypatch.setattr(store, "save_snapshot_summaries", saved_together)
    monkeypatch.setattr(store, "save_snapshot_summary", lambda *_: pytest.fail("one by one at start"))
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    ids = {store.get_table("warm", "s", name).id: name for name in ("t0", "t1", "t2")}
    assert [[ids[t] for t in batch] for batch in batches] == [["t0", "t2"]]
    assert store.snapshot_summary(store.get_table("warm", "s", "t1").id) is None


def test_the_warmer_makes_ready_the_held_snapshot_of_a_table_first_read_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint a first reader gets streamed (`replay.COLD_STREAM_BYTES`) is built held behind
    it; the warmer waits for that build and checks and prepares the held snapshot, as a query
    after the first finds it."""
    from deltalake import DeltaTable

    from share_store.delta import replay

    store, readers, metrics = setting(tmp_path, tables=1)
    DeltaTable(str(tmp_path / "buckets" / "bucket" / "t0")).create_checkpoint()
    monkeypatch.setattr(replay, "COLD_STREAM_BYTES", -1)
    SnapshotWarmer(store, readers, metrics).warm_shared_tables()
    assert warms(metrics, "start", "built") == 1
    reader = delta_reader(readers, store, "t0")
    snapshot = reader.snapshot()
    assert not snapshot.streamed
    # Checked (by the build, or by the warmer after it): a query looks nothing up.
    assert not reader.check_files_exist(snapshot, with_dvs=True)
    assert len(snapshot.memo[("lines", "parquet", "parquet", None)]) == 3
    store.close()
