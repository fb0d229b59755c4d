"""What a caller's Parquet files may cost compaction, and how the server writes its own.

A table's files are its writers': a 100 KB file can decode to a gigabyte (one long value
that dictionary and run-length encoding store once, or pages that compress a
thousandfold), and a table's `write.parquet.*` properties can ask for a row group per row.

Reading. Before a row is read, `measure` sizes each row group as it decodes, from the
footer (`total_byte_size`, each column chunk's values and uncompressed bytes) and, for
byte-array columns whose footer cannot say (dictionary- or DELTA_BYTE_ARRAY-encoded), from
their lengths alone: dictionary columns are read as dictionaries (the indices and the
dictionary, both sized by the footer) and the dense size summed from them, never decoded.
A file with a row group past `[maintenance] row_group_decoded_mb`, or past `file_decoded_mb`
in all, is `TooBig`: compaction leaves it as it is. `read_rows` then reads a file as
pyiceberg's scan would (its deletes applied, projected onto the table's schema), in batches
sized from those measures with `ParquetFile.iter_batches`, a megabyte of a column chunk at
a time, no thread of its own, so that a run holds about a batch and a row group of the
output, not the file (pyiceberg's `ArrowScan` materialises each whole file).

Writing. `writer_settings` takes the table's `write.parquet.*` within floors and ceilings of
the server's own (`FLOORS`): a row group holds at least 100,000 rows or 64 MiB of decoded
rows, whichever the file reaches first; pages and dictionaries stay between 64 KiB and
16 MiB; a compression level is capped where each codec's CPU grows steeply (zstd 9,
brotli 5), and an unknown codec is zstd's.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.table import Table, TableProperties

MIB = 1024 * 1024
#: Decoded bytes a read batch aims at, and at most this many rows (Arrow's own batch size).
BATCH_BYTES = 16 * MIB
MAX_BATCH_ROWS = 131_072
#: Rows of a dictionary column's indices read at a time when its lengths are summed.
PROBE_ROWS = 65_536
#: Dense bytes a DELTA_BYTE_ARRAY column's probe decodes at a time.
PROBE_BYTES = 16 * MIB
#: Bytes a read takes from a column chunk at a time (0 would read each chunk whole).
READ_BUFFER = 1 * MIB
#: Decoded bytes per value of each fixed-width physical type (INT96 is a 12-byte timestamp).
WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}
#: A byte array's offset (Arrow's large types) beside its bytes.
OFFSET = 8
#: An index of a column read as a dictionary.
INDEX = 4
DICTIONARY_ENCODINGS = frozenset({"PLAIN_DICTIONARY", "RLE_DICTIONARY"})
#: The column of a position delete file pyiceberg reads as a dictionary.
DELETE_FILE_PATH = "file_path"


class TooBig(Exception):
    """A file that decodes past the server's bounds: its message says which row group and how far."""


