"""A derived file: the rows of one data file a restriction allows, in the columns it serves.

The source is read a row group's batch at a time (`iter_batches`), its deleted
rows (a deletion vector's positions) dropped first, then the row filter applied
and the columns cut, and each batch written out as it comes: memory holds one
batch and the output, never the source whole. A source's writer chooses its row
groups and encodings, so a file of kilobytes can decode to gigabytes (one long
value kept once in a dictionary, repeated by run-length encoding): before a row
is read, its row groups are sized as they decode (`parquet_bounds.measure`, the
columns read only), a batch holds about `DecodeBudget.batch_bytes` of them, and
a file past the budget is refused with a clear error, not read into memory. The output keeps the source's
column names, types and field ids, so a reader maps it as it maps the source;
its statistics are computed from the rows written, for the delta format's
`add` (and for recipients' own pruning).
"""

from __future__ import annotations

import io
import json
import logging
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from share_store.errors import UnsupportedOperation
from share_store.parquet_bounds import Shape, TooBig, measure
from share_store.restrictions.arrow_filters import row_expression
from share_store.restrictions.restriction import BoundRestriction

log = logging.getLogger(__name__)

#: Rows read at a time at most (fewer where rows are wide: `DecodeBudget.batch_bytes`).
BATCH_ROWS = 64 * 1024
MIB = 1024 * 1024
#: Column chunks are read through a buffer of this size, page by page, not whole: a big row
#: group is never held decoded at once (measured: a 1M-row group peaks 90 MB lower).
BUFFER_BYTES = 1 << 20
#: Delta's `_change_type` column of change data files, kept in derived change files.
CHANGE_TYPE = "_change_type"
#: What an update's two rows become once a row filter applies: the new row may fall
#: outside the filter (the recipient sees its old row deleted), the old one may have
#: been outside it (the recipient sees the new row inserted).
UPDATE_LABELS = {"update_preimage": "delete", "update_postimage": "insert"}


@dataclass(frozen=True)
class DecodeBudget:
    """What one derivation may decode of its source (two run at once in a server).

    A batch cannot be smaller than a row, nor is a row group's skew known before it is read
    (one long value among short ones), so a row group decoding past `row_group_bytes` is
    refused: the most a batch can hold. Past `file_bytes` in all, a file is refused for the
    time it would take. A batch aims at `batch_bytes` of decoded rows."""

    row_group_bytes: int = 1024 * MIB
    file_bytes: int = 64 * 1024 * MIB
    batch_bytes: int = 16 * MIB


#: The budget of every derivation (the server's and `share derive`'s executors').
BUDGET = DecodeBudget()


@dataclass(frozen=True)
class Derived:
    """A derived file's bytes (None when no row is left) and its Delta statistics."""

    content: bytes | None
    num_records: int
    stats: str


def derive(
    source: BinaryIO,
    restriction: BoundRestriction,
    constants: Mapping[str, Any],
    deleted: set[int] | None = None,
    change_file: bool = False,
    budget: DecodeBudget | None = None,
) -> Derived:
    """The allowed rows and columns of the Parquet file `source`.

    `constants`: the values (by schema name) of the partition columns the file does
    not hold. `deleted`: positions of the source's deleted rows, dropped before the
    filter. `change_file`: a change data file, whose `_change_type` is kept (and its
    update labels made insert and delete where a row filter applies). `budget`: what
    may be decoded (`BUDGET` unless given); a file past it is `UnsupportedOperation`.
    """
    budget = budget or BUDGET
    try:
        return _derive(source, restriction, constants, deleted, change_file, budget)
    except TooBig as error:
        # The detail names a row group and a column, maybe one the recipient may not know of
        # (a filter's): the provider's log has it, the recipient the bound and what to do.
        log.warning("a restricted table's source file is refused: %s", error)
        raise UnsupportedOperation(
            "a data file of this table decodes past what the server reads at once to derive its "
            f"restricted rows ({budget.row_group_bytes // MIB:,} MiB a row group, "
            f"{budget.file_bytes // MIB:,} MiB a file); the provider can rewrite it with smaller "
            "row groups"
        ) from None


