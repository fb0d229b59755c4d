"""`TableReaders`, the door to the shared tables: one reader per table and location, kept between
requests; which tables recipients read lately; the snapshots' one cache; summaries that fail."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from share_store.delta.reader import DeltaTableReader
from share_store.errors import UnsupportedOperation
from share_store.model import SharedTable
from share_store.readers.table_readers import TableReaders
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.tables.snapshot import TableSnapshot
from share_store.tables.snapshot_cache import SnapshotCache
from share_store.tables.summaries import SnapshotSummary

T = SharedTable("id-t", "s", "d", "t", "delta", "bucket", "t", True, datetime.now(UTC))
U = replace(T, id="id-u", name="u", path="u")


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    """Tables `t` (two commits) and `u` (one) in bucket `bucket`."""
    for name, commits in (("t", 2), ("u", 1)):
        for n in range(commits):
            ids = pa.array(range(n * 10, n * 10 + 10), pa.int64())
            write_deltalake(str(tmp_path / "bucket" / name), pa.table({"id": ids}), mode="append")
    return LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"))


def test_a_tables_reader_is_made_once_and_kept(storage: LocalStorage) -> None:
    readers = TableReaders(storage)
    reader = readers.reader(T)
    assert isinstance(reader, DeltaTableReader) and readers.reader(T) is reader
    assert reader.head().version == 1


def test_a_table_at_another_location_gets_a_reader_of_its_own(storage: LocalStorage) -> None:
    readers = TableReaders(storage)
    first = readers.reader(T)
    moved = readers.reader(replace(T, path="u"))  # the table re-added at another path
    assert moved is not first
    assert (first.head().version, moved.head().version) == (1, 0)


def test_an_iceberg_table_needs_a_store_for_its_versions(storage: LocalStorage) -> None:
    iceberg = replace(T, format="uniform", bucket="wh", path="ns/t")
    with pytest.raises(UnsupportedOperation, match="share store for their versions"):
        TableReaders(storage).reader(iceberg)


def test_the_tables_read_for_recipients_are_listed_most_recent_first(storage: LocalStorage) -> None:
    readers = TableReaders(storage)
    assert readers.quiet_for() == float("inf") and readers.recently_used(60) == []
    readers.reader(T, used=False)  # the warmer's read
    assert readers.quiet_for() == float("inf") and readers.recently_used(60) == []
    readers.reader(T)
    readers.reader(U)
    assert readers.recently_used(60) == [U, T]
    assert readers.quiet_for() < 60
    readers.reader(T)
    assert readers.recently_used(60) == [T, U]


def test_a_table_not_read_within_the_seconds_asked_is_forgotten(storage: LocalStorage) -> None:
    readers = TableReaders(storage)
    readers.reader(T)
    assert readers.recently_used(0) == []
    assert readers.recently_used(60) == []  # forgotten, not only left out


def test_all_readers_keep_their_snapshots_in_one_cache(storage: LocalStorage) -> None:
    cache = SnapshotCache()
    readers = TableReaders(storage, snapshots=cache)
    readers.reader(T).head()
    readers.reader(U).head()
    assert readers.snapshots is cache and len(cache) == 2


def test_a_built_snapshot_is_handed_on_with_the_reader_that_built_it(storage: LocalStorage) -> None:
    readers = TableReaders(storage)
    built: list[tuple[object, TableSnapshot]] = []
    readers.on_built = lambda reader, snapshot: built.append((reader, snapshot))
    reader = readers.reader(T)
    assert isinstance(reader, DeltaTableReader) and reader.on_built is not None
    snapshot = reader.head()
    reader.on_built(snapshot)  # as the reader calls it once a held snapshot is built
    assert built == [(reader, snapshot)]


def test_a_summary_store_that_fails_leaves_the_log_to_be_replayed(storage: LocalStorage) -> None:
    asked: list[str] = []

    class Down:
        def snapshot_summary(self, table_id: str) -> SnapshotSummary | None:
            asked.append(table_id)
            raise ConnectionError("the store is down")

        def save_snapshot_summary(self, table_id: str, summary: SnapshotSummary) -> None:
            raise ConnectionError("the store is down")

    head = TableReaders(storage, summaries=Down()).reader(T).head()  # type: ignore[arg-type]
    assert asked == [T.id] and (head.version, head.num_files) == (1, 2)
