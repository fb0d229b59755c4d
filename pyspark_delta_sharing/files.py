"""Reading one shared data file from its presigned URL as Arrow batches of the table's schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def _constant(value: Any, arrow_type: pa.DataType, length: int) -> pa.Array:
    if value is None:
        return pa.nulls(length, arrow_type)
    if pa.types.is_timestamp(arrow_type) and isinstance(value, str):
        # Partition timestamps are written "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC.
        value = value.replace(" ", "T")
        return pc.cast(pa.array([value] * length), pa.timestamp("us", "UTC")).cast(arrow_type)
    if pa.types.is_boolean(arrow_type) and isinstance(value, str):
        return pa.array([value.lower() == "true"] * length, pa.bool_())
    return pc.cast(pa.array([value] * length), arrow_type)


def read_file(
    url: str,
    schema: pa.Schema,
    partition_values: dict[str, str | None],
    change: dict[str, Any] | None = None,
    batch_size: int = 65_536,
) -> Iterator[pa.RecordBatch]:
    """Batches with exactly `schema`'s columns: file columns cast, partition and change columns filled."""
    with fsspec.open(url, "rb", block_size=8 * 1024 * 1024) as handle:
        parquet = pq.ParquetFile(handle)
        present = set(parquet.schema_arrow.names)
        wanted = [name for name in schema.names if name in present and name not in partition_values]
        for batch in parquet.iter_batches(batch_size=batch_size, columns=wanted or None):
            length = batch.num_rows
            columns = []
            for field in schema:
                if field.name in partition_values:
                    columns.append(_constant(partition_values[field.name], field.type, length))
                elif change is not None and field.name in CHANGE_COLUMNS and field.name in change:
                    if field.name == "_change_type" and change[field.name] is None:
                        columns.append(batch.column(field.name).cast(field.type))
                    else:
                        columns.append(_constant(change[field.name], field.type, length))
                elif field.name in present:
                    columns.append(batch.column(field.name).cast(field.type))
                else:
                    columns.append(pa.nulls(length, field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
