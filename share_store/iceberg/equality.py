"""Iceberg equality deletes resolved to row positions, so that they are served as deletion vectors.

An equality delete file holds values of some columns (its `equality_ids`). A row of a
data file the delete applies to is deleted when its values equal all of them for any
row of the file, null equal to null (Iceberg spec, "Equality Delete Files"). A delete
applies to a data file (spec, "Scan Planning") when its data sequence number is
strictly greater than the data file's, and it is global (its partition spec is
unpartitioned) or has the data file's spec and partition.

Delta readers only know deletion vectors, so each data file a delete applies to is
read: only its equality columns (projected by field id), one record batch at a time,
matched against the deleted keys with Arrow's hash kernels. Memory is the key set plus
one batch. This is the expensive part of serving a snapshot, so it runs against a
`Deadline`: past it, the snapshot is refused with the reason, never served with rows
that should be gone. I/O goes through callables (`read(path) -> bytes` for the delete
files, `open(path) -> file` for the data files), so all of it is tested on bytes alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from share_store.errors import UnsupportedOperation
from share_store.iceberg.deletes import CorruptDeleteFile
from share_store.tables.options import Resolution

FIELD_ID = b"PARQUET:field_id"
#: Rows per record batch read from a data file: what memory holds besides the keys.
#: Arrow rebuilds the hash table of string keys for each batch, so a batch holds at
#: least four times as many rows as there are keys, up to `MAX_BATCH_ROWS`.
BATCH_ROWS = 65_536
MAX_BATCH_ROWS = 1 << 20
#: Read size of the column chunks: pages stream through a buffer this large instead
#: of each projected column chunk of a row group being read whole.
READ_BUFFER_BYTES = 1 << 20
#: Double's canonical NaN: Java compares doubles as their bits, all NaNs as one.
CANONICAL_NAN = 0x7FF8000000000000
#: Types whose bounds order as Python orders their decoded values (stats pruning).
RANGE_TYPES = (
    IntegerType,
    LongType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    StringType,
    DecimalType,
    BinaryType,
    FixedType,
)

Read = Callable[[str], bytes]
Open = Callable[[str], BinaryIO]
Clock = Callable[[], float]


class OverBudget(UnsupportedOperation):
    """Resolving the snapshot's equality deletes would take longer than the configured budget."""