def _derive(
    source: BinaryIO,
    restriction: BoundRestriction,
    constants: Mapping[str, Any],
    deleted: set[int] | None,
    change_file: bool,
    budget: DecodeBudget,
) -> Derived:
    parquet = pq.ParquetFile(source, buffer_size=BUFFER_BYTES, pre_buffer=False)
    written_as = parquet.schema_arrow
    # Writers of Arrow 15+ (deltalake among them) may type strings as views, which pyarrow's
    # comparison kernels do not take, and pyarrow's writer keeps a dictionary column's type,
    # which min_max does not take: both are read as plain values (the same Parquet type; the
    # budget sized them so, decoded).
    file_schema = pa.schema([_plain(field) for field in written_as])
    kept = [
        field.name
        for field in file_schema
        if restriction.served_physical is None
        or field.name in restriction.served_physical
        or (change_file and field.name == CHANGE_TYPE)
    ]
    if not [name for name in kept if name != CHANGE_TYPE]:
        # A Parquet file with no column keeps no rows: its partition values alone would be lost.
        raise UnsupportedOperation(
            "the table's restriction serves only partition columns; list at least one other column"
        )
    # None of the source's key-value metadata: writers keep their whole schema there (Spark's
    # row metadata, Iceberg's schema), cut columns included. Fields keep only their ids.
    out_schema = pa.schema([_with_field_id_only(file_schema.field(name)) for name in kept])
    expression = (
        row_expression(restriction.predicate, restriction.table_columns, file_schema, constants)
        if restriction.predicate is not None
        else None
    )
    # Only the columns served or filtered on are read: a cut column is never even decoded.
    filtered = set()
    if restriction.predicate is not None:
        from share_store.restrictions.row_filters import column_names

        filtered = {
            restriction.table_columns[name.lower()].physical for name in column_names(restriction.predicate)
        }
    needed = [field.name for field in file_schema if field.name in kept or field.name in filtered]
    shape = measure(
        source, budget.row_group_bytes, budget.file_bytes, columns=needed, metadata=parquet.metadata
    )
    read_as = pa.schema([written_as.field(name) for name in needed])
    plain = pa.schema([file_schema.field(name) for name in needed])
    gone = pa.array(sorted(deleted), type=pa.int64()) if deleted else None
    output = io.BytesIO()
    stats = _Stats(out_schema)
    start = 0
    with pq.ParquetWriter(
        output, out_schema, coerce_timestamps="us", allow_truncated_timestamps=True
    ) as writer:
        for batch in _batches(parquet, shape, needed, budget):
            table = pa.Table.from_batches([batch], schema=read_as)
            if plain != read_as:
                table = table.cast(plain)
            if gone is not None:
                positions = pa.array(range(start, start + batch.num_rows), type=pa.int64())
                table = table.filter(pc.invert(pc.is_in(positions, value_set=gone)))
            start += batch.num_rows
            if expression is not None:
                table = table.filter(expression)
            table = table.select(kept)
            if change_file and restriction.predicate is not None and CHANGE_TYPE in kept:
                table = _relabelled(table)
            if table.num_rows:
                writer.write_table(table)
                stats.add(table)
    if stats.rows == 0:
        return Derived(None, 0, stats.json())
    return Derived(output.getvalue(), stats.rows, stats.json())


def _batches(
    parquet: pq.ParquetFile, shape: Shape, columns: list[str], budget: DecodeBudget
) -> Iterator[pa.RecordBatch]:
    """The `columns` of `parquet`, a row group at a time, in batches of about the budget's bytes.

    A row group whose batches pass its bound as they are read (pages that belie the footer) is
    TooBig there: a batch is already held, never the next."""
    for index in range(parquet.metadata.num_row_groups):
        rows = shape.batch_rows(index, budget.batch_bytes, BATCH_ROWS)
        decoded = 0
        for batch in parquet.iter_batches(batch_size=rows, row_groups=[index], columns=columns):
            # The buffers held (`nbytes` cannot count the string views Arrow 15+ writers' files read as).
            decoded += batch.get_total_buffer_size()
            if decoded > budget.row_group_bytes:
                raise TooBig(f"row group {index} decodes past {budget.row_group_bytes // MIB:,} MiB as "
                             "it is read, whatever its footer said")  # fmt: skip
            yield batch


def _with_field_id_only(field: pa.Field) -> pa.Field:
    """`field` with no metadata but its Parquet field id (which readers map columns by)."""
    kept = {k: v for k, v in (field.metadata or {}).items() if k == b"PARQUET:field_id"}
    return field.with_metadata(kept) if kept else field.remove_metadata()


def _plain(field: pa.Field) -> pa.Field:
    if pa.types.is_dictionary(field.type):
        return _plain(field.with_type(field.type.value_type))
    if pa.types.is_string_view(field.type):
        return field.with_type(pa.string())
    if pa.types.is_binary_view(field.type):
        return field.with_type(pa.binary())
    return field


def _relabelled(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index(CHANGE_TYPE)
    labels = table.column(index).to_pylist()
    relabelled = pa.array(
        [UPDATE_LABELS.get(label, label) for label in labels], type=table.schema.field(index).type
    )
    return table.set_column(index, table.schema.field(index), relabelled)


class _Stats:
    """Delta statistics (numRecords, minValues, maxValues, nullCount) of the rows written."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows = 0
        self.low: dict[str, Any] = {}
        self.high: dict[str, Any] = {}
        self.nulls: dict[str, int] = {}

    def add(self, table: pa.Table) -> None:
        self.rows += table.num_rows
        for field in self.schema:
            if field.name == CHANGE_TYPE:
                continue
            column = table.column(field.name)
            if _is_leaf(field.type):
                self.nulls[field.name] = self.nulls.get(field.name, 0) + column.null_count
            if not _has_bounds(field.type) or column.null_count == len(column):
                continue
            found = pc.min_max(column)
            low, high = found["min"].as_py(), found["max"].as_py()
            if isinstance(low, float) and (math.isnan(low) or math.isnan(high)):
                continue
            if field.name not in self.low or low < self.low[field.name]:
                self.low[field.name] = low
            if field.name not in self.high or high > self.high[field.name]:
                self.high[field.name] = high

    def json(self) -> str:
        body: dict[str, Any] = {"numRecords": self.rows}
        if self.rows:
            body["minValues"] = {name: _json_value(value, False) for name, value in self.low.items()}
            body["maxValues"] = {name: _json_value(value, True) for name, value in self.high.items()}
            body["nullCount"] = self.nulls
        return json.dumps(body, separators=(",", ":"))


def _is_leaf(kind: pa.DataType) -> bool:
    return not (pa.types.is_struct(kind) or pa.types.is_list(kind) or pa.types.is_map(kind))


def _has_bounds(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    )


def _json_value(value: Any, upper: bool) -> Any:
    """A bound as Delta writes it: dates as ISO days, timestamps in milliseconds (an upper bound
    rounded up, so that it still bounds), strings and numbers as they are."""
    if isinstance(value, datetime):
        truncated = value.replace(microsecond=value.microsecond // 1000 * 1000)
        if upper and truncated != value:
            truncated += timedelta(milliseconds=1)
        text = truncated.isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z") if value.tzinfo is not None else text
    if isinstance(value, date):
        return value.isoformat()
    return value
