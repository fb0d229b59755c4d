"""A group's rows rewritten into new data files of about the target size, sorted where the table is.

Rows are held until a row group of the output is full (the table's `write.parquet.*` within the
server's floors, `parquet_bounds.writer_settings`: 100,000 rows or 64 MiB at least), or, when
sorting, one output file (`SORT_BUFFER_BYTES` on disk, and at most a row group's bound decoded).
The sort is the table's sort order as far as its transforms keep a column's order (identity and
order-preserving transforms, up to the first that is not). Files written for a rewrite that is not
committed are deleted (`forget`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from share_store.catalog.maintenance.compaction.inputs import Inputs
from share_store.parquet_bounds import WriterSettings

log = logging.getLogger(__name__)

#: Rows of one sorted output file are held in memory: its on-disk size is capped here (and its
#: decoded size at `Limits.row_group_decoded_mb`).
SORT_BUFFER_BYTES = 128 * 1024 * 1024
#: Transforms under which a column's order is the transformed value's order.
ORDERED_TRANSFORMS = ("identity", "year", "month", "day", "hour", "truncate")


def sort_keys(table: Table) -> list[tuple[str, str, str]]:
    """(column, "ascending"|"descending", "at_start"|"at_end") of the table's sort order, as far as
    its transforms keep a column's order; [] when it has none."""
    keys = []
    schema = table.schema()
    for sort_field in table.sort_order().fields:
        if str(sort_field.transform).split("[")[0] not in ORDERED_TRANSFORMS:
            break  # a bucket's order is not its column's: sorting past it would sort by nothing
        name = schema.find_column_name(sort_field.source_id)
        if name is None or "." in name:
            break
        direction = "ascending" if sort_field.direction.value == "asc" else "descending"
        nulls = "at_start" if sort_field.null_order.value == "nulls-first" else "at_end"
        keys.append((name, direction, nulls))
    return keys


def rewrite_group(
    table: Table,
    tasks: list[Any],
    target_bytes: int,
    keys: list[tuple[str, str, str]],
    inputs: Inputs,
    writing: WriterSettings,
) -> list[DataFile]:
    """The group's rows, deletes applied, in new files of about `target_bytes` each.

    Unsorted, rows go out a row group at a time (`writing`'s rows or decoded bytes, whichever
    first) into the open file, rolled at the target (by the inputs' on-disk bytes per row);
    sorted, a file's rows are held to be sorted, so a sorted file is capped at
    `SORT_BUFFER_BYTES` on disk and a row group's bound decoded. The budget is checked after each
    batch; on any error (OverBudget too) the files written so far are deleted.
    """
    roll_at = min(target_bytes, SORT_BUFFER_BYTES) if keys else target_bytes
    first = tasks[0].file
    files: list[DataFile] = []
    out: _Output | None = None
    held: list[pa.RecordBatch] = []
    held_rows = held_bytes = 0
    held_disk = written_disk = 0.0
    try:
        for task in tasks:
            # On-disk bytes per row of this input: what its rows will take in the output, roughly.
            per_row = task.file.file_size_in_bytes / max(1, task.file.record_count)
            for batch in inputs.rows(task):
                held.append(batch)
                held_rows, held_bytes = held_rows + batch.num_rows, held_bytes + batch.nbytes
                held_disk += per_row * batch.num_rows
                inputs.budget.check()
                group_full = held_rows >= writing.row_group_rows or held_bytes >= writing.row_group_bytes
                if not keys and group_full:
                    out = out or _Output(table, first, writing)
                    out.write(held)
                    written_disk += held_disk
                    held, held_rows, held_bytes, held_disk = [], 0, 0, 0.0
                full = bool(keys) and held_bytes >= inputs.limits.row_group_bytes
                if written_disk + held_disk >= roll_at or full:
                    out = out or _Output(table, first, writing)
                    out.write([_sorted(held, keys)] if keys else held)
                    files.append(out.close())
                    out, held, held_rows, held_bytes, held_disk, written_disk = None, [], 0, 0, 0.0, 0.0
        if held_rows:
            out = out or _Output(table, first, writing)
            out.write([_sorted(held, keys)] if keys else held)
        if out is not None:
            files.append(out.close())
            out = None
    except BaseException:
        if out is not None:
            out.abandon()
        forget(table, files)
        raise
    return files


def _sorted(batches: list[pa.RecordBatch], keys: list[tuple[str, str, str]]) -> pa.Table:
    rows = pa.Table.from_batches(batches)
    # pyarrow sorts nulls one way for all keys: the first key's null order decides.
    return rows.sort_by([(column, direction) for column, direction, _ in keys], null_placement=keys[0][2])