@dataclass(frozen=True)
class Shape:
    """A Parquet file as it decodes: each row group's rows and decoded bytes."""

    row_groups: tuple[tuple[int, int], ...]

    @property
    def decoded_bytes(self) -> int:
        return sum(size for _, size in self.row_groups)

    def batch_rows(self, index: int, batch_bytes: int = BATCH_BYTES, max_rows: int = MAX_BATCH_ROWS) -> int:
        """Rows of a read batch of row group `index`: about `batch_bytes` of its decoded rows."""
        rows, size = self.row_groups[index]
        return max(1, min(max_rows, rows * batch_bytes // max(1, size)))


def _mib(size: float) -> str:
    return f"{size / MIB:,.0f} MiB"


def measure(
    source: Any,
    row_group_bytes: int,
    file_bytes: int,
    check: Callable[[], None] = lambda: None,
    as_dictionary: frozenset[str] = frozenset(),
    columns: Collection[str] | None = None,
    metadata: pq.FileMetaData | None = None,
) -> Shape:
    """The `Shape` of the Parquet file open as `source`, or TooBig when a row group decodes past
    `row_group_bytes` or the file past `file_bytes`. Columns named in `as_dictionary` (leaf
    paths) are sized as their reader holds them, as dictionaries. `check` is called between the
    probe's batches (the run's budget). `columns`: the top-level columns a reader reads (None:
    all), the only ones sized, since the others are never decoded; `metadata`: the footer, when
    the caller has read it already."""
    parquet = pq.ParquetFile(source, metadata=metadata, buffer_size=READ_BUFFER)  # the footer alone
    metadata, schema = parquet.metadata, parquet.schema
    sizes: list[int] = []
    probes: dict[int, list[int]] = {}  # row group -> the columns whose lengths must be read
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if columns is None and group.total_byte_size > row_group_bytes:
            raise TooBig(f"row group {index} is {_mib(group.total_byte_size)} uncompressed, over the "
                         f"{_mib(row_group_bytes)} the server reads at once")  # fmt: skip
        size = 0
        for column in range(group.num_columns):
            chunk = group.column(column)
            if columns is not None and not _under(chunk.path_in_schema, columns):
                continue
            values = chunk.num_values
            size += values // 8 + 1  # validity
            kind = chunk.physical_type
            if kind == "FIXED_LEN_BYTE_ARRAY":
                size += values * max(1, schema.column(column).length)
            elif kind != "BYTE_ARRAY":
                size += values * WIDTHS.get(kind, 16)
            elif chunk.path_in_schema in as_dictionary:
                if "DELTA_BYTE_ARRAY" in chunk.encodings:
                    # Read as a dictionary, every distinct value is held: prefixes shared make
                    # them any length.
                    raise TooBig(f"row group {index}'s {chunk.path_in_schema} is DELTA_BYTE_ARRAY-encoded: "
                                 "its values' sizes are not known before they are read")  # fmt: skip
                size += values * INDEX + chunk.total_uncompressed_size
            elif _expands(chunk):
                size += values * OFFSET
                probes.setdefault(index, []).append(column)
            else:  # plain: the bytes the footer counts are the values' own
                size += values * OFFSET + chunk.total_uncompressed_size
        if size > row_group_bytes:
            raise TooBig(f"row group {index} decodes to at least {_mib(size)}, over the "
                         f"{_mib(row_group_bytes)} the server reads at once")  # fmt: skip
        sizes.append(size)
    if probes:
        _probe(source, parquet, probes, sizes, row_group_bytes, check)
    total = sum(sizes)
    if total > file_bytes:
        raise TooBig(f"it decodes to {_mib(total)}, over the {_mib(file_bytes)} rewritten of one file")
    return Shape(tuple((metadata.row_group(i).num_rows, size) for i, size in enumerate(sizes)))


def _under(path: str, columns: Collection[str]) -> bool:
    """Whether the leaf at `path` (dotted, as the footer names it) is of one of `columns`."""
    return any(path == name or path.startswith(name + ".") for name in columns)


def _expands(chunk: Any) -> bool:
    """Whether a byte-array chunk's values may decode to more than the uncompressed bytes it counts."""
    encodings = set(chunk.encodings)
    dictionary = chunk.has_dictionary_page or encodings & DICTIONARY_ENCODINGS
    return bool(dictionary or "DELTA_BYTE_ARRAY" in encodings)


def _probe(
    source: Any,
    parquet: pq.ParquetFile,
    probes: dict[int, list[int]],
    sizes: list[int],
    row_group_bytes: int,
    check: Callable[[], None],
) -> None:
    """Add to `sizes` the dense bytes of the probed columns, reading only their lengths.

    A column that is DELTA_BYTE_ARRAY-encoded in any row group is read dense, a few values at a
    time (a value is at most as long as the chunk's uncompressed bytes: its prefix is the last
    value's); the others as dictionaries, whose indices and dictionary the footer sized."""
    metadata, schema = parquet.metadata, parquet.schema
    columns = {column for wanted in probes.values() for column in wanted}
    delta = {
        column
        for index, wanted in probes.items()
        for column in wanted
        if "DELTA_BYTE_ARRAY" in metadata.row_group(index).column(column).encodings
    }
    for column in delta:
        if schema.column(column).max_repetition_level > 0:
            raise TooBig(f"{schema.column(column).path} is nested and DELTA_BYTE_ARRAY-encoded: its values' "
                         "sizes are not known before they are read")  # fmt: skip
    dictionaries = sorted(columns - delta)
    reader = pq.ParquetFile(source, metadata=metadata, read_dictionary=dictionaries, buffer_size=READ_BUFFER)
    for index, wanted in sorted(probes.items()):
        for column in wanted:
            chunk = metadata.row_group(index).column(column)
            rows = PROBE_ROWS
            if column in delta:
                rows = max(1, PROBE_BYTES // max(1, chunk.total_uncompressed_size))
            batches = reader.reader.iter_batches(
                rows, row_groups=[index], column_indices=[column], use_threads=False
            )
            for batch in batches:
                sizes[index] += _dense_bytes(batch.column(0))
                if sizes[index] > row_group_bytes:
                    path = chunk.path_in_schema
                    raise TooBig(f"row group {index} decodes to more than {_mib(row_group_bytes)}, the most "
                                 f"the server reads at once, with its {path} values")  # fmt: skip
                check()


def _dense_bytes(array: pa.Array) -> int:
    """The bytes of `array`'s byte-array values decoded (a dictionary's summed by index, without
    decoding it), through structs and lists to their leaves."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        lengths = pc.binary_length(array.dictionary)
        return int(pc.sum(pc.take(lengths, array.indices)).as_py() or 0)
    if pa.types.is_struct(kind):
        return sum(_dense_bytes(child) for child in array.flatten())
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _dense_bytes(array.flatten())
    if pa.types.is_map(kind):
        return _dense_bytes(array.keys) + _dense_bytes(array.items)
    if pa.types.is_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_binary(kind) or \
            pa.types.is_large_string(kind):  # fmt: skip
        return int(pc.sum(pc.binary_length(array)).as_py() or 0)
    return int(array.nbytes)


def read_rows(
    table: Table, task: Any, shape: Shape, deletes: list[pa.ChunkedArray] | None, row_group_bytes: int
) -> Iterator[pa.RecordBatch]:
    """The rows of the scan task's data file, its position `deletes` applied, on the table's
    current schema, as pyiceberg's scan reads them (`_task_to_record_batches`), a batch at a time.

    The file is opened again after `measure`: one its writer changed meanwhile (or whose pages
    belie its footer) is TooBig once a row group's batches pass `row_group_bytes`."""
    from pyiceberg.io.pyarrow import (
        _combine_positional_deletes,
        _get_column_projection_values,
        _to_requested_schema,
        pyarrow_to_schema,
    )
    from pyiceberg.schema import prune_columns
    from pyiceberg.types import ListType, MapType

    metadata = table.metadata
    schema = metadata.schema()
    # pyiceberg's own default for the formats compaction rewrites (v1, v2).
    downcast = metadata.format_version <= 2
    projected = {i for i in schema.field_ids if not isinstance(schema.find_type(i), (MapType, ListType))}
    with table.io.new_input(task.file.file_path).open() as stream:
        parquet = pq.ParquetFile(stream, buffer_size=READ_BUFFER)
        file_schema = pyarrow_to_schema(
            parquet.schema_arrow,
            metadata.name_mapping(),
            downcast_ns_timestamp_to_us=downcast,
            format_version=metadata.format_version,
        )
        missing = _get_column_projection_values(
            task.file, schema, schema, metadata.specs().get(task.file.spec_id), file_schema.field_ids
        )
        file_projected = prune_columns(file_schema, projected, select_full_types=False)
        columns = [column.name for column in file_projected.columns]
        position = 0
        for index in range(parquet.metadata.num_row_groups):
            rows = shape.batch_rows(index) if index < len(shape.row_groups) else 1
            decoded = 0
            batches = parquet.iter_batches(
                batch_size=rows, row_groups=[index], columns=columns, use_threads=False
            )
            for batch in batches:
                decoded += batch.nbytes
                if decoded > row_group_bytes:
                    raise TooBig(f"row group {index} decodes past {_mib(row_group_bytes)} as it is read, "
                                 "whatever its footer said")  # fmt: skip
                start, position = position, position + batch.num_rows
                if deletes:
                    batch = batch.take(_combine_positional_deletes(deletes, start, position))
                if batch.num_rows:
                    yield _to_requested_schema(
                        schema,
                        file_projected,
                        batch,
                        downcast_ns_timestamp_to_us=downcast,
                        projected_missing_fields=missing,
                        allow_timestamp_tz_mismatch=True,
                    )


def read_deletes(table: Table, tasks: Iterable[Any]) -> dict[str, list[pa.ChunkedArray]]:
    """The position deletes of the tasks' data files, by data file path (pyiceberg's reader: each
    delete file whole, its `file_path` as a dictionary; `measure` sized them so first)."""
    from pyiceberg.io.pyarrow import _read_all_delete_files

    return _read_all_delete_files(table.io, tasks)


# -- the server's writer ---------------------------------------------------------------------------

#: (floor, ceiling) the server keeps a table's `write.parquet.*` within; None: no ceiling of its own.
FLOORS: dict[str, tuple[int, int | None]] = {
    TableProperties.PARQUET_ROW_GROUP_LIMIT: (100_000, None),
    TableProperties.PARQUET_ROW_GROUP_SIZE_BYTES: (64 * MIB, None),  # the ceiling is the read bound
    TableProperties.PARQUET_PAGE_SIZE_BYTES: (64 * 1024, 16 * MIB),
    TableProperties.PARQUET_PAGE_ROW_LIMIT: (1_000, 1_000_000),
    TableProperties.PARQUET_DICT_SIZE_BYTES: (64 * 1024, 16 * MIB),
}
CODECS = ("zstd", "gzip", "brotli", "lz4", "snappy", "none")
#: The highest compression level taken per codec: zstd past 9 and brotli past 5 cost many times the
#: CPU for a few percent of bytes (zstd 22 about 50x zstd 3's).
LEVEL_CEILINGS = {"zstd": 9, "brotli": 5, "gzip": 9, "lz4": 9}


@dataclass(frozen=True)
class WriterSettings:
    """How compaction writes: a row group closes at `row_group_rows` rows or `row_group_bytes` of
    decoded rows, whichever comes first; `options` are `pq.ParquetWriter`'s."""

    row_group_rows: int
    row_group_bytes: int
    options: dict[str, Any]


def writer_settings(properties: dict[str, str], row_group_bytes: int) -> WriterSettings:
    """The table's `write.parquet.*` (pyiceberg's defaults where unset or unreadable) within the
    server's `FLOORS`; a row group's bytes at most `row_group_bytes`, what the server reads at once.

    Iceberg's `row-group-size-bytes` counts a row group as written; here its rows are counted
    decoded, as they are held until it is written: row groups come out smaller, never bigger."""

    def bounded(key: str, default: int, ceiling: int | None = None) -> int:
        low, high = FLOORS[key]
        value = _whole(properties.get(key), default)
        high = ceiling if high is None else high
        low = min(low, high) if high is not None else low
        return max(low, value) if high is None else min(high, max(low, value))

    codec = str(properties.get(TableProperties.PARQUET_COMPRESSION, "zstd")).lower()
    codec = "none" if codec == "uncompressed" else codec if codec in CODECS else "zstd"
    level = _whole(properties.get(TableProperties.PARQUET_COMPRESSION_LEVEL), None)
    if codec == "none" or not pa.Codec.supports_compression_level(codec):
        level = None
    elif level is not None:
        level = max(pa.Codec.minimum_compression_level(codec), min(LEVEL_CEILINGS.get(codec, level), level))
    P = TableProperties
    options: dict[str, Any] = {
        "compression": codec,
        "compression_level": level,
        "data_page_size": bounded(P.PARQUET_PAGE_SIZE_BYTES, P.PARQUET_PAGE_SIZE_BYTES_DEFAULT),
        "dictionary_pagesize_limit": bounded(P.PARQUET_DICT_SIZE_BYTES, P.PARQUET_DICT_SIZE_BYTES_DEFAULT),
        # pyiceberg's reading of `page-row-limit`: the values written between two checks of a page's size.
        "write_batch_size": bounded(P.PARQUET_PAGE_ROW_LIMIT, P.PARQUET_PAGE_ROW_LIMIT_DEFAULT),
    }
    return WriterSettings(
        row_group_rows=bounded(P.PARQUET_ROW_GROUP_LIMIT, P.PARQUET_ROW_GROUP_LIMIT_DEFAULT),
        row_group_bytes=bounded(
            P.PARQUET_ROW_GROUP_SIZE_BYTES, P.PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT, row_group_bytes
        ),
        options=options,
    )


def _whole(value: Any, default: Any) -> Any:
    """A property's whole number; `default` when it is unset or not one (a caller's table says anything)."""
    try:
        return int(str(value).strip()) if value is not None else default
    except ValueError:
        return default