class Deadline:
    """The time budget of resolving one snapshot; `check` raises `OverBudget` once it is spent."""

    def __init__(self, seconds: float, clock: Clock = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.started = clock()

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def check(self) -> None:
        if self.elapsed > self.seconds:
            raise OverBudget(
                f"resolving its equality deletes took longer than the configured {self.seconds:g} s "
                "budget ([iceberg] equality_delete_budget_seconds); compacting the table applies them"
            )


@dataclass(frozen=True)
class EqualityDelete:
    """One equality delete file as planning found it."""

    file: DataFile
    sequence_number: int
    is_global: bool

    @property
    def path(self) -> str:
        return str(self.file.file_path)

    @property
    def equality_ids(self) -> tuple[int, ...]:
        return tuple(self.file.equality_ids or ())


class EqualityIndex:
    """A snapshot's equality deletes by partition, answering which apply to a data file."""

    def __init__(self, deletes: Iterable[EqualityDelete], schema: Schema) -> None:
        self.schema = schema
        self.global_deletes: list[EqualityDelete] = []
        self.by_partition: dict[tuple[int, Any], list[EqualityDelete]] = {}
        for delete in deletes:
            if delete.is_global:
                self.global_deletes.append(delete)
            else:
                key = (delete.file.spec_id, delete.file.partition)
                self.by_partition.setdefault(key, []).append(delete)

    def __bool__(self) -> bool:
        return bool(self.global_deletes or self.by_partition)

    def for_data_file(self, data_file: DataFile, sequence_number: int) -> list[EqualityDelete]:
        """The deletes that apply to `data_file`, whose data sequence number is `sequence_number`."""
        candidates = self.by_partition.get((data_file.spec_id, data_file.partition), [])
        return [
            delete
            for delete in (*candidates, *self.global_deletes)
            if delete.sequence_number > sequence_number and may_match(data_file, delete.file, self.schema)
        ]


def may_match(data_file: DataFile, delete_file: DataFile, schema: Schema) -> bool:
    """False when the files' column stats prove no row of `data_file` has a deleted key.

    Iceberg Java's `DeleteFileIndex.canContainEqDeletesForFile`: per equality column,
    nulls on one side only, or value ranges that do not overlap. Missing stats match.
    """
    for field_id in delete_file.equality_ids or ():
        try:
            field_type = schema.find_type(field_id)
        except ValueError:
            return True  # refused when resolving, with the reason
        data_nulls = _count(data_file.null_value_counts, field_id)
        delete_nulls = _count(delete_file.null_value_counts, field_id)
        if data_nulls != 0 and delete_nulls != 0:
            continue  # both may hold nulls (unknown counts included), and null matches null
        if _all_null(data_file, field_id) and delete_nulls == 0:
            return False  # only nulls in the data, no null deleted
        if _all_null(delete_file, field_id) and data_nulls == 0:
            return False  # only nulls deleted, none in the data
        # One side holds no null: only values can match, and the bounds are theirs.
        if isinstance(field_type, RANGE_TYPES) and not _ranges_overlap(
            data_file, delete_file, field_id, field_type
        ):
            return False
    return True


def _count(counts: dict[int, int] | None, field_id: int) -> int | None:
    value = (counts or {}).get(field_id)
    return None if value is None else int(value)


def _all_null(file: DataFile, field_id: int) -> bool:
    nulls = _count(file.null_value_counts, field_id)
    return nulls is not None and nulls == _count(file.value_counts, field_id)


def _ranges_overlap(data_file: DataFile, delete_file: DataFile, field_id: int, field_type: Any) -> bool:
    bounds: list[bytes | None] = [
        (stats or {}).get(field_id)
        for stats in (
            data_file.lower_bounds,
            data_file.upper_bounds,
            delete_file.lower_bounds,
            delete_file.upper_bounds,
        )
    ]
    known = [bound for bound in bounds if bound is not None]
    if len(known) < len(bounds):
        return True
    try:
        data_low, data_high, delete_low, delete_high = (from_bytes(field_type, bound) for bound in known)
        return bool(data_low <= delete_high and delete_low <= data_high)
    except Exception:  # noqa: BLE001 - bounds of another type (a promoted column): assume overlap
        return True


# -- values, compared as Iceberg compares them -------------------------------------------


def comparable_type(field: NestedField) -> pa.DataType:
    """The Arrow type both sides of a comparison on `field` are cast to."""
    kind: IcebergType = field.field_type
    if isinstance(kind, (IntegerType, LongType, FloatType, DoubleType)):
        return pa.int64()  # doubles as their bits, see `comparable`
    if isinstance(kind, StringType):
        return pa.string()  # as Parquet files read; a batch never holds 2 GB of text
    if isinstance(kind, BinaryType):
        return pa.binary()
    if isinstance(kind, UUIDType):
        return pa.binary(16)
    if isinstance(kind, FixedType):
        return pa.binary(len(kind))
    if isinstance(kind, BooleanType):
        return pa.bool_()
    if isinstance(kind, DateType):
        return pa.date32()
    if isinstance(kind, TimeType):
        return pa.time64("us")
    if isinstance(kind, (TimestampType, TimestamptzType)):
        return pa.timestamp("us")  # both sides are UTC (or zone-less) micros: the zone is dropped
    if isinstance(kind, (TimestampNanoType, TimestamptzNanoType)):
        return pa.timestamp("ns")
    if isinstance(kind, DecimalType):
        return pa.decimal128(kind.precision, kind.scale)
    raise UnsupportedOperation(
        f"equality deletes on column {field.name} of type {kind} are not served (only primitive columns)"
    )


def comparable(values: pa.Array | pa.ChunkedArray, field: NestedField) -> pa.Array:
    """`values` in the form compared: Iceberg's equality, null equal to null.

    Floating point values become their 64-bit patterns, NaN made canonical: Java
    compares doubles so (NaN equals NaN, -0.0 does not equal 0.0), and Arrow's hash
    kernels would not say the same of -0.0.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.ExtensionArray):  # uuid
        values = values.storage
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if isinstance(field.field_type, (FloatType, DoubleType)):
        doubles = values.cast(pa.float64())
        bits = doubles.view(pa.int64())
        return pc.if_else(pc.is_nan(doubles), pa.scalar(CANONICAL_NAN, pa.int64()), bits)
    target = comparable_type(field)
    if values.type == target:
        return values
    if pa.types.is_timestamp(values.type):
        # INT96 files read as nanoseconds; Iceberg reads them as micros, truncated.
        values = values.cast(pa.timestamp(values.type.unit))
        return values.cast(target, safe=False)
    return values.cast(target)


class ValueIndex:
    """Where each value lies among a fixed set of distinct values (null one of them), built once.

    Integer-like values (ints, dates, times, timestamps, doubles as bits) are looked up in
    a pandas hash index, made once per set; Arrow's `index_in` would rebuild its hash
    table on every record batch, which for 100,000 keys costs more than the lookups.
    Other types (strings, binary, decimals) go through `index_in`.
    """

    def __init__(self, values: pa.Array) -> None:
        self.values = values
        self.size = len(values)
        nulls = np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))
        self.null_position = int(nulls[0]) if len(nulls) else -1
        ints = _as_int64(values)
        self.engine: pd.Index | None = None
        if ints is not None:
            valid = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
            self.engine = pd.Index(ints.filter(values.is_valid()).to_numpy())
            self.positions = valid.astype(np.int64)

    def index(self, column: pa.Array) -> np.ndarray:
        """The position of each of `column`'s values in the set, -1 where absent (null matches null)."""
        ints = _as_int64(column) if self.engine is not None else None
        if ints is None or self.engine is None:
            found = pc.index_in(column, value_set=self.values, skip_nulls=False)
            return np.asarray(pc.fill_null(found.cast(pa.int64()), -1).to_numpy())
        filled = pc.fill_null(ints, 0) if ints.null_count else ints
        at = self.engine.get_indexer(filled.to_numpy())
        result = np.full(len(at), -1, dtype=np.int64)
        hit = at >= 0
        result[hit] = self.positions[at[hit]]
        if ints.null_count:
            result[column.is_null().to_numpy(zero_copy_only=False)] = self.null_position
        return result


def _as_int64(values: pa.Array) -> pa.Array | None:
    """Integer-like values as int64 (same order, same equality); None for other types."""
    kind = values.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return values.cast(pa.int64())
    if pa.types.is_date32(kind):
        return values.view(pa.int32()).cast(pa.int64())
    if pa.types.is_timestamp(kind) or pa.types.is_time64(kind) or pa.types.is_date64(kind):
        return values.view(pa.int64())
    return None


class KeyMatcher:
    """The deleted keys of some columns, matching rows null-safely without a Python loop per row.

    One column is a set lookup. Several are folded left to right into one integer code:
    each column's values are indexed in that column's distinct deleted values, the code
    so far is combined with the index, and the combination is indexed again in the
    combinations that occur among the deleted keys. So codes stay below the number of
    keys, and a row whose code survives every step equals some deleted key in every column.
    """

    def __init__(self, keys: Sequence[pa.Array]) -> None:
        if not keys:
            raise ValueError("an equality delete has at least one column")
        self.columns: list[ValueIndex] = []
        self.combinations: list[ValueIndex] = []
        code: np.ndarray | None = None
        for column in keys:
            values = ValueIndex(pc.unique(column))
            index = values.index(column)
            if code is not None:
                combined = code * values.size + index
                known = ValueIndex(pc.unique(pa.array(combined)))
                self.combinations.append(known)
                index = known.index(pa.array(combined))
            code = index
            self.columns.append(values)
        self.size = len(keys[0])

    def matches(self, columns: Sequence[pa.Array]) -> np.ndarray:
        """Per row of `columns` (comparable, in the keys' order): whether it equals a deleted key."""
        code = self.columns[0].index(columns[0])
        for values, known, column in zip(self.columns[1:], self.combinations, columns[1:], strict=True):
            hit = code >= 0
            if not hit.any():
                break  # no row matches the columns so far
            index = values.index(column)
            combined = np.where(hit & (index >= 0), code * values.size + index, -1)
            code = known.index(pa.array(combined))  # -1 stays absent: codes are never negative
        return np.asarray(code >= 0)


# -- reading files -------------------------------------------------------------------------


def columns_by_field_id(schema: pa.Schema, field_ids: Iterable[int]) -> dict[int, str | None]:
    """The top-level column of each field id in a Parquet file's schema; None when absent."""
    found: dict[int, str] = {}
    for arrow_field in schema:
        value = (arrow_field.metadata or {}).get(FIELD_ID)
        if value is not None:
            found[int(value)] = arrow_field.name
    return {field_id: found.get(field_id) for field_id in field_ids}


def read_keys(content: bytes, path: str, fields: Sequence[NestedField]) -> list[pa.Array]:
    """The deleted keys of an equality delete file: its columns of `fields`, comparable."""
    try:
        parquet = pq.ParquetFile(pa.BufferReader(content))
        names = columns_by_field_id(parquet.schema_arrow, [f.field_id for f in fields])
        missing = [f.name for f in fields if names[f.field_id] is None]
        if missing:
            raise CorruptDeleteFile(
                f"equality delete file {_name(path)} lacks its equality column(s) {', '.join(missing)}"
            )
        table = parquet.read(columns=[names[f.field_id] for f in fields])
        return [comparable(table.column(i), f) for i, f in enumerate(fields)]
    except (OSError, ValueError, pa.ArrowException) as error:
        raise CorruptDeleteFile(f"equality delete file {_name(path)} cannot be read") from error


def matching_positions(
    source: BinaryIO | pa.NativeFile,
    path: str,
    fields: Sequence[NestedField],
    matchers: Sequence[tuple[Sequence[int], KeyMatcher]],
    deadline: Deadline | None = None,
    record_count: int | None = None,
    batch_rows: int | None = None,
) -> tuple[np.ndarray, int]:
    """Positions of the rows of a data file matching any of `matchers`, and the rows read.

    `fields` are the equality columns the matchers use; each matcher names the indexes
    of its columns among them. Only those columns are read, a batch at a time.
    """
    try:
        parquet = pq.ParquetFile(source, buffer_size=READ_BUFFER_BYTES)
        names = columns_by_field_id(parquet.schema_arrow, [f.field_id for f in fields])
        if not any(FIELD_ID in (column.metadata or {}) for column in parquet.schema_arrow):
            # Files added from outside Iceberg: their columns are matched by a name mapping.
            raise UnsupportedOperation(
                f"data file {_name(path)} has no Iceberg field ids, which equality deletes are matched by"
            )
        present = [name for name in names.values() if name is not None]
        rows = parquet.metadata.num_rows if record_count is None else record_count
        if batch_rows is None:
            keys = max(matcher.size for _, matcher in matchers)
            batch_rows = min(MAX_BATCH_ROWS, max(BATCH_ROWS, 4 * keys))
        found: list[np.ndarray] = []
        offset = 0
        for batch in _batches(parquet, present, rows, batch_rows):
            if deadline is not None:
                deadline.check()
            columns = [
                comparable(batch.column(names[f.field_id]), f)
                if names[f.field_id] is not None
                else _absent(f, batch.num_rows)
                for f in fields
            ]
            mask = np.zeros(batch.num_rows, dtype=bool)
            for indexes, matcher in matchers:
                mask |= matcher.matches([columns[i] for i in indexes])
            hits = np.flatnonzero(mask)
            if len(hits):
                found.append(hits + offset)
            offset += batch.num_rows
    except (OSError, pa.ArrowInvalid) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise CorruptDeleteFile(
            f"data file {_name(path)} cannot be read to apply its equality deletes"
        ) from error
    positions = np.concatenate(found) if found else np.empty(0, dtype=np.int64)
    return positions, offset


def _batches(
    parquet: pq.ParquetFile, columns: list[str], rows: int, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    if columns:
        yield from parquet.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False)
        return
    # None of the columns is in the file (added since): every row holds nulls there.
    for start in range(0, rows, batch_rows):
        yield pa.RecordBatch.from_arrays([pa.nulls(min(batch_rows, rows - start))], names=["_"])


def _absent(field: NestedField, rows: int) -> pa.Array:
    """A column a data file was written without: null in every row (Iceberg's reading of it)."""
    if field.initial_default is not None:
        raise UnsupportedOperation(
            f"equality deletes on column {field.name}, which older files read as its default, are not served"
        )
    return pa.nulls(rows, type=comparable_type(field))


# -- one snapshot's resolution ---------------------------------------------------------------


class EqualityResolver:
    """Resolves the equality deletes of one snapshot, data file by data file, within a deadline."""

    def __init__(
        self,
        index: EqualityIndex,
        sequence_numbers: dict[str, int],
        read: Read,
        open_file: Open,
        deadline: Deadline,
    ) -> None:
        self.index = index
        self.sequence_numbers = sequence_numbers
        self.read = read
        self.open_file = open_file
        self.deadline = deadline
        self.resolution = Resolution()
        self._keys: dict[str, list[pa.Array]] = {}
        self._matchers: dict[tuple[tuple[int, ...], tuple[str, ...]], KeyMatcher] = {}

    def applies(self, data_file: DataFile) -> bool:
        """Whether any of the snapshot's equality deletes may delete rows of `data_file`."""
        sequence_number = self.sequence_numbers.get(data_file.file_path)
        return bool(self.index) and (
            sequence_number is None or bool(self.index.for_data_file(data_file, sequence_number))
        )

    def positions(self, data_file: DataFile) -> list[int]:
        """The positions of `data_file`'s rows that its equality deletes delete (maybe none)."""
        if not self.index:
            return []
        sequence_number = self.sequence_numbers.get(data_file.file_path)
        if sequence_number is None:  # planning records every data file's: never guess
            raise UnsupportedOperation(f"the data sequence number of {_name(data_file.file_path)} is unknown")
        deletes = self.index.for_data_file(data_file, sequence_number)
        if not deletes:
            return []
        started = time.perf_counter()
        try:
            self.deadline.check()
            if data_file.file_format != FileFormat.PARQUET:
                raise UnsupportedOperation(
                    f"equality deletes on {data_file.file_format.name} data files are not served"
                )
            fields, matchers = self._matchers_for(deletes)
            with self.open_file(data_file.file_path) as source:
                found, rows = matching_positions(
                    source, data_file.file_path, fields, matchers, self.deadline, int(data_file.record_count)
                )
            self.resolution.data_files += 1
            self.resolution.bytes_scanned += int(data_file.file_size_in_bytes)
            self.resolution.rows_scanned += rows
            self.resolution.rows_deleted += len(found)
            return found.tolist()
        except OverBudget:
            self.resolution.outcome = "over_budget"
            raise
        except UnsupportedOperation:
            self.resolution.outcome = "refused"
            raise
        except Exception:
            self.resolution.outcome = "failed"
            raise
        finally:
            self.resolution.seconds += time.perf_counter() - started

    def _matchers_for(
        self, deletes: list[EqualityDelete]
    ) -> tuple[list[NestedField], list[tuple[list[int], KeyMatcher]]]:
        by_ids: dict[tuple[int, ...], list[EqualityDelete]] = {}
        for delete in deletes:
            by_ids.setdefault(delete.equality_ids, []).append(delete)
        field_ids = sorted({field_id for ids in by_ids for field_id in ids})
        fields = [self._field(field_id) for field_id in field_ids]
        matchers = []
        for ids, group in sorted(by_ids.items()):
            key = (ids, tuple(sorted(delete.path for delete in group)))
            matcher = self._matchers.get(key)
            if matcher is None:
                keys = [self._delete_keys(delete) for delete in group]
                matcher = KeyMatcher([pa.concat_arrays([k[i] for k in keys]) for i in range(len(ids))])
                self._matchers[key] = matcher
            matchers.append(([field_ids.index(field_id) for field_id in ids], matcher))
        return fields, matchers

    def _delete_keys(self, delete: EqualityDelete) -> list[pa.Array]:
        keys = self._keys.get(delete.path)
        if keys is None:
            if not delete.equality_ids:
                raise CorruptDeleteFile(f"equality delete file {_name(delete.path)} names no columns")
            if delete.file.file_format != FileFormat.PARQUET:
                raise UnsupportedOperation(
                    f"equality delete files in {delete.file.file_format.name} are not served"
                )
            fields = [self._field(field_id) for field_id in delete.equality_ids]
            keys = read_keys(self.read(delete.path), delete.path, fields)
            self._keys[delete.path] = keys
            self.resolution.delete_files += 1
        return keys

    def _field(self, field_id: int) -> NestedField:
        schema = self.index.schema
        if field_id not in {f.field_id for f in schema.fields}:
            raise UnsupportedOperation(
                f"an equality delete is on field id {field_id}, which is not a top-level column of the "
                "snapshot's schema"
            )
        return schema.find_field(field_id)


def _name(path: str) -> str:
    # Recipients see file names, never where the provider keeps them.
    return path.rsplit("/", 1)[-1]
