"""Small Delta tables written by hand, each with the rows a reader must return.

No writer at hand makes these (delta-rs writes neither deletion vectors nor
column-mapped nested fields), so the log and the Parquet files are written here
by the Delta protocol: column mapping by name and by id with nested fields,
`timestamp_ntz`, type widening, deletion vectors inline and several in one file.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from share_store.delta.deletion_vectors import serialize_positions, z85_encode

PHYSICAL_NAME = "delta.columnMapping.physicalName"
# Logical name → (physical name, field id) of every field, nested ones included.
FIELDS = {
    "id": ("col-1d", 1),
    "person": ("col-pers0n", 2),
    "first name": ("col-f1rst", 3),
    "tags": ("col-t4gs", 4),
    "k": ("col-k3y", 5),
    "scores": ("col-sc0res", 6),
    "v": ("col-v4lue", 7),
    "seen": ("col-s33n", 8),
    "day": ("col-d4y", 9),
}


def _field(name: str, data_type: Any, physical_names: dict[str, str]) -> dict[str, Any]:
    metadata = {
        "delta.columnMapping.id": FIELDS[name][1],
        "delta.columnMapping.physicalName": physical_names[name],
    }
    return {"name": name, "type": data_type, "nullable": True, "metadata": metadata}


def mapped_schema(physical_names: dict[str, str]) -> dict[str, Any]:
    """The logical schema, its fields carrying `physical_names` and FIELDS' ids."""

    def field(name: str, data_type: Any) -> dict[str, Any]:
        return _field(name, data_type, physical_names)

    tag = {"type": "struct", "fields": [field("k", "string")]}
    person = {
        "type": "struct",
        "fields": [
            field("first name", "string"),
            field("tags", {"type": "array", "elementType": tag, "containsNull": True}),
        ],
    }
    score = {"type": "struct", "fields": [field("v", "integer")]}
    scores = {"type": "map", "keyType": "string", "valueType": score, "valueContainsNull": True}
    return {
        "type": "struct",
        "fields": [
            field("id", "long"),
            field("person", person),
            field("scores", scores),
            field("seen", "timestamp_ntz"),
            field("day", "date"),
        ],
    }


def _arrow_field(name: str, data_type: pa.DataType) -> pa.Field:
    physical, field_id = FIELDS[name]
    return pa.field(physical, data_type, metadata={b"PARQUET:field_id": str(field_id).encode()})


def physical_arrow_schema() -> pa.Schema:
    """The data files' schema: physical names and field ids all the way down (partition column left out)."""
    tag = pa.struct([_arrow_field("k", pa.string())])
    person = pa.struct([_arrow_field("first name", pa.string()), _arrow_field("tags", pa.list_(tag))])
    score = pa.struct([_arrow_field("v", pa.int32())])
    return pa.schema(
        [
            _arrow_field("id", pa.int64()),
            _arrow_field("person", person),
            _arrow_field("scores", pa.map_(pa.string(), score)),
            _arrow_field("seen", pa.timestamp("us")),
        ]
    )


def logical_row(i: int, day: dt.date | None) -> dict[str, Any]:
    return {
        "id": i,
        "person": {"first name": f"name {i}", "tags": [{"k": f"t{i}"}, {"k": None}] if i % 2 else []},
        "scores": {"a": {"v": i}, "b": None} if i % 3 else {},
        "seen": dt.datetime(2024, 1, 1, 12, 0, 0) + dt.timedelta(minutes=i, microseconds=i),
        "day": day,
    }


def _physical_row(row: dict[str, Any]) -> dict[str, Any]:
    names = {name: physical for name, (physical, _) in FIELDS.items()}
    person = row["person"]
    return {
        names["id"]: row["id"],
        names["person"]: {
            names["first name"]: person["first name"],
            names["tags"]: [{names["k"]: tag["k"]} for tag in person["tags"]],
        },
        names["scores"]: [(k, None if v is None else {names["v"]: v["v"]}) for k, v in row["scores"].items()],
        names["seen"]: row["seen"],
    }


def _dv_file(vectors: list[bytes]) -> tuple[bytes, list[int]]:
    """A deletion vector file holding several vectors, and where each one's length field starts."""
    content = bytearray(b"\x01")
    offsets = []
    for payload in vectors:
        offsets.append(len(content))
        content += len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
    return bytes(content), offsets


