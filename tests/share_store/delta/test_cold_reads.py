"""A table's first read streams its checkpoint while the held snapshot is built behind it.

What is checked: the first snapshot of a big checkpoint is streamed and the held one
replaces it in the cache once built (with its files looked up); later versions are
advanced from the held one; the warmer's `built` waits for it; a build that fails
leaves nothing cached; small checkpoints are held at once as before; a missing file
goes unreported by the streamed answer and is reported by the next.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from share_store.delta import reader as delta_reader
from share_store.delta import replay
from share_store.delta.advanced_snapshots import ACTIVE
from share_store.delta.reader import DeltaTableReader
from share_store.delta.streamed_commits import StreamedCommits
from share_store.errors import TableFilesMissing
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.tables.snapshot_cache import CheckedVersions, SnapshotCache


def checkpointed(root: Path, appends: int = 4) -> Path:
    """`appends` commits of one file each, a checkpoint, then two more commits."""
    location = root / "b" / "t"
    for index in range(appends):
        write_deltalake(str(location), pa.table({"id": [index]}), mode="append")
    DeltaTable(str(location)).create_checkpoint()
    for index in range(appends, appends + 2):
        write_deltalake(str(location), pa.table({"id": [index]}), mode="append")
    return location


def reader(root: Path, cache: SnapshotCache | None = None) -> DeltaTableReader:
    storage = LocalStorage(root, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"))
    snapshots = (cache if cache is not None else SnapshotCache()).table()
    return DeltaTableReader(storage, "b", "t", snapshots, CheckedVersions())


@pytest.fixture
def cold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "COLD_STREAM_BYTES", -1)  # every checkpoint streams to its first reader
    monkeypatch.setattr(delta_reader, "BUILD_WAIT_SECONDS", 0.0)


def paths(files: object) -> list[str]:
    return [add["path"] for add in files]  # type: ignore[attr-defined]


def test_the_first_read_streams_and_the_held_snapshot_replaces_it(tmp_path: Path, cold: None) -> None:
    checkpointed(tmp_path)
    table = reader(tmp_path)
    first = table.snapshot()
    assert first.streamed and first.num_files == 6
    held = table.built(first)
    assert not held.streamed and held.version == first.version
    assert paths(held.adds) == paths(first.adds)  # the same files, in the same order
    assert table.snapshot() is held  # the cache now holds the held one
    assert ACTIVE in held.memo  # later versions are advanced from it
    # Its files were looked up behind the first answer: the next query finds the check trusted.
    assert not table.check_files_exist(held, with_dvs=True)


def test_later_versions_are_advanced_from_the_held_snapshot(tmp_path: Path, cold: None) -> None:
    location = checkpointed(tmp_path)
    table = reader(tmp_path)
    held = table.built(table.snapshot())
    write_deltalake(str(location), pa.table({"id": [99]}), mode="append")
    table._forget_listing()
    later = table.snapshot()
    assert not later.streamed and later.version == held.version + 1
    shared = {id(add) for add in held.adds} & {id(add) for add in later.adds}
    assert len(shared) == held.num_files  # advanced (actions shared), not replayed


def test_a_small_checkpoint_is_held_at_once(tmp_path: Path) -> None:
    checkpointed(tmp_path)
    table = reader(tmp_path)
    first = table.snapshot()
    assert not first.streamed and table.built(first) is first


def test_a_checkpoint_too_big_to_hold_is_never_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "STREAM_THRESHOLD_BYTES", -1)
    checkpointed(tmp_path)
    table = reader(tmp_path)
    first = table.snapshot()
    assert first.streamed and table.built(first) is first and not table._building
    assert table.snapshot() is first


def test_a_failed_build_leaves_nothing_cached(
    tmp_path: Path, cold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpointed(tmp_path)
    table = reader(tmp_path)
    replayed = table._replayed

    def build_fails(listing: object, version: int, first_reader: bool) -> object:
        if not first_reader:
            raise OSError("the disk went away")
        return replayed(listing, version, first_reader)  # type: ignore[arg-type]

    monkeypatch.setattr(table, "_replayed", build_fails)
    first = table.snapshot()
    assert first.streamed
    assert table.built(first) is first  # the build failed: the streamed one is all there is
    # Not kept: the next query replays again (and reports what fails to its recipient).
    assert table._snapshots.get(first.version) is None


def test_a_missing_file_is_reported_by_the_answer_after_the_first(tmp_path: Path, cold: None) -> None:
    location = checkpointed(tmp_path)
    table = reader(tmp_path)
    gone = sorted(location.glob("*.parquet"))[0]
    gone.unlink()
    first = table.snapshot()
    # Streamed files are not looked up (as for checkpoints too big to hold): the first answer goes.
    assert first.streamed and not table.check_files_exist(first, with_dvs=True)
    held = table.built(first)
    with pytest.raises(TableFilesMissing):
        table.check_files_exist(held)


def test_one_build_per_version_however_many_first_readers(tmp_path: Path, cold: None) -> None:
    checkpointed(tmp_path)
    cache = SnapshotCache()
    table = reader(tmp_path, cache)
    gate = threading.Event()
    delta_reader._builds.submit(gate.wait, 10)  # the build thread busy: builds stay pending
    try:
        first = table.snapshot()
        pending = dict(table._building)
        cache.drop(table._snapshots._table, first.version)  # evicted: another first reader replays
        again = table.snapshot()
        assert again.streamed and again is not first
        assert table._building == pending and len(pending) == 1  # still the one build
    finally:
        gate.set()
    held = table.built(again)
    assert not held.streamed and table.snapshot() is held


def test_the_cache_takes_a_held_snapshot_over_a_streamed_one_only(tmp_path: Path, cold: None) -> None:
    checkpointed(tmp_path)
    cache = SnapshotCache()
    table = reader(tmp_path, cache)
    first = table.snapshot()
    held = table.built(first)
    assert cache.files == held.num_files  # the streamed one's tail is no longer counted
    cache.put(table._snapshots._table, first)  # a streamed snapshot never displaces a held one
    assert table.snapshot() is held


def test_older_versions_and_builds_over_the_cap_are_not_built(
    tmp_path: Path, cold: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recipient reading many cold versions, or many tables at once, queues no build per request."""
    checkpointed(tmp_path)
    table = reader(tmp_path)
    listing = table.listing()
    older = table.snapshot(listing.latest_version - 1)  # time travel: streamed, nothing built
    assert older.streamed and not table._building and table.built(older) is older
    monkeypatch.setattr(delta_reader, "_pending", threading.BoundedSemaphore(1))
    assert delta_reader._pending.acquire(blocking=False)  # the one build allowed is taken
    latest = table.snapshot()
    assert latest.streamed and not table._building and table.built(latest) is latest
    delta_reader._pending.release()
    table._snapshots.drop(latest.version)
    assert not table.built(table.snapshot()).streamed  # room again: built


def test_a_table_with_no_checkpoint_streams_its_commits_to_its_first_reader(
    tmp_path: Path, cold: None
) -> None:
    location = tmp_path / "b" / "t"
    for index in range(5):
        write_deltalake(str(location), pa.table({"id": [index]}), mode="append")
    table = reader(tmp_path)
    first = table.snapshot()
    assert isinstance(first.adds, StreamedCommits) and first.streamed and first.num_files == 5
    held = table.built(first)
    assert not held.streamed and paths(held.adds) == paths(first.adds)
    assert table.snapshot() is held and ACTIVE in held.memo
    # Time travel is read cold too: streamed, never built behind.
    older = table.snapshot(2)
    assert isinstance(older.adds, StreamedCommits) and table.built(older) is older
