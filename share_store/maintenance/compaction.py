"""Compaction: a table's small files, and the files its deletes apply to, rewritten near a target size.

`plan` (pure) picks, per partition, the data files worth rewriting: those
smaller than three quarters of the target, and any file a delete applies to;
a partition is rewritten when it has two such files or one with deletes.
`compact` reads each group through pyiceberg with its deletes applied, one
input file at a time, writes new files rolled at the target size (sorted by
the table's sort order where it has one: identity and order-preserving
transforms, up to the first that is not), and commits one `replace` snapshot
through the catalog's compare-and-swap. Memory holds one input file's batches,
or one output file's rows when sorting (so a sorted output file is capped at
`SORT_BUFFER_BYTES`).

A writer that commits meanwhile never loses its commit: the compaction commits
through the catalog's compare-and-swap, and on a lost race pyiceberg's
transaction retries on the new head after checking, as Java's `RewriteFiles`
does, that every rewritten file is still live and got no new deletes. Appends
and changes to other files are kept under the rewrite; a writer that removed
or deleted rows of a rewritten file wins, the written files are deleted and the
table is left for the next run. Tables with equality
deletes are left alone (pyiceberg 0.12 cannot apply them). The delete files of
rewritten files stay in the metadata, dangling and harmless, as Spark's
`rewrite_data_files` leaves them by default.

pyiceberg 0.12 has no rewrite of data files (only Spark has); the snapshot is
made with its own `_OverwriteFiles` producer under Iceberg's `replace`
operation, which changes no data: readers of changes skip it.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, Summary
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import Record

from share_store.maintenance.settings import Compaction
from share_store.own_warehouses.catalog import WarehouseCatalog
from share_store.own_warehouses.names import TableName
from share_store.own_warehouses.shared import WarehouseTables

log = logging.getLogger(__name__)

#: A file under this share of the target is small.
SMALL_SHARE = 0.75
#: Rows of one sorted output file are held in memory: its on-disk size is capped here.
SORT_BUFFER_BYTES = 128 * 1024 * 1024
#: Transforms under which a column's order is the transformed value's order.
ORDERED_TRANSFORMS = ("identity", "year", "month", "day", "hour", "truncate")


@dataclass(frozen=True)
class Candidate:
    """A live data file as the plan sees it."""

    path: str
    size: int
    partition: tuple[int, tuple[Any, ...]]  # (spec id, partition values)
    deletes: int  # delete files that apply to it
    equality_deletes: bool = False


@dataclass(frozen=True)
class Compacted:
    """What a compaction did."""

    files_rewritten: int = 0
    files_written: int = 0
    bytes_rewritten: int = 0
    bytes_written: int = 0
    snapshot_id: int | None = None
    skipped: str | None = None


def plan(files: Iterable[Candidate], target_bytes: int) -> list[list[Candidate]]:
    """Groups of files to rewrite together: one per partition worth it, in a stable order."""
    by_partition: dict[tuple[int, tuple[Any, ...]], list[Candidate]] = defaultdict(list)
    for file in files:
        if file.equality_deletes:
            continue
        if file.deletes or file.size < target_bytes * SMALL_SHARE:
            by_partition[file.partition].append(file)
    groups = []
    for partition in sorted(by_partition, key=repr):
        chosen = sorted(by_partition[partition], key=lambda f: f.path)
        if len(chosen) >= 2 or any(f.deletes for f in chosen):
            groups.append(chosen)
    return groups


def sort_keys(table: Table) -> list[tuple[str, str, str]]:
    """(column, "ascending"|"descending", "at_start"|"at_end") of the table's sort order, as far as
    its transforms keep a column's order; [] when it has none."""
    keys = []
    schema = table.schema()
    for field in table.sort_order().fields:
        if str(field.transform).split("[")[0] not in ORDERED_TRANSFORMS:
            break  # a bucket's order is not its column's: sorting past it would sort by nothing
        name = schema.find_column_name(field.source_id)
        if name is None or "." in name:
            break
        direction = "ascending" if field.direction.value == "asc" else "descending"
        nulls = "at_start" if field.null_order.value == "nulls-first" else "at_end"
        keys.append((name, direction, nulls))
    return keys


