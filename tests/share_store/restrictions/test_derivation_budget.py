"""A derivation's memory against a hostile source file: small on disk, huge once decoded.

A Parquet file's writer chooses its row groups and encodings: one value stored once in a
dictionary and repeated by run-length encoding decodes to its length times the rows, so a
file of kilobytes can decode to gigabytes. A derivation reads its source a batch at a time;
these tests hold it to a small budget (`DecodeBudget`, injected so that they stay small):
batches sized from the footer's decoded sizes, and a file past the budget refused with a
clear error before its rows are decoded, never read into memory whole.
"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from share_store.errors import UnsupportedOperation
from share_store.restrictions.derivation import DecodeBudget, derive
from share_store.restrictions.restriction import Audience, BoundRestriction, TableRestriction, bind

KIB, MIB = 1024, 1024 * 1024
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "blob", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
#: A budget a test's file passes many times over, where a 64K-row batch of it would not.
SMALL = DecodeBudget(row_group_bytes=16 * MIB, file_bytes=64 * MIB, batch_bytes=256 * KIB)


def _restricted(where: str | None = "id >= 0", columns: tuple[str, ...] | None = None) -> BoundRestriction:
    return bind(TableRestriction(where, columns), SCHEMA, Audience(None, {}))


def _parquet(table: pa.Table, **options: object) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **options)  # type: ignore[arg-type]
    return buffer.getvalue()


def _bomb(rows: int, value_bytes: int) -> bytes:
    """`rows` rows, all the same `value_bytes`-long string: stored once in the dictionary."""
    blob = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * value_bytes]))
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "blob": blob})
    # Written as Spark and delta-rs write strings: no Arrow schema saying "dictionary" in the footer.
    return _parquet(table, row_group_size=rows, compression="zstd", store_schema=False)


def test_a_file_that_decodes_past_the_budget_is_refused_clearly_before_its_rows_are_read() -> None:
    # 8,192 rows of one 64 KiB string: 512 MiB decoded, a few hundred KiB on disk. A 64K-row
    # batch read would hold all of it at once.
    source = _bomb(8192, 64 * KIB)
    assert len(source) < 1 * MIB
    with pytest.raises(UnsupportedOperation) as refused:
        derive(io.BytesIO(source), _restricted(), {}, budget=SMALL)
    message = refused.value.message
    assert "decodes" in message and "16 MiB" in message and "row groups" in message
    # What the refusal says names no column (the filter's may be cut) and no file.
    assert "blob" not in message and "id" not in message.split()


def test_a_bomb_in_a_column_cut_by_the_restriction_is_never_decoded_nor_refused() -> None:
    source = _bomb(8192, 64 * KIB)
    derived = derive(io.BytesIO(source), _restricted(columns=("id",)), {}, budget=SMALL)
    assert derived.content is not None
    rows = pq.read_table(io.BytesIO(derived.content))
    assert rows.column_names == ["id"] and rows.num_rows == 8192


def test_batches_are_sized_from_the_decoded_rows_not_a_fixed_row_count() -> None:
    # 65,536 rows of 200-byte strings in one row group: 13 MiB decoded, within the budget's
    # row group, but 50 times its batch. Each batch read is written as the derived file's own
    # row group, which shows what a batch held.
    rows = 65_536
    blob = pa.array([f"{i:08d}" + "y" * 192 for i in range(rows)])
    source = _parquet(pa.table({"id": pa.array(range(rows), pa.int64()), "blob": blob}), row_group_size=rows)
    derived = derive(io.BytesIO(source), _restricted(), {}, budget=SMALL)
    assert derived.content is not None and derived.num_records == rows
    written = pq.ParquetFile(io.BytesIO(derived.content)).metadata
    assert written.num_row_groups > 20
    largest = max(written.row_group(i).num_rows for i in range(written.num_row_groups))
    assert largest * 208 <= 2 * SMALL.batch_bytes  # about a batch's bytes, never 64K rows
    assert pq.read_table(io.BytesIO(derived.content)).column("blob").to_pylist() == blob.to_pylist()


def test_an_ordinary_file_derives_as_before() -> None:
    table = pa.table({"id": pa.array(range(100), pa.int64()), "blob": [str(i) for i in range(100)]})
    derived = derive(io.BytesIO(_parquet(table)), _restricted("id >= 50"), {})
    assert derived.content is not None
    assert pq.read_table(io.BytesIO(derived.content)).column("id").to_pylist() == list(range(50, 100))
