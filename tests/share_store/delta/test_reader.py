"""Snapshots of new versions built from the newest one held plus the commits after it.

Checked against a full replay by a fresh reader, over appends, a delete that
rewrites files, a schema change and an overwrite; that unchanged files' actions
are shared (so the snapshot was advanced, not replayed); that pre-encoded lines
come along for the files kept and not for those removed; and that a snapshot
the cache let go is not advanced from.
"""

from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from share_store.delta.advanced_snapshots import ACTIVE
from share_store.delta.reader import DeltaTableReader
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.tables.actions import entries
from share_store.tables.snapshot import TableSnapshot
from share_store.tables.snapshot_cache import SnapshotCache
from sharing_server.delta_sharing.encoding import LineEncoder
from sharing_server.http.ndjson import line_bytes

NOW = 1_700_000_000.0


def reader(root: Path, cache: SnapshotCache | None = None) -> DeltaTableReader:
    storage = LocalStorage(root, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"))
    return DeltaTableReader(storage, "b", "t", (cache if cache is not None else SnapshotCache()).table())


def same(one: TableSnapshot, other: TableSnapshot) -> bool:
    def files(snapshot: TableSnapshot) -> list[bytes]:
        return sorted(orjson.dumps(add, option=orjson.OPT_SORT_KEYS) for add in snapshot.adds)

    return (one.version, one.protocol, one.metadata, files(one)) == (
        other.version, other.protocol, other.metadata, files(other),
    )  # fmt: skip


def lines(table: DeltaTableReader, snapshot: TableSnapshot) -> list[bytes]:
    encoder = LineEncoder("parquet", table, NOW)
    return [line_bytes(line) for line in encoder.snapshot_files(snapshot, entries(snapshot))]


def test_new_versions_are_the_newest_snapshot_and_its_later_commits(tmp_path: Path) -> None:
    location = str(tmp_path / "b" / "t")
    write_deltalake(location, pa.table({"id": [1, 2, 3]}))
    write_deltalake(location, pa.table({"id": [4, 5]}), mode="append")
    table = reader(tmp_path)
    first = table.snapshot()
    pre_encoded = lines(table, first)
    DeltaTable(location).delete("id = 4")  # rewrites a file: remove + add
    write_deltalake(location, pa.table({"id": [6]}), mode="append")
    write_deltalake(
        location, pa.table({"id": [7], "v": ["x"]}), mode="append", schema_mode="merge"
    )  # a metadata change
    advanced = table.snapshot()
    assert advanced.version == first.version + 3
    assert same(advanced, reader(tmp_path).snapshot())
    # Built from the first: its files still active are the very same actions.
    kept = {id(add) for add in first.adds} & {id(add) for add in advanced.adds}
    assert len(kept) == first.num_files - 1
    # Their pre-encoded lines came along; the removed file's did not.
    (templates,) = (value for key, value in advanced.memo.items() if key[0] == "lines")
    assert set(templates) == kept
    assert lines(table, advanced) == lines(reader(tmp_path), reader(tmp_path).snapshot())
    assert pre_encoded  # the first snapshot's lines were made, and made the templates


def test_an_overwrite_and_time_travel_back(tmp_path: Path) -> None:
    location = str(tmp_path / "b" / "t")
    write_deltalake(location, pa.table({"id": [1, 2]}))
    table = reader(tmp_path)
    table.snapshot()
    write_deltalake(location, pa.table({"id": [9]}), mode="overwrite")
    assert same(table.snapshot(), reader(tmp_path).snapshot())
    assert same(table.snapshot(0), reader(tmp_path).snapshot(0))


def test_only_the_newest_snapshot_keeps_its_index_of_active_files(tmp_path: Path) -> None:
    location = str(tmp_path / "b" / "t")
    write_deltalake(location, pa.table({"id": [1, 2]}))
    table = reader(tmp_path, SnapshotCache(per_table=1))
    first = table.snapshot()
    assert ACTIVE in first.memo  # what the next version is advanced from
    write_deltalake(location, pa.table({"id": [3]}), mode="append")
    second = table.snapshot()
    assert ACTIVE in second.memo and ACTIVE not in first.memo
    # Version 0 again (time travel), evicted by then: replayed anew, and not the newest.
    again = table.snapshot(0)
    assert again is not first and ACTIVE not in again.memo and ACTIVE in second.memo
    write_deltalake(location, pa.table({"id": [4]}), mode="append")
    assert same(table.snapshot(), reader(tmp_path).snapshot())  # still advanced from the newest


def test_a_snapshot_the_cache_dropped_is_not_advanced_from(tmp_path: Path) -> None:
    """The reader keeps its newest snapshot weakly: the cache's bound holds for all tables."""
    for name in ("t", "other"):
        write_deltalake(str(tmp_path / "b" / name), pa.table({"id": [1, 2]}))
    cache = SnapshotCache(max_files=1, per_table=1)
    table = reader(tmp_path, cache)
    other = DeltaTableReader(table.storage, "b", "other", cache.table())
    table.snapshot()
    other.snapshot()  # over the bound: the first table's snapshot goes
    gc.collect()
    assert table._newest() is None
    write_deltalake(str(tmp_path / "b" / "t"), pa.table({"id": [3]}), mode="append")
    assert same(table.snapshot(), reader(tmp_path).snapshot())