def write_mapped(root: Path, mode: str) -> list[dict[str, Any]]:
    """A column-mapped table (`name` or `id` mode) with deletion vectors; the rows it holds.

    In `id` mode the schema's physical names are not the files' names, so only a
    reader that matches by field id reads it right.
    """
    (root / "_delta_log").mkdir(parents=True)
    physical_names = {name: physical for name, (physical, _) in FIELDS.items()}
    if mode == "id":
        physical_names = {name: f"renamed-{physical}" for name, physical in physical_names.items()}
    # (partition day, row ids, rows deleted by position, where the vector lives)
    layout = [
        (dt.date(2024, 1, 1), range(0, 5), [1, 3], "inline"),
        (dt.date(2024, 1, 2), range(5, 9), [0], "file"),
        (None, range(9, 12), [2], "file"),
        (dt.date(2024, 1, 3), range(12, 14), [], None),
    ]
    payloads = {index: serialize_positions(deleted)[0] for index, (_, _, deleted, _) in enumerate(layout)}
    dv_uuid = uuid.UUID(int=7)
    in_file = [index for index, (*_, where) in enumerate(layout) if where == "file"]
    content, offsets = _dv_file([payloads[index] for index in in_file])
    (root / f"deletion_vector_{dv_uuid}.bin").write_bytes(content)
    file_offset = dict(zip(in_file, offsets, strict=True))
    adds = []
    expected = []
    for index, (day, ids, deleted, where) in enumerate(layout):
        rows = [logical_row(i, day) for i in ids]
        expected += [row for position, row in enumerate(rows) if position not in deleted]
        table = pa.Table.from_pylist([_physical_row(row) for row in rows], schema=physical_arrow_schema())
        day_dir = f"day={day or '__HIVE_DEFAULT_PARTITION__'}"
        path = f"{day_dir}/part-{index:05d}.parquet"
        (root / day_dir).mkdir(exist_ok=True)
        pq.write_table(table, root / path)
        add: dict[str, Any] = {
            "path": path,
            "partitionValues": {physical_names["day"]: None if day is None else day.isoformat()},
            "size": (root / path).stat().st_size,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps({"numRecords": len(rows)}),
        }
        if where == "inline":
            add["deletionVector"] = {
                "storageType": "i",
                "pathOrInlineDv": z85_encode(payloads[index]),
                "sizeInBytes": len(payloads[index]),
                "cardinality": len(deleted),
            }
        elif where == "file":
            add["deletionVector"] = {
                "storageType": "u",
                "pathOrInlineDv": z85_encode(dv_uuid.bytes),
                "offset": file_offset[index],
                "sizeInBytes": len(payloads[index]),
                "cardinality": len(deleted),
            }
        adds.append(add)
    features = ["columnMapping", "deletionVectors", "timestampNtz"]
    metadata = {
        "id": f"handmade-{mode}",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(mapped_schema(physical_names)),
        "partitionColumns": ["day"],
        "configuration": {
            "delta.columnMapping.mode": mode,
            "delta.columnMapping.maxColumnId": str(len(FIELDS)),
            "delta.enableDeletionVectors": "true",
        },
        "createdTime": 0,
    }
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": features,
    }
    _write_log(root, [{"protocol": protocol}, {"metaData": metadata}, *({"add": add} for add in adds)])
    return expected


WIDENED = {
    "small": ("integer", "long"),
    "ratio": ("float", "double"),
    "price": ("decimal(5,2)", "decimal(9,3)"),
}


def write_widened(root: Path) -> list[dict[str, Any]]:
    """A table whose columns were widened (typeWidening): an old file of narrow types, a new one."""
    (root / "_delta_log").mkdir(parents=True)
    fields = []
    for name, (old, new) in WIDENED.items():
        change = {"fromType": old, "toType": new}
        fields.append(
            {"name": name, "type": new, "nullable": True, "metadata": {"delta.typeChanges": [change]}}
        )
    fields.append({"name": "p", "type": "long", "nullable": True, "metadata": {}})
    old = pa.table(
        {
            "small": pa.array([1, -2], pa.int32()),
            "ratio": pa.array([0.5, 1.25], pa.float32()),
            "price": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(5, 2)),
        }
    )
    new = pa.table(
        {
            "small": pa.array([2**40], pa.int64()),
            "ratio": pa.array([0.1], pa.float64()),
            "price": pa.array([Decimal("123456.789")], pa.decimal128(9, 3)),
        }
    )
    adds = []
    # The partition column was an integer when the old file was written: its value is just a string.
    for name, table, partition in (("old.parquet", old, "7"), ("new.parquet", new, str(2**35))):
        (root / f"p={partition}").mkdir()
        pq.write_table(table, root / f"p={partition}" / name)
        size = (root / f"p={partition}" / name).stat().st_size
        adds.append(
            {
                "add": {
                    "path": f"p={partition}/{name}",
                    "partitionValues": {"p": partition},
                    "size": size,
                    "modificationTime": 0,
                    "dataChange": True,
                    "stats": json.dumps({"numRecords": table.num_rows}),
                }
            }
        )
    features = ["typeWidening"]
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": features,
    }
    metadata = {
        "id": "handmade-widened",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": ["p"],
        "configuration": {"delta.enableTypeWidening": "true"},
        "createdTime": 0,
    }
    _write_log(root, [{"protocol": protocol}, {"metaData": metadata}, *adds])
    return [
        {"small": 1, "ratio": 0.5, "price": Decimal("1.250"), "p": 7},
        {"small": -2, "ratio": 1.25, "price": Decimal("-3.500"), "p": 7},
        {"small": 2**40, "ratio": 0.1, "price": Decimal("123456.789"), "p": 2**35},
    ]


def _write_log(root: Path, actions: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(action) + "\n" for action in actions)
    (root / "_delta_log" / "00000000000000000000.json").write_text(text)
