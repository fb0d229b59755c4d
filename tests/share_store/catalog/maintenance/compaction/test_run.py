"""Compaction runs on the own warehouses: a real rewrite committed as `replace`.

Tables are written with pyiceberg through the catalog (`WarehouseTables`), on local storage; the
compaction's rows are compared with the table's before it, and concurrent writers with the
catalog's compare-and-swap.
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest, TableProperties
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from share_store import parquet_bounds
from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.maintenance.budget import Budget, OverBudget
from share_store.catalog.maintenance.compaction import inputs, run
from share_store.catalog.maintenance.compaction.rewrite import sort_keys
from share_store.catalog.maintenance.compaction.run import compact
from share_store.catalog.maintenance.configuration import Compaction
from share_store.catalog.names import TableName
from share_store.catalog.table_source import WarehouseTables
from share_store.iceberg.delete_manifests import DeleteManifestWriter
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


def after_rewrite(monkeypatch: pytest.MonkeyPatch, write: Callable[[], object], every: bool = False) -> None:
    """A writer's commit between the compaction's rewrite and its commit: after the first rewrite, or
    with `every`, after each (so that each retry finds the table moved again)."""
    rewrite = run.rewrite_group
    calls = 0

    def rewrite_then_write(*args: Any) -> Any:
        nonlocal calls
        files = rewrite(*args)
        if every or calls == 0:
            write()
        calls += 1
        return files

    monkeypatch.setattr(run, "rewrite_group", rewrite_then_write)


def sorted_ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def data_files(table: Any) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


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
    # A streaming writer's commit.
    after_rewrite(monkeypatch, lambda: table_of(catalog).append(rows(range(900, 905))))
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
    # A writer rewrites a file the compaction read, before each of its commits.
    after_rewrite(monkeypatch, lambda: table_of(catalog).delete("id < 5"), every=True)
    done = compact(catalog, T, Compaction())
    assert done.snapshot_id is None and "changed" in (done.skipped or "")
    assert sorted_ids(table_of(catalog)) == list(range(5, 40))
    leftovers = [p for p in (tmp_path / "root").rglob("*-compacted.parquet")]
    assert leftovers == []


def test_disabled_or_empty_tables_are_left_alone(catalog: WarehouseCatalog) -> None:
    catalog.create_table(T, NewTable(SCHEMA))
    assert compact(catalog, T, Compaction()).skipped == "no snapshot"
    assert compact(catalog, T, Compaction(enabled=False)).skipped == "disabled"


# -- delete files: position deletes as engines write them (pyiceberg writes none) -------------------

#: Field ids of a position delete file's columns (the Iceberg spec's reserved ids).
FILE_PATH_ID, POS_ID = 2147483546, 2147483545


def position_deletes(
    table: Any, rows: list[tuple[str, int]], bounds: str | tuple[str, str] | None = "exact"
) -> DataFile:
    """A position delete file deleting `rows` (data file path, position), in the partition of the
    first file it names. Its `file_path` bounds: "exact" (as Spark writes them), given, or None
    (a partition-scoped delete, as older writers leave them)."""
    schema = pa.schema([
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_ID)}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_ID)}),
    ])  # fmt: skip
    ordered = sorted(rows)
    content = pa.table({"file_path": [r[0] for r in ordered], "pos": [r[1] for r in ordered]}, schema=schema)
    sink = io.BytesIO()
    pq.write_table(content, sink)
    path = f"{table.location()}/data/deletes-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(path).create() as stream:
        stream.write(sink.getvalue())
    target = next(task.file for task in table.scan().plan_files() if task.file.file_path == ordered[0][0])
    if bounds == "exact":
        bounds = (ordered[0][0], ordered[-1][0])
    file = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=target.partition,
        record_count=len(rows),
        file_size_in_bytes=len(sink.getvalue()),
        lower_bounds={FILE_PATH_ID: bounds[0].encode()} if bounds else None,
        upper_bounds={FILE_PATH_ID: bounds[1].encode()} if bounds else None,
    )
    file.spec_id = target.spec_id
    return file


def commit_deletes(catalog: WarehouseCatalog, files: list[DataFile]) -> None:
    """A `delete` snapshot adding `files` on main, committed as an engine's row-level delete is."""
    table = table_of(catalog)
    snapshot_id, current = uuid.uuid4().int >> 65, table.current_snapshot()
    sequence_number = table.metadata.last_sequence_number + 1
    manifest = f"{table.location()}/metadata/{uuid.uuid4()}-m0.avro"
    with DeleteManifestWriter(table.spec(), table.schema(), table.io.new_output(manifest), snapshot_id,
                              "deflate") as writer:  # fmt: skip
        for file in files:
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                               data_file=file))  # fmt: skip
    manifests = [*current.manifests(table.io), writer.to_manifest_file()]
    listed = f"{table.location()}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, table.io.new_output(listed), snapshot_id, current.snapshot_id,
                             sequence_number, "deflate") as out:  # fmt: skip
        out.add_manifests(manifests)
    added = {"added-delete-files": len(files), "added-position-delete-files": len(files),
             "added-position-deletes": sum(f.record_count for f in files)}  # fmt: skip
    totals = {  # as an engine keeps them: the last snapshot's and what this one adds
        "total-delete-files": int(current.summary["total-delete-files"]) + len(files),
        "total-position-deletes": int(current.summary["total-position-deletes"])
        + added["added-position-deletes"],
    }
    kept = {k: v for k, v in current.summary.additional_properties.items() if k.startswith("total-")}
    summary = {**kept, **added, **totals, "operation": "delete"}
    snapshot = {
        "snapshot-id": snapshot_id, "parent-snapshot-id": current.snapshot_id,
        "sequence-number": sequence_number, "timestamp-ms": int(time.time() * 1000),
        "manifest-list": listed, "summary": {k: str(v) for k, v in summary.items()},
        "schema-id": table.schema().schema_id,
    }  # fmt: skip
    catalog.commit(T, commit_request([
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ], [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": current.snapshot_id}]))  # fmt: skip


def commit_request(updates: list[dict[str, Any]], requirements: list[dict[str, Any]] | None = None) -> Any:
    """A commit of `updates` to T as a REST client sends it."""
    body = {"identifier": {"namespace": list(T.namespace), "name": T.name},
            "requirements": requirements or [], "updates": updates}  # fmt: skip
    return CommitTableRequest.model_validate(body)


def delete_files(table: Any) -> list[str]:
    return sorted({d.file_path for task in table.scan().plan_files() for d in task.delete_files})


def live_delete_files(table: Any) -> list[str]:
    """Every position delete file the current snapshot holds, dangling or not."""
    return sorted(
        entry.data_file.file_path
        for manifest in table.current_snapshot().manifests(table.io)
        if manifest.content == ManifestContent.DELETES
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    )


def paths_by_first_id(table: Any) -> dict[int, str]:
    """Each data file by the smallest id it holds (the tests' appends hold ten ids each)."""
    first = {
        t.file.file_path: int.from_bytes(t.file.lower_bounds[1], "little") for t in table.scan().plan_files()
    }
    return {id_: path for path, id_ in first.items()}


V2 = {"format-version": "2"}
PART = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))


def test_a_writer_deleting_rows_of_a_rewritten_file_before_another_commit_still_wins(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A position delete lands on a file the compaction read, then an append lands on top: the
    # check of new deletes must look at every snapshot since the compaction began, not the head only.
    written(catalog, 4, properties=V2)

    def write() -> None:
        first = paths_by_first_id(table_of(catalog))[0]
        commit_deletes(catalog, [position_deletes(table_of(catalog), [(first, 3)])])
        table_of(catalog).append(rows(range(900, 905)))

    after_rewrite(monkeypatch, write)
    compact(catalog, T, Compaction())
    assert sorted_ids(table_of(catalog)) == [*range(3), *range(4, 40), *range(900, 905)]


@pytest.mark.parametrize("partitioned", [True, False])
def test_the_delete_files_of_rewritten_files_go_with_them(
    catalog: WarehouseCatalog, partitioned: bool
) -> None:
    written(catalog, 4, partition_spec=PART if partitioned else None, properties=V2)
    table = table_of(catalog)
    by_id = paths_by_first_id(table)  # a: 0-9 and 20-29, b: 10-19 and 30-39 (when partitioned)
    commit_deletes(catalog, [
        position_deletes(table, [(by_id[0], 3)]),  # one file's, as Spark writes them
        position_deletes(table, [(by_id[0], 0), (by_id[20], 0)]),  # two files', bounds spanning both
        position_deletes(table, [(by_id[10], 5)], bounds=None),  # the partition's
    ])  # fmt: skip
    before = table_of(catalog)
    assert len(live_delete_files(before)) == 3
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert (done.files_rewritten, done.files_written) == (4, 2 if partitioned else 1)
    assert sorted_ids(after) == sorted_ids(before) == sorted(set(range(40)) - {0, 3, 15, 20})
    assert live_delete_files(after) == [] and delete_files(after) == []
    summary = after.current_snapshot().summary
    assert summary.operation == Operation.REPLACE
    assert (summary["removed-position-delete-files"], summary["removed-position-deletes"]) == ("3", "4")
    assert (summary["total-delete-files"], summary["total-position-deletes"]) == ("0", "0")
    assert summary["total-records"] == "36" and summary["total-data-files"] == str(done.files_written)


def test_a_delete_file_that_may_still_apply_to_a_file_left_stays(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog.create_table(T, NewTable(SCHEMA, partition_spec=PART, properties=V2))
    for start, part in ((0, "a"), (10, "a"), (20, "b"), (30, "b")):
        table_of(catalog).append(rows(range(start, start + 10), part=part))
    table = table_of(catalog)
    by_id = paths_by_first_id(table)
    wide = position_deletes(table, [(by_id[0], 2)], bounds=("", "\x7f"))  # bounds any path is in
    commit_deletes(catalog, [
        position_deletes(table, [(by_id[0], 1)]),  # the first file's only: goes
        wide,  # stays: the file appended meanwhile is in its bounds
        position_deletes(table, [(by_id[10], 3)], bounds=None),  # a's: what is left of a is newer
        position_deletes(table, [(by_id[20], 4)], bounds=None),  # b's: so is the big file of b
    ])  # fmt: skip
    table_of(catalog).append(rows(range(1000, 3000), part="b"))  # big: not rewritten
    before = table_of(catalog)
    big = paths_by_first_id(before)[1000]
    size = next(t.file.file_size_in_bytes for t in before.scan().plan_files() if t.file.file_path == big)
    monkeypatch.setattr(Compaction, "target_bytes", property(lambda self: size))
    # A streaming writer's commit.
    after_rewrite(monkeypatch, lambda: table_of(catalog).append(rows(range(900, 905), part="a")))
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert done.snapshot_id == after.current_snapshot().snapshot_id and done.files_rewritten == 4
    assert big in data_files(after)
    assert sorted_ids(after) == sorted([*sorted_ids(before), *range(900, 905)])
    assert len(live_delete_files(before)) == 4
    assert live_delete_files(after) == [wide.file_path]


def test_an_older_specs_group_is_added_under_its_own_spec(catalog: WarehouseCatalog) -> None:
    catalog.create_table(T, NewTable(SCHEMA, partition_spec=PART, properties=V2))
    for start in (0, 10):
        table_of(catalog).append(rows(range(start, start + 10), part="a"))
    with table_of(catalog).update_spec() as update:
        update.remove_field("part")
    for start in (20, 30):
        table_of(catalog).append(rows(range(start, start + 10), part="b"))
    compact(catalog, T, Compaction())
    after = table_of(catalog)
    files = sorted((t.file.spec_id, tuple(t.file.partition)) for t in after.scan().plan_files())
    assert files == [(0, ("a",)), (1, ())]
    assert sorted(after.scan(row_filter="part == 'a'").to_arrow()["id"].to_pylist()) == list(range(20))
    assert sorted_ids(after) == list(range(40))


def test_a_table_with_equality_deletes_is_left_alone(catalog: WarehouseCatalog) -> None:
    written(catalog, 3, properties=V2)
    table = table_of(catalog)
    deletes = position_deletes(table, [(paths_by_first_id(table)[0], 0)], bounds=None)
    equality = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES, file_path=deletes.file_path, file_format=FileFormat.PARQUET,
        partition=Record(), record_count=1, file_size_in_bytes=deletes.file_size_in_bytes, equality_ids=[1],
    )  # fmt: skip
    equality.spec_id = 0
    commit_deletes(catalog, [equality])
    before = table_of(catalog).current_snapshot().snapshot_id
    assert compact(catalog, T, Compaction()).skipped == "equality deletes (pyiceberg cannot apply them)"
    assert table_of(catalog).current_snapshot().snapshot_id == before


def test_a_v3_table_is_left_alone_before_anything_is_written(
    catalog: WarehouseCatalog, tmp_path: Path
) -> None:
    written(catalog, 3, properties=V2)
    # pyiceberg upgrades to v2 at most: the catalog is asked directly, as another engine would.
    catalog.commit(T, commit_request([{"action": "upgrade-format-version", "format-version": 3}]))
    assert compact(catalog, T, Compaction()).skipped == "format v3 (pyiceberg cannot write its manifests)"
    assert list((tmp_path / "root").rglob("*-compacted.parquet")) == []


def test_a_writer_deleting_in_one_partition_leaves_the_others_compacted(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    written(catalog, 6, partition_spec=PART, properties=V2)  # a: 0-9, 20-29, 40-49; b: the others
    # A streaming writer's delete, in partition a.
    after_rewrite(monkeypatch, lambda: table_of(catalog).delete("id = 0"))
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert done.snapshot_id == after.current_snapshot().snapshot_id
    assert (done.files_rewritten, done.files_written) == (3, 1)
    assert sorted_ids(after) == list(range(1, 60))
    parts = sorted(t.file.partition[0] for t in after.scan().plan_files())
    assert parts == ["a", "a", "a", "b"]  # a's three files are left for the next run
    assert len(list((tmp_path / "root").rglob("*-compacted.parquet"))) == 1


def test_a_rewrite_outlasting_pyicebergs_retries_is_committed_on_the_new_head(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writers committing more often than pyiceberg's retries wait: here, none at all.
    written(catalog, 4, properties={**V2, "commit.retry.num-retries": "0"})
    after_rewrite(monkeypatch, lambda: table_of(catalog).append(rows(range(900, 905))), every=True)
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert done.snapshot_id == after.current_snapshot().snapshot_id
    assert sorted_ids(after) == [*range(40), *range(900, 905)]


def test_files_of_a_commit_whose_answer_was_lost_are_kept(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    written(catalog, 4)
    commit_table = WarehouseTables.commit_table

    def commit_then_lose_the_answer(self: WarehouseTables, *args: Any) -> Any:
        commit_table(self, *args)
        raise ConnectionError("the answer was lost")  # the commit landed all the same

    monkeypatch.setattr(WarehouseTables, "commit_table", commit_then_lose_the_answer)
    with pytest.raises(ConnectionError):
        compact(catalog, T, Compaction())
    monkeypatch.undo()
    after = table_of(catalog)
    assert after.current_snapshot().summary.operation == Operation.REPLACE
    assert sorted_ids(after) == list(range(40))  # its written file is there to read


def test_a_compacted_file_has_row_groups_of_the_tables_size_not_one_per_input(
    catalog: WarehouseCatalog,
) -> None:
    import pyarrow.parquet as pq

    written(catalog, 30)
    compact(catalog, T, Compaction())
    (path,) = data_files(table_of(catalog))
    # Written input by input, it had 30 row groups of 10 rows: read as slowly as the 30 files.
    assert pq.ParquetFile(path.removeprefix("file://")).metadata.num_row_groups == 1


def test_unsorted_rows_stream_into_the_output_a_row_group_at_a_time(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow.parquet as pq

    table = written(catalog, 30, properties={TableProperties.PARQUET_ROW_GROUP_LIMIT: "30"})
    before = sorted_ids(table)
    # Memory holds a row group of the output before it goes out: here 30 rows, three inputs' (the
    # server's floor of 100,000 rows lowered so that 300 rows make several).
    monkeypatch.setitem(parquet_bounds.FLOORS, TableProperties.PARQUET_ROW_GROUP_LIMIT, (1, None))
    compact(catalog, T, Compaction())
    (path,) = data_files(table_of(catalog))
    # Written as it was read, three inputs or so at a time: neither one group nor one per input.
    assert 1 < pq.ParquetFile(path.removeprefix("file://")).metadata.num_row_groups <= 10
    assert sorted_ids(table_of(catalog)) == before


def test_a_run_past_its_budget_commits_the_groups_it_finished_and_deletes_the_one_it_was_writing(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
    before = written(catalog, 10, partition_spec=spec)
    files_before = set(data_files(before))
    rewrites = 0
    rewrite = run.rewrite_group

    def counted(*args: Any) -> Any:
        nonlocal rewrites
        rewrites += 1
        return rewrite(*args)

    def check(self: Any) -> None:
        if rewrites == 2:  # the second partition's group, after its first batch
            raise OverBudget("the run's CPU budget of 1 s")

    monkeypatch.setattr(run, "rewrite_group", counted)
    monkeypatch.setattr(Budget, "check", check)
    folder = Path(before.location().removeprefix("file://")) / "data"
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert (done.files_rewritten, done.files_written) == (5, 1)
    assert "stopped at the run's CPU budget of 1 s after 1 of 2 group(s)" in (done.note or "")
    assert sorted_ids(after) == sorted_ids(before) == list(range(100))
    # The other partition's five files are as they were; the file it had begun is gone.
    assert len(files_before & set(data_files(after))) == 5
    on_disk = {f"file://{p}" for p in folder.rglob("*.parquet")}
    assert on_disk == set(data_files(after)) | files_before


def test_a_file_that_decodes_past_its_footers_word_leaves_its_group_and_is_named(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file rewritten in place after it was sized (or whose pages belie its footer) is caught as
    its rows are read: its group is left whole, its written files deleted, the other groups kept."""
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "part"))
    before = written(catalog, 10, partition_spec=spec)
    liar = sorted(path for path in data_files(before) if "part=b" in path)[2]
    read_rows = inputs.read_rows

    def lying(table: Any, task: Any, *args: Any) -> Any:
        if task.file.file_path == liar:
            raise parquet_bounds.TooBig("row group 0 decodes past 256 MiB as it is read")
        return read_rows(table, task, *args)

    monkeypatch.setattr(inputs, "read_rows", lying)
    folder = Path(before.location().removeprefix("file://")) / "data"
    done = compact(catalog, T, Compaction())
    after = table_of(catalog)
    assert (done.files_rewritten, done.files_written) == (5, 1)
    assert done.files_skipped == [{"path": liar, "reason": "row group 0 decodes past 256 MiB as it is read"}]
    assert sorted_ids(after) == list(range(100))
    assert {p for p in data_files(before) if "part=b" in p} <= set(data_files(after))
    on_disk = {f"file://{p}" for p in folder.rglob("*.parquet")}
    assert on_disk == set(data_files(after)) | set(data_files(before))
