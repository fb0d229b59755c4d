"""The Parquet files equality deletes are resolved from: the deleted keys of a delete file
(`read_keys`), and the positions of a data file's rows that match them (`matching_positions`).

Columns are found by Iceberg field id. A data file is read one record batch at a
time, its equality columns only, so memory is the key set plus one batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.types import NestedField

from share_store.errors import UnsupportedOperation
from share_store.iceberg.deletes import CorruptDeleteFile, file_name
from share_store.iceberg.equality.deadline import Deadline
from share_store.iceberg.equality.keys import KeyMatcher, comparable, comparable_type

FIELD_ID = b"PARQUET:field_id"
#: Rows per record batch read from a data file: what memory holds besides the keys.
#: Arrow rebuilds the hash table of string keys for each batch, so a batch holds at
#: least four times as many rows as there are keys, up to `MAX_BATCH_ROWS`.
BATCH_ROWS = 65_536
MAX_BATCH_ROWS = 1 << 20
#: Read size of the column chunks: pages stream through a buffer this large instead
#: of each projected column chunk of a row group being read whole.
READ_BUFFER_BYTES = 1 << 20


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
                f"equality delete file {file_name(path)} lacks its equality column(s) {', '.join(missing)}"
            )
        table = parquet.read(columns=[names[f.field_id] for f in fields])
        return [comparable(table.column(i), f) for i, f in enumerate(fields)]
    except (OSError, ValueError, pa.ArrowException) as error:
        raise CorruptDeleteFile(f"equality delete file {file_name(path)} cannot be read") from error


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
                f"data file {file_name(path)} has no Iceberg field ids, which equality deletes are matched by"
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
            f"data file {file_name(path)} cannot be read to apply its equality deletes"
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