class _Output:
    """One new data file in the table's data folder, in the partition of `like` (the group's),
    written a row group at a time with the server's `WriterSettings` (pyarrow's ParquetWriter, as
    pyiceberg's own writer uses it, with the statistics pyiceberg takes from its footer)."""

    def __init__(self, table: Table, like: DataFile, writing: WriterSettings) -> None:
        metadata = table.metadata
        self.table, self.metadata, self.like, self.schema = table, metadata, like, metadata.schema()
        self.writing = writing
        self.spec = metadata.specs()[like.spec_id]
        # The table is a `ServerTable`: its provider is never one a table property names.
        provider = table.location_provider()
        # The provider asks a partition key only for its path; the group's partition is already
        # transformed, so the path is made from it directly.
        partition = (
            _PartitionPath(self.spec.partition_to_path(like.partition, self.schema))
            if self.spec.fields
            else None
        )
        self.path = provider.new_data_location(f"{uuid.uuid4()}-compacted.parquet", partition_key=partition)  # type: ignore[arg-type]
        self.output = table.io.new_output(self.path)
        self._stream: Any = None
        self._writer: pq.ParquetWriter | None = None

    def write(self, rows: list[pa.RecordBatch] | list[pa.Table]) -> None:
        """Rows as one write, so that they make row groups of the server's size: written batch by
        batch, each input file's batches were a row group of their own (1,000 row groups of 100
        rows after 1,000 small appends, read 9x slower than the same rows written at once)."""
        from pyiceberg.io.pyarrow import ParquetFormatModel, _to_requested_schema, pyarrow_to_schema

        batches = [b for part in rows for b in (part.to_batches() if isinstance(part, pa.Table) else [part])]
        if not batches:
            return
        file_schema = pyarrow_to_schema(batches[0].schema, name_mapping=self.schema.name_mapping)
        model = ParquetFormatModel()
        fitted = [
            _to_requested_schema(self.schema, file_schema, batch, include_field_ids=True, format_model=model)
            for batch in batches
        ]
        # Inputs may differ in their string types (large or not): the file takes the first's.
        target = self._writer.schema if self._writer is not None else fitted[0].schema
        fitted = [batch if batch.schema == target else batch.cast(target) for batch in fitted]
        table = pa.Table.from_batches(fitted, schema=target)
        if self._writer is None:
            self._stream = self.output.create(overwrite=True)
            self._writer = pq.ParquetWriter(
                self._stream, schema=target, store_decimal_as_integer=True, **self.writing.options
            )
        # A held row group is written as one: cut only where it passes the rows or bytes of one
        # (a sorted file's rows come at once).
        by_bytes = table.num_rows * self.writing.row_group_bytes // max(1, table.nbytes)
        self._writer.write_table(table, row_group_size=max(1, min(self.writing.row_group_rows, by_bytes)))

    def close(self) -> DataFile:
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
        )

        assert self._writer is not None, "a file is closed once written to"
        with self._stream:
            self._writer.close()
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=self._writer.writer.metadata,
            stats_columns=compute_statistics_plan(self.schema, self.metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(self.schema),
        )
        order = self.metadata.sort_order_by_id(self.metadata.default_sort_order_id)
        written = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.path,
            file_format=FileFormat.PARQUET,
            partition=self.like.partition if self.spec.fields else Record(),
            file_size_in_bytes=len(self.output),
            sort_order_id=order.order_id if order is not None and order.fields else None,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )
        # Not a field of the file (`from_args` drops it): the manifest it is added to is its spec's.
        written.spec_id = self.like.spec_id
        return written

    def abandon(self) -> None:
        """Close the file unfinished and delete it (a rewrite that stopped)."""
        try:
            if self._writer is not None:
                self._writer.close()
            if self._stream is not None:
                self._stream.close()
        except Exception:  # deleted all the same
            log.info("an unfinished compaction file did not close", exc_info=True)
        if self._stream is not None:
            forget(self.table, [self.path])


@dataclass(frozen=True)
class _PartitionPath:
    path: str

    def to_path(self) -> str:
        return self.path


def forget(table: Table, written: list[DataFile] | list[str]) -> None:
    """Delete files written for a rewrite that was not committed (they would be unreferenced)."""
    for file in written:
        try:
            table.io.delete(file if isinstance(file, str) else file.file_path)
        except Exception as error:  # noqa: BLE001 (left for unreferenced-file removal)
            log.warning("could not delete an uncommitted compaction file: %s", type(error).__name__)
