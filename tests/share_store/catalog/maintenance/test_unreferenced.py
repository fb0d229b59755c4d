"""Unreferenced file removal: what it decides (pure), and real runs on local storage, SQLite and PostgreSQL.

Tables are written with pyiceberg through the catalog (`WarehouseTables`), so their data files,
manifests and metadata files are real; orphans are files written beside them. Time passes by
handing each run a later `now` (every file, live or orphan, is then as old as that makes it).
The attacks come first: what must never be marked or deleted.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from sqlalchemy import select, update

from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.file_io import ConfinedFileIO
from share_store.catalog.maintenance import unreferenced
from share_store.catalog.maintenance.configuration import UnreferencedFileRemoval
from share_store.catalog.maintenance.unreferenced import (
    Decision,
    decide,
    live_keys,
    remove_unreferenced,
)
from share_store.catalog.names import TableName
from share_store.catalog.purge import UnreadableTable, reachable_files
from share_store.catalog.table_source import WarehouseTables
from share_store.persistence.sql_schema import maintenance_noncurrent_table, warehouse_tables_table
from share_store.signing.file_urls import UrlSigner
from share_store.storage.base import ObjectInfo
from share_store.storage.file_uris import file_uri
from share_store.storage.local import LocalStorage
from share_store.storage.table_location import TableLocation

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
T = TableName.of("whs", ("ns",), "t")
U = TableName.of("whs", ("ns",), "u")
ON = UnreferencedFileRemoval()  # 3 days unreferenced, 10 days noncurrent
NOW = datetime.now(UTC)
DAY = timedelta(days=1)


def ids(values: range) -> pa.Table:
    return pa.table({"id": pa.array(list(values), pa.int64())})


def table_of(catalog: WarehouseCatalog, name: TableName = T) -> Any:
    return WarehouseTables(catalog, name.warehouse).load_table((*name.namespace, name.name))


def written(catalog: WarehouseCatalog, name: TableName = T, appends: int = 2, **new: Any) -> Any:
    catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}, **new))
    for n in range(appends):
        table_of(catalog, name).append(ids(range(n * 10, n * 10 + 10)))
    return table_of(catalog, name)


def folder(catalog: WarehouseCatalog, name: TableName = T) -> Path:
    location = catalog.table_location(name)
    return catalog.storage.root / location.bucket / location.prefix  # type: ignore[attr-defined]


def files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()}


def orphan(path: Path, age: timedelta | None = None, data: bytes = b"orphan") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if age is not None:
        stamp = (datetime.now(UTC) - age).timestamp()
        os.utime(path, (stamp, stamp))
    return path


def run(
    catalog: WarehouseCatalog, days: float, name: TableName = T, settings: UnreferencedFileRemoval = ON
) -> Any:
    return remove_unreferenced(catalog, name, settings, NOW + days * DAY)


def marks(catalog: WarehouseCatalog) -> set[str]:
    with catalog.transactions.read() as conn:
        return set(conn.execute(select(maintenance_noncurrent_table.c.key)).scalars())


def manifest_files(table: Any) -> tuple[str, list[str]]:
    snapshot = table.current_snapshot()
    return snapshot.manifest_list, [m.manifest_path for m in snapshot.manifests(table.io)]


def local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


# -- attacks: what is live, young, or another table's is never marked nor deleted -----------------


def test_live_data_manifests_and_metadata_are_never_marked_nor_deleted(catalog: WarehouseCatalog) -> None:
    table = written(catalog, appends=3)
    table.delete("id = 3")  # a delete: a rewritten data file, the old one live in older snapshots
    before = files_under(folder(catalog))
    for days in (4, 20, 400):
        assert run(catalog, days).marked == 0
    assert marks(catalog) == set()
    assert files_under(folder(catalog)) == before
    assert sorted(table_of(catalog).scan().to_arrow()["id"].to_pylist()) == [i for i in range(30) if i != 3]


def test_everything_a_purge_would_delete_is_live(catalog: WarehouseCatalog) -> None:
    written(catalog)
    loaded, location = catalog.load_table(T), catalog.table_location(T)
    assert loaded.metadata_location is not None
    io = ConfinedFileIO(catalog.storage, location)
    reached = {location.confine(catalog.storage, path)[1]
               for path in reachable_files(loaded.metadata_location, loaded.metadata, io)}  # fmt: skip
    assert reached <= live_keys(catalog.storage, location, loaded.metadata_location, loaded.metadata)
    assert len(reached) > 6  # metadata files, manifest lists, manifests and data files all counted


def test_a_young_orphan_is_untouched(catalog: WarehouseCatalog) -> None:
    written(catalog)
    young = orphan(folder(catalog) / "data" / "in-flight.parquet")  # written now: maybe a commit to come
    assert run(catalog, 2.9).marked == 0
    assert marks(catalog) == set() and young.exists()


def test_a_sibling_folder_that_extends_the_prefix_is_never_listed(catalog: WarehouseCatalog) -> None:
    table = written(catalog)
    # Another table whose folder is `t-<hex>def`: not inside `t-<hex>/`, so the catalog takes it.
    written(catalog, U, location=table.metadata.location + "def")
    mine, theirs = folder(catalog), folder(catalog, U)
    assert str(theirs).startswith(str(mine)) and theirs != mine
    stray = orphan(Path(f"{mine}x") / "data" / "old.parquet", age=timedelta(days=50))
    theirs_before = files_under(theirs)
    for days in (4, 20, 40):
        run(catalog, days)
    assert all(key.startswith(catalog.table_location(T).prefix + "/") for key in marks(catalog))
    assert files_under(theirs) == theirs_before and stray.exists()
    assert table_of(catalog, U).scan().to_arrow().num_rows == 20


def test_another_tables_files_and_orphans_are_never_touched(catalog: WarehouseCatalog) -> None:
    written(catalog)
    written(catalog, U)
    theirs = orphan(folder(catalog, U) / "data" / "their-orphan.parquet")
    mine = orphan(folder(catalog) / "data" / "my-orphan.parquet")
    theirs_before = files_under(folder(catalog, U))
    run(catalog, 4)
    assert run(catalog, 20).deleted == 1
    assert not mine.exists() and theirs.exists() and files_under(folder(catalog, U)) == theirs_before
    # Its own run takes its own orphan, and nothing of `t`.
    run(catalog, 4, U)
    assert run(catalog, 20, U).deleted == 1 and not theirs.exists()
    assert table_of(catalog).scan().to_arrow().num_rows == 20


def test_a_table_folder_recorded_inside_this_one_is_never_touched(catalog: WarehouseCatalog) -> None:
    written(catalog)
    written(catalog, U)
    inner = catalog.table_location(T).prefix + "/nested"
    with catalog.transactions.change() as conn:  # as no catalog would let it: U's folder inside T's
        conn.execute(update(warehouse_tables_table).where(warehouse_tables_table.c.name == "u")
                     .values(location=inner))  # fmt: skip
    theirs = orphan(folder(catalog) / "nested" / "data" / "f.parquet")
    run(catalog, 4)
    run(catalog, 20)
    assert theirs.exists() and not any(key.startswith(inner + "/") for key in marks(catalog))


@pytest.mark.parametrize("damage", ["manifest list gone", "manifest gone", "manifest corrupt"])
def test_an_unreadable_manifest_deletes_nothing_and_says_so(catalog: WarehouseCatalog, damage: str) -> None:
    table = written(catalog)
    stray = orphan(folder(catalog) / "data" / "orphan.parquet")
    run(catalog, 4)
    assert marks(catalog) == {catalog.table_location(T).prefix + "/data/orphan.parquet"}
    manifest_list, manifests = manifest_files(table)
    if damage == "manifest list gone":
        local(manifest_list).unlink()
    elif damage == "manifest gone":
        local(manifests[0]).unlink()
    else:
        local(manifests[0]).write_bytes(b"not avro")
    before = files_under(folder(catalog))
    with pytest.raises(UnreadableTable, match="deleted nothing") as raised:
        run(catalog, 40)
    assert str(catalog.storage.root) not in str(raised.value)  # type: ignore[attr-defined]
    assert files_under(folder(catalog)) == before and stray.exists()
    assert marks(catalog) == {catalog.table_location(T).prefix + "/data/orphan.parquet"}


def test_a_file_a_writer_commits_during_the_run_is_kept(
    catalog: WarehouseCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written(catalog)
    old = folder(catalog) / "data" / "imported.parquet"
    old.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(ids(range(100, 105)), old)
    run(catalog, 4)
    assert len(marks(catalog)) == 1
    listing = unreferenced._listing

    def listed_then_committed(*args: Any) -> Any:
        found = list(listing(*args))
        table_of(catalog).add_files([old.as_uri()])  # the writer wins the race after the listing
        return iter(found)

    monkeypatch.setattr(unreferenced, "_listing", listed_then_committed)
    removal = run(catalog, 20)
    # Decided again on what the new metadata reaches: kept, and unmarked at once.
    assert (removal.deleted, removal.unmarked) == (0, 1) and marks(catalog) == set()
    assert old.exists() and table_of(catalog).scan().to_arrow().num_rows == 25
    monkeypatch.undo()
    assert run(catalog, 40) == unreferenced.Removal()


def test_a_table_that_keeps_changing_loses_nothing_this_round(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    written(catalog)
    stray = orphan(folder(catalog) / "data" / "orphan.parquet")
    run(catalog, 4)
    monkeypatch.setattr(unreferenced, "SETTLE_ATTEMPTS", 0)  # never seen settled
    assert run(catalog, 20).deleted == 0 and stray.exists() and len(marks(catalog)) == 1


def test_disabled_does_nothing(catalog: WarehouseCatalog) -> None:
    written(catalog)
    stray = orphan(folder(catalog) / "data" / "orphan.parquet")
    run(catalog, 4)
    off = UnreferencedFileRemoval(enabled=False)
    assert run(catalog, 400, settings=off) == unreferenced.Removal()
    assert stray.exists() and len(marks(catalog)) == 1


# -- the lifecycle: marked, then deleted a grace period later ---------------------------------------


def test_an_orphan_is_marked_then_deleted_after_the_noncurrent_days(catalog: WarehouseCatalog) -> None:
    table = written(catalog)
    prefix = catalog.table_location(T).prefix
    data = orphan(folder(catalog) / "data" / "failed-write.parquet", data=b"x" * 100)
    meta = orphan(folder(catalog) / "metadata" / "snap-failed.avro", data=b"y" * 10)
    assert run(catalog, 2).marked == 0
    assert run(catalog, 4).marked == 2
    assert marks(catalog) == {f"{prefix}/data/failed-write.parquet", f"{prefix}/metadata/snap-failed.avro"}
    assert run(catalog, 13.9).deleted == 0 and data.exists() and meta.exists()  # marked 9.9 days ago
    removal = run(catalog, 14)
    assert (removal.deleted, removal.bytes_deleted) == (2, 110)
    assert not data.exists() and not meta.exists() and marks(catalog) == set()
    assert table_of(catalog).scan().to_arrow().num_rows == 20
    assert files_under(folder(catalog)) >= {local(p) for p in manifest_files(table)[1]}


def test_an_old_orphan_by_its_modified_time_is_marked_at_once(catalog: WarehouseCatalog) -> None:
    written(catalog)
    orphan(folder(catalog) / "data" / "old.parquet", age=timedelta(days=5))
    orphan(folder(catalog) / "data" / "new.parquet", age=timedelta(days=1))
    assert run(catalog, 0).marked == 1
    assert [key.rpartition("/")[2] for key in marks(catalog)] == ["old.parquet"]


def test_an_orphan_referenced_again_is_unmarked_and_kept(catalog: WarehouseCatalog) -> None:
    written(catalog)
    old = folder(catalog) / "data" / "imported.parquet"
    old.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(ids(range(100, 105)), old)
    run(catalog, 4)
    assert len(marks(catalog)) == 1
    table_of(catalog).add_files([old.as_uri()])
    assert run(catalog, 8).unmarked == 1 and marks(catalog) == set()
    assert run(catalog, 100).deleted == 0 and old.exists()
    assert table_of(catalog).scan().to_arrow().num_rows == 25


def test_an_orphan_gone_by_itself_is_unmarked(catalog: WarehouseCatalog) -> None:
    written(catalog)
    stray = orphan(folder(catalog) / "data" / "orphan.parquet")
    run(catalog, 4)
    stray.unlink()
    assert run(catalog, 5).unmarked == 1 and marks(catalog) == set()


# -- the decision, pure -----------------------------------------------------------------------------


def info(key: str, age_days: float, size: int = 1) -> ObjectInfo:
    return ObjectInfo(key, size, int((NOW - age_days * DAY).timestamp() * 1000))


def test_decide_marks_old_unreferenced_files_only() -> None:
    objects = [info("t/live", 30), info("t/old", 3), info("t/young", 2.9)]
    assert decide(objects, {"t/live"}, {}, ON, NOW) == Decision(mark=["t/old"])


def test_decide_deletes_a_mark_once_due_and_counts_its_bytes() -> None:
    objects = [info("t/due", 30, 7), info("t/early", 30, 5)]
    marked = {"t/due": NOW - 10 * DAY, "t/early": NOW - 9 * DAY}
    assert decide(objects, set(), marked, ON, NOW) == Decision(delete=["t/due"], bytes_deleted=7)


def test_decide_unmarks_live_young_and_gone_files() -> None:
    objects = [info("t/live", 30), info("t/rewritten", 0.5)]
    marked = {key: NOW - 20 * DAY for key in ("t/live", "t/rewritten", "t/gone")}
    decision = decide(objects, {"t/live"}, marked, ON, NOW)
    assert decision == Decision(unmark=["t/gone", "t/live", "t/rewritten"])


def test_decide_marks_anew_a_file_written_again_after_its_mark() -> None:
    # Modified four days ago, marked twenty days ago: new content under an old key.
    decision = decide([info("t/again", 4)], set(), {"t/again": NOW - 20 * DAY}, ON, NOW)
    assert decision == Decision(mark=["t/again"])


def test_decide_disabled_decides_nothing() -> None:
    off = UnreferencedFileRemoval(enabled=False)
    assert decide([info("t/old", 30)], set(), {"t/old": NOW - 30 * DAY}, off, NOW) == Decision()


def test_a_path_spelled_with_dot_segments_still_keeps_its_file(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://localhost"))
    (tmp_path / "whs").mkdir()
    location = TableLocation(file_uri(storage, "whs", "ns/t"), "whs", "ns/t")
    odd = file_uri(storage, "whs", "ns/t/data") + "/./sub/../f.parquet"
    assert "ns/t/data/f.parquet" in unreferenced._keys(storage, location, odd)
    escaped = file_uri(storage, "whs", "ns/t/data") + "/a%2520b.parquet"
    assert {"ns/t/data/a%20b.parquet", "ns/t/data/a%2520b.parquet"} <= unreferenced._keys(
        storage, location, escaped
    )