def compact(catalog: WarehouseCatalog, name: TableName, settings: Compaction) -> Compacted:
    """Rewrite what `plan` picks in the table's current snapshot and commit it as one `replace`."""
    if not settings.enabled:
        return Compacted(skipped="disabled")
    tables = WarehouseTables(catalog, name.warehouse)
    table = tables.load_table((*name.namespace, name.name))
    snapshot = table.current_snapshot()
    if snapshot is None:
        return Compacted(skipped="no snapshot")
    tasks = {task.file.file_path: task for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()}
    if any(d.content == DataFileContent.EQUALITY_DELETES for t in tasks.values() for d in t.delete_files):
        return Compacted(skipped="equality deletes (pyiceberg cannot apply them)")
    groups = plan((_candidate(t) for t in tasks.values()), settings.target_bytes)
    if not groups:
        return Compacted(skipped="nothing to compact")
    keys = sort_keys(table) if settings.strategy in ("auto", "sort") else []
    if settings.strategy == "sort" and not keys:
        return Compacted(skipped="strategy 'sort' but the table has no sort order")
    rewritten = [tasks[c.path] for group in groups for c in group]
    written: list[DataFile] = []
    try:
        for group in groups:
            written += _rewrite(table, [tasks[c.path] for c in group], settings.target_bytes, keys)
        snapshot_id = _commit(table, rewritten, written)
    except Exception:
        _forget(table, written)
        raise
    if snapshot_id is None:
        _forget(table, written)
        return Compacted(skipped="a writer changed the rewritten files meanwhile: left for the next run")
    return Compacted(
        files_rewritten=len(rewritten),
        files_written=len(written),
        bytes_rewritten=sum(t.file.file_size_in_bytes for t in rewritten),
        bytes_written=sum(f.file_size_in_bytes for f in written),
        snapshot_id=snapshot_id,
    )


def _candidate(task: Any) -> Candidate:
    file = task.file
    return Candidate(
        path=file.file_path,
        size=int(file.file_size_in_bytes),
        partition=(file.spec_id, tuple(file.partition)),
        deletes=len(task.delete_files),
        equality_deletes=any(d.content == DataFileContent.EQUALITY_DELETES for d in task.delete_files),
    )


def _rewrite(
    table: Table, tasks: list[Any], target_bytes: int, keys: list[tuple[str, str, str]]
) -> list[DataFile]:
    """The group's rows, deletes applied, in new files of about `target_bytes` each."""
    from pyiceberg.io.pyarrow import ArrowScan

    metadata = table.metadata
    scan = ArrowScan(metadata, table.io, metadata.schema(), AlwaysTrue())
    roll_at = min(target_bytes, SORT_BUFFER_BYTES) if keys else target_bytes
    first = tasks[0].file
    files: list[DataFile] = []
    held: list[pa.RecordBatch] = []
    held_bytes = 0.0
    for task in tasks:
        # On-disk bytes per row of this input: what its rows will take in the output, roughly.
        per_row = task.file.file_size_in_bytes / max(1, task.file.record_count)
        for batch in scan.to_record_batches([task]):
            held.append(batch)
            held_bytes += per_row * batch.num_rows
            if held_bytes >= roll_at:
                files.append(_write(table, first, _sorted(held, keys)))
                held, held_bytes = [], 0.0
    if held and sum(b.num_rows for b in held):
        files.append(_write(table, first, _sorted(held, keys)))
    return files


def _sorted(batches: list[pa.RecordBatch], keys: list[tuple[str, str, str]]) -> pa.Table:
    rows = pa.Table.from_batches(batches)
    if not keys:
        return rows
    # pyarrow sorts nulls one way for all keys: the first key's null order decides.
    return rows.sort_by([(column, direction) for column, direction, _ in keys], null_placement=keys[0][2])


