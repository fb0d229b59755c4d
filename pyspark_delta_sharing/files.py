"""Reading one shared data file as Arrow batches of exactly the schema Spark asked for.

Both response formats end up here: a file is a plain dict (see `listing`) and
the table's layout says how its Parquet files name columns. Per file: the
columns Spark wants are read by physical name or field id (column pruning),
renamed to logical names and cast to the table's types (type widening,
timestamp units); partition and change columns are filled from the file's
action; rows its deletion vector marks are dropped by their position in the
file, so the rows that remain keep their order.

Runs on executors: the batch and streaming readers read a task's files with
`read_files`, which fetches the next file while Spark takes this one's batches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pyspark_delta_sharing import column_mapping, fetch
from pyspark_delta_sharing.column_mapping import Column
from pyspark_delta_sharing.deletion_vectors import chosen, deleted_rows, kept
from pyspark_delta_sharing.listing import Listing

#: Batches of about this many bytes, from BATCH_ROWS_MIN to BATCH_ROWS_MAX rows: few batches
#: cost Spark less per row, small enough ones keep wide tables in memory.
BATCH_BYTES = 64 * 1024 * 1024
BATCH_ROWS_MIN = 8_192
BATCH_ROWS_MAX = 1_048_576
#: Files up to this size are fetched whole in one GET (fewer round trips than ranges);
#: larger ones too when every column is read, up to WHOLE_FILE_MAX_BYTES.
SMALL_FILE_BYTES = 16 * 1024 * 1024
WHOLE_FILE_MAX_BYTES = 512 * 1024 * 1024
FIELD_ID_KEY = b"PARQUET:field_id"

#: Fresh URLs for a file whose URLs have expired: the file dict, renewed.
Renew = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class TableLayout:
    """What all files of one read share: the table's columns and how files name them."""

    columns: Column
    mode: str = "none"
    #: Logical partition column → its key in a file's `partitionValues`.
    partition_keys: dict[str, str] | None = None

    @classmethod
    def of(cls, listing: Listing) -> TableLayout:
        mode = column_mapping.mode(listing.configuration)
        columns = column_mapping.table_columns(listing.schema_string, mode)
        keys = column_mapping.partition_keys(columns, listing.partition_columns)
        return cls(columns, mode, keys)

    @property
    def data_columns(self) -> list[str]:
        partitions = self.partition_keys or {}
        return [c.name for c in self.columns.children if c.name not in partitions]


class _Urls:
    """A file's URLs, renewed once when storage says they have expired."""

    def __init__(self, file: dict[str, Any], renew: Renew | None) -> None:
        self.file = file
        self.renew = renew
        self.renewed = False

    def get(self, where: Callable[[dict[str, Any]], str], start: int | None, length: int | None) -> bytes:
        """The bytes at the URL `where` picks from the file dict, renewing it once if expired."""
        try:
            return fetch.get(where(self.file), start, length)
        except fetch.ExpiredUrl:
            if self.renew is None or self.renewed:
                raise
            self.file = self.renew(self.file)
            self.renewed = True
            return fetch.get(where(self.file), start, length)

    def data(self, start: int | None = None, length: int | None = None) -> bytes:
        return self.get(lambda f: f["url"], start, length)

    def vector(self, *keys: str) -> np.ndarray:
        """The row positions of the deletion vector at `keys` in the file dict."""

        def descriptor(file: dict[str, Any]) -> dict[str, Any]:
            found = file
            for key in keys:
                found = found[key]
            return found

        def get(_url: str, start: int, length: int) -> bytes:
            # Not the URL as listed: renewal may have replaced it.
            return self.get(lambda f: descriptor(f)["pathOrInlineDv"], start, length)

        return deleted_rows(descriptor(self.file), get)


def partition_scalar(value: str | None, arrow_type: pa.DataType) -> pa.Scalar:
    """A partition value as Delta writes it (a string), as a scalar of the column's type."""
    if value is None or (value == "" and not pa.types.is_string(arrow_type)):
        return pa.scalar(None, arrow_type)
    if pa.types.is_timestamp(arrow_type):
        # "YYYY-MM-DD HH:MM:SS[.ffffff]", or ISO 8601 with a Z; in UTC unless timestamp_ntz.
        parsed = pc.cast(pa.array([value.removesuffix("Z")]), pa.timestamp("us"))
        return parsed.cast(arrow_type)[0]
    if pa.types.is_boolean(arrow_type):
        return pa.scalar(value.lower() == "true", pa.bool_())
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return pa.scalar(value.encode(), arrow_type)
    return pc.cast(pa.array([value]), arrow_type)[0]


