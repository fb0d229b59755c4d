"""What compaction makes of a caller's Parquet files before it reads their rows, and of a table's
`write.parquet.*`: `parquet_bounds.measure` and `writer_settings`, on files written here.

Each measure is compared with what the rows really decode to (`pa.Table.nbytes`): never under
it, so that a bound on the measure bounds what a read holds.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import TableProperties as P

from share_store.parquet_bounds import (
    MAX_BATCH_ROWS,
    MIB,
    TooBig,
    measure,
    writer_settings,
)

BOUND = 256 * MIB
FILE_BOUND = 4096 * MIB


def parquet(rows: pa.Table, **options: Any) -> pa.BufferReader:
    buffer = io.BytesIO()
    pq.write_table(rows, buffer, store_schema=False, **options)
    return pa.BufferReader(buffer.getvalue())


def repeated(value: str, rows: int) -> pa.ChunkedArray:
    """`rows` times `value`, as dictionary chunks (never held decoded here)."""
    sizes = [10_000] * (rows // 10_000) + [rows % 10_000]
    return pa.chunked_array(
        [pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array([value])) for n in sizes if n]
    )


def test_a_dictionary_bomb_is_too_big_though_its_footer_says_a_quarter_megabyte() -> None:
    bomb = parquet(
        pa.table({"id": range(20_001), "name": repeated("x" * 50_000, 20_001)}), row_group_size=20_001
    )
    assert pq.ParquetFile(bomb).metadata.row_group(0).total_byte_size < MIB
    with pytest.raises(TooBig, match=r"row group 0 decodes to more than 256 MiB.* name values"):
        measure(bomb, BOUND, FILE_BOUND)


def test_a_compression_bomb_is_too_big_from_its_footer_alone() -> None:
    bomb = parquet(
        pa.table({"name": repeated("x" * 50_000, 6_000)}), use_dictionary=False, compression="zstd"
    )
    with pytest.raises(TooBig, match=r"row group 0 is 286 MiB uncompressed"):
        measure(bomb, BOUND, FILE_BOUND)


def test_long_runs_of_one_number_are_sized_by_their_count() -> None:
    """RLE stores 30 million equal integers in a few bytes: their count says what they decode to."""
    ones = pa.chunked_array([pa.array([1] * 1_000_000, pa.int64())] * 40)
    rows = parquet(pa.table({"n": ones}), row_group_size=40_000_000)
    with pytest.raises(TooBig, match=r"row group 0 decodes to at least 3\d\d MiB"):
        measure(rows, BOUND, FILE_BOUND)


def honest() -> pa.Table:
    ids = list(range(50_000))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [f"name-{i % 300}" for i in ids],  # dictionary-encoded
        "note": [f"note {i} " * (i % 7) for i in ids],  # mostly distinct: falls back to plain
        "tags": [[f"t{i % 5}", f"u{i % 11}"] for i in ids],
        "point": [{"x": i * 0.5, "label": f"p{i % 13}"} for i in ids],
        "attrs": pa.array([[("k", f"v{i % 3}")] for i in ids], pa.map_(pa.string(), pa.string())),
        "flba": pa.array([i.to_bytes(16, "big") for i in ids], pa.binary(16)),
    })  # fmt: skip


@pytest.mark.parametrize("encoding", ["default", "delta"])
def test_an_honest_file_is_measured_at_or_over_what_it_decodes_to(encoding: str) -> None:
    rows = honest()
    options: dict[str, Any] = {"row_group_size": 20_000}
    if encoding == "delta":
        options |= {"use_dictionary": ["note"], "column_encoding": {"name": "DELTA_BYTE_ARRAY"}}
    shape = measure(parquet(rows, **options), BOUND, FILE_BOUND)
    assert [r for r, _ in shape.row_groups] == [20_000, 20_000, 10_000]
    decoded = rows.nbytes
    assert decoded <= shape.decoded_bytes <= 4 * decoded, (decoded, shape)
    assert all(1 <= shape.batch_rows(i) <= MAX_BATCH_ROWS for i in range(3))


def test_a_nested_delta_byte_array_column_cannot_be_sized_before_it_is_read() -> None:
    rows = pa.table({"tags": [["a", "b"], ["c"]]})
    source = parquet(rows, use_dictionary=False, column_encoding={"tags.list.element": "DELTA_BYTE_ARRAY"})
    with pytest.raises(TooBig, match="nested and DELTA_BYTE_ARRAY"):
        measure(source, BOUND, FILE_BOUND)


def test_a_file_past_the_file_bound_is_too_big_though_each_row_group_fits() -> None:
    rows = pa.table({"n": pa.array(range(300_000), pa.int64())})
    source = parquet(rows, row_group_size=100_000)
    assert measure(source, MIB, 3 * MIB).decoded_bytes > 2 * MIB
    with pytest.raises(TooBig, match="rewritten of one file"):
        measure(source, MIB, 2 * MIB)


def test_a_delete_files_paths_are_sized_as_the_dictionary_they_are_read_as() -> None:
    """pyiceberg reads a position delete file's `file_path` as a dictionary: a million deletes of
    one file hold a million indices and one path, not a million paths."""
    path = "s3://bucket/" + "p" * 200 + ".parquet"
    deletes = pa.table(
        {"file_path": repeated(path, 1_000_000), "pos": pa.array(range(1_000_000), pa.int64())}
    )
    source = parquet(deletes)
    as_read = measure(source, BOUND, FILE_BOUND, as_dictionary=frozenset({"file_path"}))
    dense = measure(source, BOUND, FILE_BOUND)
    assert as_read.decoded_bytes < 20 * MIB < 200 * MIB < dense.decoded_bytes


def test_the_probe_checks_the_budget_between_batches() -> None:
    calls = []
    source = parquet(pa.table({"name": [f"n{i % 10}" for i in range(200_000)]}))
    measure(source, BOUND, FILE_BOUND, check=lambda: calls.append(1))
    assert len(calls) >= 3


# -- the server's writer ---------------------------------------------------------------------------


def test_a_tables_writer_settings_are_kept_within_the_servers_floors_and_ceilings() -> None:
    hostile = {
        P.PARQUET_ROW_GROUP_LIMIT: "1",
        P.PARQUET_ROW_GROUP_SIZE_BYTES: "1",
        P.PARQUET_PAGE_SIZE_BYTES: "1",
        P.PARQUET_PAGE_ROW_LIMIT: "1",
        P.PARQUET_DICT_SIZE_BYTES: "1",
        P.PARQUET_COMPRESSION: "zstd",
        P.PARQUET_COMPRESSION_LEVEL: "22",
    }
    settings = writer_settings(hostile, BOUND)
    assert (settings.row_group_rows, settings.row_group_bytes) == (100_000, 64 * MIB)
    assert settings.options == {
        "compression": "zstd", "compression_level": 9, "data_page_size": 64 * 1024,
        "dictionary_pagesize_limit": 64 * 1024, "write_batch_size": 1_000,
    }  # fmt: skip
    huge = {P.PARQUET_ROW_GROUP_SIZE_BYTES: str(10**12), P.PARQUET_PAGE_SIZE_BYTES: str(10**12),
            P.PARQUET_DICT_SIZE_BYTES: str(10**12)}  # fmt: skip
    settings = writer_settings(huge, BOUND)
    assert settings.row_group_bytes == BOUND  # at most what the server reads at once
    assert settings.options["data_page_size"] == settings.options["dictionary_pagesize_limit"] == 16 * MIB


@pytest.mark.parametrize(
    ("codec", "level", "expected"),
    [("brotli", "11", ("brotli", 5)), ("snappy", "3", ("snappy", None)),
     ("uncompressed", "1", ("none", None)), ("lzo", "1", ("zstd", 1)), ("gzip", "x", ("gzip", None)),
     ("ZSTD", "-3", ("zstd", -3))],
)  # fmt: skip
def test_a_codec_and_level_are_ones_pyarrow_takes_and_no_slower_than_the_ceiling(
    codec: str, level: str, expected: tuple[str, int | None]
) -> None:
    options = writer_settings(
        {P.PARQUET_COMPRESSION: codec, P.PARQUET_COMPRESSION_LEVEL: level}, BOUND
    ).options
    assert (options["compression"], options["compression_level"]) == expected
    pq.write_table(pa.table({"a": [1]}), io.BytesIO(), **options)  # pyarrow takes them


def test_unset_or_unreadable_settings_are_pyiceberg_defaults() -> None:
    settings = writer_settings({P.PARQUET_ROW_GROUP_LIMIT: "many", P.PARQUET_PAGE_SIZE_BYTES: ""}, BOUND)
    assert settings.row_group_rows == P.PARQUET_ROW_GROUP_LIMIT_DEFAULT
    assert settings.row_group_bytes == P.PARQUET_ROW_GROUP_SIZE_BYTES_DEFAULT
    assert settings.options["data_page_size"] == P.PARQUET_PAGE_SIZE_BYTES_DEFAULT
    assert settings.options["compression"] == "zstd"