def _write(table: Table, like: DataFile, rows: pa.Table) -> DataFile:
    """One new data file in the table's data folder, in the partition of `like` (the group's)."""
    from pyiceberg.io.pyarrow import (
        ParquetFormatModel,
        ParquetFormatWriter,
        _to_requested_schema,
        pyarrow_to_schema,
    )
    from pyiceberg.table.locations import load_location_provider

    metadata = table.metadata
    schema = metadata.schema()
    spec = metadata.specs()[like.spec_id]
    provider = load_location_provider(table_location=metadata.location, table_properties=metadata.properties)
    # The provider asks a partition key only for its path; the group's partition is already
    # transformed, so the path is made from it directly.
    partition = _PartitionPath(spec.partition_to_path(like.partition, schema)) if spec.fields else None
    path = provider.new_data_location(f"{uuid.uuid4()}-compacted.parquet", partition_key=partition)  # type: ignore[arg-type]
    output = table.io.new_output(path)
    writer = ParquetFormatWriter(output, schema, metadata.properties)
    file_schema = pyarrow_to_schema(rows.schema, name_mapping=schema.name_mapping)
    for batch in rows.to_batches():
        fitted = _to_requested_schema(
            schema, file_schema, batch, include_field_ids=True, format_model=ParquetFormatModel()
        )
        writer.write(pa.Table.from_batches([fitted]))
    statistics = writer.close()
    order = metadata.sort_order_by_id(metadata.default_sort_order_id)
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=like.partition if spec.fields else Record(),
        file_size_in_bytes=len(output),
        sort_order_id=order.order_id if order is not None and order.fields else None,
        spec_id=like.spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


@dataclass(frozen=True)
class _PartitionPath:
    path: str

    def to_path(self) -> str:
        return self.path


def _commit(table: Table, rewritten: list[Any], written: list[DataFile]) -> int | None:
    """Commit the rewrite as one `replace` on `main`; None if a writer's commit conflicts with it.

    pyiceberg's transaction retries a lost compare-and-swap on the new head (its
    `commit.retry.*` properties), checking again what `_Rewrite` validates.
    """
    transaction = table.transaction()
    producer = _Rewrite(
        operation=Operation.REPLACE, transaction=transaction, io=table.io,
        snapshot_properties={"maintenance": "compaction"},
    )  # fmt: skip
    for task in rewritten:
        producer.delete_data_file(task.file)
    for file in written:
        producer.append_data_file(file)
    producer.commit()
    try:
        transaction.commit_transaction()
    except (ValidationException, CommitFailedException) as error:
        log.info("compaction of %s left for the next run: %s", ".".join(table.name()), type(error).__name__)
        return None
    return int(producer._snapshot_id)


class _Rewrite(_OverwriteFiles):  # type: ignore[misc]
    """pyiceberg's overwrite producer, committing Iceberg's `replace` (as Java's `RewriteFiles`).

    Its summary is computed as an overwrite's (pyiceberg 0.12 has none for `replace`; the totals
    are the same: files and records added and removed). A writer's commit since the compaction
    began conflicts only if it removed a rewritten file or added deletes for one: appends, and
    deletes of other files, are kept and the rewrite is committed on top of them.
    """

    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Summary:  # noqa: B006 (pyiceberg's)
        self._operation = Operation.OVERWRITE
        try:
            summary = super()._summary(snapshot_properties)
        finally:
            self._operation = Operation.REPLACE
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _validate_concurrency(self) -> None:
        from pyiceberg.table.update.validate import (
            _validate_data_files_exist,
            _validate_no_new_deletes_for_data_files,
        )

        window = self._commit_window
        if window is None or window.is_empty() or window.head is None:
            return
        table, rewritten = self._transaction._table, self._deleted_data_files
        _validate_data_files_exist(table, window.head, rewritten, window.base)
        _validate_no_new_deletes_for_data_files(table, window.head, None, rewritten, window.base)


def _forget(table: Table, written: list[DataFile]) -> None:
    """Delete files written for a rewrite that was not committed (they would be unreferenced)."""
    for file in written:
        try:
            table.io.delete(file.file_path)
        except Exception as error:  # noqa: BLE001 (left for unreferenced-file removal)
            log.warning("could not delete an uncommitted compaction file: %s", type(error).__name__)