def _file_field(fields: list[pa.Field], column: Column, mode: str) -> int | None:
    """Index of the Parquet field holding `column`: by field id in `id` mode, else by name."""
    if mode == "id" and column.field_id is not None:
        wanted = str(column.field_id).encode()
        for index, field in enumerate(fields):
            if (field.metadata or {}).get(FIELD_ID_KEY) == wanted:
                return index
        if any((field.metadata or {}).get(FIELD_ID_KEY) for field in fields):
            return None  # the file has ids, none of them this column's: added after it was written
    for index, field in enumerate(fields):
        if field.name == column.physical:
            return index
    lowered = column.physical.lower()
    if mode == "none":  # as Spark's Parquet reader, case-insensitive without mapping
        for index, field in enumerate(fields):
            if field.name.lower() == lowered:
                return index
    return None


def convert(
    array: pa.Array, file_type: pa.DataType, column: Column, target: pa.DataType, mode: str
) -> pa.Array:
    """A file's column as the table has it: children by mapping, logical names, the table's types."""
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(file_type):
        file_fields = [file_type.field(i) for i in range(file_type.num_fields)]
        children = array.flatten()
        out = []
        for field in target:
            child = column.child(field.name) or Column(field.name, field.name)
            index = _file_field(file_fields, child, mode)
            if index is None:
                out.append(pa.nulls(len(array), field.type))
            else:
                out.append(convert(children[index], file_fields[index].type, child, field.type, mode))
        return pa.StructArray.from_arrays(out, fields=list(target), mask=mask)
    if _is_list(target) and _is_list(file_type):
        (element,) = column.children or (Column("element", "element"),)
        offsets, first, count = _rebased(array)
        values = convert(
            array.values.slice(first, count), file_type.value_type, element, target.value_type, mode
        )
        return type(array).from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(file_type):
        key, value = column.children or (Column("key", "key"), Column("value", "value"))
        offsets, first, count = _rebased(array)
        keys = convert(array.keys.slice(first, count), file_type.key_type, key, target.key_type, mode)
        items = convert(array.items.slice(first, count), file_type.item_type, value, target.item_type, mode)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    return array if array.type == target else array.cast(target)


def _rebased(array: pa.Array) -> tuple[pa.Array, int, int]:
    """A (maybe sliced) list's offsets from 0, and where its entries lie in its values."""
    offsets = array.offsets
    first = offsets[0].as_py()
    count = offsets[-1].as_py() - first
    return (pc.subtract(offsets, offsets[0]) if first else offsets), first, count


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)


def _fetched_whole(file: dict[str, Any], layout: TableLayout, wanted: list[str]) -> bool:
    """Whether the file is fetched in one GET rather than by the ranges its Parquet reader asks for."""
    size = int(file.get("size") or 0)
    every_column = set(layout.data_columns) <= set(wanted)
    return size <= SMALL_FILE_BYTES or (every_column and size <= WHOLE_FILE_MAX_BYTES)


def _open(urls: _Urls, size: int, data: bytes | None) -> pq.ParquetFile:
    if data is not None:
        return pq.ParquetFile(pa.BufferReader(data), coerce_int96_timestamp_unit="us")
    source = pa.PythonFile(fetch.RangeFile(urls.data, size), mode="r")
    return pq.ParquetFile(source, pre_buffer=True, coerce_int96_timestamp_unit="us")


