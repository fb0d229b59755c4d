"""Compaction on the own warehouses: what it picks (pure), and a real rewrite committed as `replace`.

Tables are written with pyiceberg through the catalog (`WarehouseTables`), on local storage; the
compaction's rows are compared with the table's before it, and concurrent writers with the
catalog's compare-and-swap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from share_store.maintenance import compaction
from share_store.maintenance.compaction import Candidate, compact, plan, sort_keys
from share_store.maintenance.settings import Compaction
from share_store.own_warehouses.catalog import NewTable, WarehouseCatalog
from share_store.own_warehouses.names import TableName
from share_store.own_warehouses.shared import WarehouseTables
from tests.own_catalog import own_catalog

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "part", StringType()))
MB = 1024 * 1024
T = TableName.of("whs", ("ns",), "t")


@pytest.fixture
def catalog(tmp_path: Path, request: pytest.FixtureRequest) -> WarehouseCatalog:
    return own_catalog(tmp_path, request)


def rows(ids: range, part: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "part": pa.array([part] * len(ids))})


def table_of(catalog: WarehouseCatalog, name: TableName = T) -> Any:
    return WarehouseTables(catalog, name.warehouse).load_table((*name.namespace, name.name))


def written(catalog: WarehouseCatalog, appends: int, new: NewTable | None = None, **kwargs: Any) -> Any:
    catalog.create_table(T, new or NewTable(SCHEMA, **kwargs))
    for n in range(appends):
        table_of(catalog).append(rows(range(n * 10, n * 10 + 10), part="ab"[n % 2]))
    return table_of(catalog)


def sorted_ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def data_files(table: Any) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


# -- the plan -------------------------------------------------------------------------------


def c(path: str, size: int, partition: str = "a", deletes: int = 0, equality: bool = False) -> Candidate:
    return Candidate(path, size, (0, (partition,)), deletes, equality)


def test_the_plan_packs_small_files_per_partition_and_leaves_big_lone_and_equality_ones() -> None:
    target = 512 * MB
    groups = plan(
        [c("a1", MB), c("a2", 2 * MB), c("big", 500 * MB), c("b1", MB, "b"), c("c1", MB, "c", deletes=1),
         c("d1", MB, "d"), c("e1", MB, "e", equality=True), c("e2", MB, "e")],
        target,
    )  # fmt: skip
    assert [[f.path for f in group] for group in groups] == [["a1", "a2"], ["c1"]]


def test_the_plan_rewrites_a_big_file_a_delete_applies_to() -> None:
    assert [[f.path for f in g] for g in plan([c("big", 500 * MB, deletes=2)], 512 * MB)] == [["big"]]


# -- rewrites -------------------------------------------------------------------------------


def test_small_appends_become_one_file_per_partition_in_a_replace_snapshot(catalog: WarehouseCatalog) -> None:
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
    before = written(catalog, 10, partition_spec=spec)
    assert len(data_files(before)) == 10
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert (done.files_rewritten, done.files_written) == (10, 2)
    assert sorted_ids(after) == sorted_ids(before) == list(range(100))
    assert after.current_snapshot().summary.operation == Operation.REPLACE
    assert after.current_snapshot().snapshot_id == done.snapshot_id
    parts = {task.file.partition[0]: task.file.file_path for task in after.scan().plan_files()}
    assert sorted(parts) == ["a", "b"]
    assert all("part=" + p in path for p, path in parts.items())
    # Nothing left to do: a second run changes nothing.
    assert compact(catalog, T, Compaction()).skipped == "nothing to compact"


def test_the_target_size_rolls_output_files(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = written(catalog, 6)
    size = sum(t.file.file_size_in_bytes for t in before.scan().plan_files())
    # A target of a third of the table's bytes: three or four files, not one.
    monkeypatch.setattr(Compaction, "target_bytes", property(lambda self: size // 3))
    done = compact(catalog, T, Compaction())
    assert 3 <= done.files_written <= 4
    assert sorted_ids(table_of(catalog)) == list(range(60))


def test_a_sort_order_is_honoured_up_to_a_bucket(catalog: WarehouseCatalog) -> None:
    order = SortOrder(SortField(1, IdentityTransform()))
    catalog.create_table(T, NewTable(SCHEMA, sort_order=order))
    for ids in (range(50, 60), range(0, 10), range(30, 40)):
        table_of(catalog).append(rows(ids))
    compact(catalog, T, Compaction())
    (task,) = table_of(catalog).scan().plan_files()
    ids = pa.parquet.read_table(task.file.file_path.removeprefix("file://"))["id"].to_pylist()
    assert ids == sorted(ids) and task.file.sort_order_id == 1
    by_bucket = SortOrder(SortField(1, BucketTransform(4)), SortField(2, IdentityTransform()), order_id=2)
    assert sort_keys(_with_order(table_of(catalog), by_bucket)) == []


def _with_order(table: Any, order: SortOrder) -> Any:
    metadata = table.metadata.model_copy(
        update={"sort_orders": [order], "default_sort_order_id": order.order_id}
    )
    return type(table)(table.name(), metadata, table.metadata_location, table.io, table.catalog)


def test_a_writer_appending_meanwhile_keeps_its_rows(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    written(catalog, 4)
    rewrite = compaction._rewrite

    def rewrite_then_append(*args: Any) -> Any:
        files = rewrite(*args)
        if not getattr(rewrite_then_append, "done", False):
            rewrite_then_append.done = True  # type: ignore[attr-defined]
            table_of(catalog).append(rows(range(900, 905)))  # a streaming writer's commit
        return files

    monkeypatch.setattr(compaction, "_rewrite", rewrite_then_append)
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert done.snapshot_id == after.current_snapshot().snapshot_id
    assert sorted_ids(after) == [*range(40), *range(900, 905)]
    # The appended file is kept as it was, beside the compacted one.
    assert len(data_files(after)) == 2


def test_a_writer_deleting_meanwhile_wins_and_the_rewrite_leaves_no_file(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    written(catalog, 4)
    rewrite = compaction._rewrite

    def rewrite_then_delete(*args: Any) -> Any:
        files = rewrite(*args)
        table_of(catalog).delete("id < 5")  # rewrites a file the compaction read
        return files

    monkeypatch.setattr(compaction, "_rewrite", rewrite_then_delete)
    done = compact(catalog, T, Compaction())
    assert done.snapshot_id is None and "changed" in (done.skipped or "")
    assert sorted_ids(table_of(catalog)) == list(range(5, 40))
    leftovers = [p for p in (tmp_path / "root").rglob("*-compacted.parquet")]
    assert leftovers == []


def test_disabled_or_empty_tables_are_left_alone(catalog: WarehouseCatalog) -> None:
    catalog.create_table(T, NewTable(SCHEMA))
    assert compact(catalog, T, Compaction()).skipped == "no snapshot"
    assert compact(catalog, T, Compaction(enabled=False)).skipped == "disabled"
