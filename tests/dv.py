"""An independent reader of Delta deletion vectors, for checking what recipients see."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap

from share_store.delta.deletion_vectors import dv_relative_path

DV_MAGIC = 1681511377


def deleted_row_indexes(table_root: Path, descriptor: dict) -> set[int]:
    assert descriptor["storageType"] == "u", "only on-disk DVs occur in the test tables"
    raw = (table_root / dv_relative_path(descriptor)).read_bytes()
    offset = descriptor.get("offset") or 1
    length = int.from_bytes(raw[offset : offset + 4], "big")
    payload = raw[offset + 4 : offset + 4 + length]
    assert int.from_bytes(payload[:4], "little") == DV_MAGIC
    rows = payload_positions(payload)
    assert len(rows) == descriptor["cardinality"]
    return rows


def payload_positions(payload: bytes) -> set[int]:
    """Row positions of a serialized vector (magic, then a portable 64-bit roaring bitmap)."""
    count = int.from_bytes(payload[4:12], "little")
    rows: set[int] = set()
    position = 12
    for _ in range(count):
        key = int.from_bytes(payload[position : position + 4], "little")
        bitmap = BitMap.deserialize(payload[position + 4 :])
        position += 4 + len(bitmap.serialize())
        rows |= {(key << 32) | value for value in bitmap}
    return rows


def read_with_deletion_vectors(table_root: Path, adds: list[dict]) -> pa.Table:
    """The table's rows: each data file minus the rows its deletion vector marks."""
    pieces = []
    for add in adds:
        from urllib.parse import unquote

        data = pq.read_table(table_root / unquote(add["path"]))
        if add.get("deletionVector"):
            deleted = deleted_row_indexes(table_root, add["deletionVector"])
            keep = [i for i in range(data.num_rows) if i not in deleted]
            data = data.take(keep)
        pieces.append(data)
    return pa.concat_tables(pieces)