def _batch_rows(metadata: pq.FileMetaData) -> int:
    """Rows per batch for about BATCH_BYTES of decoded data, from the file's own row groups."""
    total_bytes = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    row_bytes = max(1, total_bytes // max(1, metadata.num_rows))
    return max(BATCH_ROWS_MIN, min(BATCH_ROWS_MAX, BATCH_BYTES // row_bytes))


def _row_filter(urls: _Urls, file: dict[str, Any]) -> Callable[[int, int], np.ndarray | None]:
    """For rows [start, start + length) of the file, the mask of those to keep (None: all)."""
    if file.get("rows"):
        # Only the rows one vector has and another lacks (a change feed's rewritten vector).
        only = urls.vector("rows", "only")
        minus = urls.vector("rows", "except") if file["rows"].get("except") else only[:0]
        selected = np.setdiff1d(only, minus, assume_unique=True)
        return lambda start, length: chosen(selected, start, length)
    if file.get("deletion_vector"):
        deleted = urls.vector("deletion_vector")
        return lambda start, length: kept(deleted, start, length)
    return lambda start, length: None


def _constants(file: dict[str, Any], schema: pa.Schema, layout: TableLayout) -> dict[str, pa.Scalar]:
    """Columns of one value throughout the file: partition values, and a change's version and time."""
    keys = layout.partition_keys or {}
    values = file.get("partition_values") or {}
    constants = {f.name: partition_scalar(values.get(keys[f.name]), f.type) for f in schema if f.name in keys}
    # A cdc file holds `_change_type` itself: its None is no constant.
    change = {k: v for k, v in (file.get("change") or {}).items() if v is not None}
    for field in schema:
        if field.name in change:
            constants[field.name] = pa.scalar(change[field.name]).cast(field.type)
    return constants


@dataclass
class _Fetched:
    """What reading one file needs from the network, got before its decoding starts."""

    urls: _Urls
    #: The whole file, or None when its Parquet reader fetches the ranges it needs.
    data: bytes | None
    row_filter: Callable[[int, int], np.ndarray | None]


def _fetch(
    file: dict[str, Any], schema: pa.Schema, layout: TableLayout, renew: Renew | None, margin_ms: int | None
) -> _Fetched:
    """The file's bytes (when fetched whole) and deletion vector; renewed first if its URLs expire
    within `margin_ms` (None: no check, an expired URL is renewed when storage refuses it)."""
    if renew is not None and margin_ms is not None and file["expiration"] - margin_ms < time.time() * 1000:
        file = renew(file)
    urls = _Urls(file, renew)
    constants = _constants(file, schema, layout)
    wanted = [field.name for field in schema if field.name not in constants]
    data = urls.data() if _fetched_whole(file, layout, wanted) else None
    return _Fetched(urls, data, _row_filter(urls, file))


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _prefetcher() -> ThreadPoolExecutor:
    # One thread for the process, kept while Spark reuses the worker: its HTTP
    # session (see `fetch`) keeps its connection from task to task.
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltaSharing-prefetch")
        return _pool


def read_files(
    files: list[dict[str, Any]],
    schema: pa.Schema,
    layout: TableLayout,
    renew: Renew | None = None,
    refresh_margin_ms: int = 0,
) -> Iterator[pa.RecordBatch]:
    """The batches of `files`, one file after another, as `read_file` makes them.

    While a file is decoded and its batches go to Spark, a background thread
    fetches the next one (its bytes and its deletion vector), so the task waits
    on the network once rather than once per file. A file whose URLs expire
    within `refresh_margin_ms` is renewed before it is fetched.
    """
    pool = _prefetcher()
    ahead: Future[_Fetched] | None = None
    try:
        for index, file in enumerate(files):
            fetched = ahead.result() if ahead else _fetch(file, schema, layout, renew, refresh_margin_ms)
            if index + 1 < len(files):
                ahead = pool.submit(_fetch, files[index + 1], schema, layout, renew, refresh_margin_ms)
            else:
                ahead = None
            yield from _decode(fetched, schema, layout)
    finally:
        if ahead:
            ahead.cancel()  # a query that stopped early (a limit) needs no more files


def read_file(
    file: dict[str, Any],
    schema: pa.Schema,
    layout: TableLayout,
    renew: Renew | None = None,
    batch_rows: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Batches with exactly `schema`'s columns, the rows the file's deletion vector deletes left out."""
    yield from _decode(_fetch(file, schema, layout, renew, None), schema, layout, batch_rows)


def _decode(
    fetched: _Fetched, schema: pa.Schema, layout: TableLayout, batch_rows: int | None = None
) -> Iterator[pa.RecordBatch]:
    urls = fetched.urls
    file = urls.file
    constants = _constants(file, schema, layout)
    wanted = [field.name for field in schema if field.name not in constants]
    parquet = _open(urls, int(file.get("size") or 0), fetched.data)
    row_filter = fetched.row_filter
    file_fields = list(parquet.schema_arrow)
    # Each wanted column's Parquet field (None: not in this file, added later) and mapping.
    sources: dict[str, tuple[int | None, Column]] = {}
    for name in wanted:
        column = layout.columns.child(name) or Column(name, name)
        sources[name] = (_file_field(file_fields, column, layout.mode), column)
    read_indexes = sorted({index for index, _ in sources.values() if index is not None})
    position_in_batch = {index: position for position, index in enumerate(read_indexes)}
    start = 0
    for batch in parquet.iter_batches(
        batch_size=batch_rows or _batch_rows(parquet.metadata),
        columns=[file_fields[i].name for i in read_indexes],
        use_threads=False,
    ):
        mask = row_filter(start, batch.num_rows)
        start += batch.num_rows
        if mask is not None:
            batch = batch.filter(pa.array(mask))
            if not batch.num_rows:
                continue
        columns = []
        for field in schema:
            if field.name in constants:
                columns.append(pa.repeat(constants[field.name], batch.num_rows))
                continue
            index, column = sources[field.name]
            if index is None:
                columns.append(pa.nulls(batch.num_rows, field.type))
            else:
                array = batch.column(position_in_batch[index])
                columns.append(convert(array, file_fields[index].type, column, field.type, layout.mode))
        yield pa.RecordBatch.from_arrays(columns, schema=schema)
