"""The deltaSharing source's pure parts: vectors, column mapping, conversions, change pairing, planning."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import zlib
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from pyspark_delta_sharing import column_mapping, deletion_vectors, environment, files, listing, source
from pyspark_delta_sharing.column_mapping import Column
from share_store.delta.deletion_vectors import serialize_positions, z85_encode

# -- deletion vectors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [[], [0], [1, 5, 9], list(range(0, 100_000, 7)), [3, 2**32 + 1, 2**40]])
def test_vectors_decode_to_the_positions_the_server_encodes(rows: list[int]) -> None:
    payload, cardinality = serialize_positions(rows)
    assert deletion_vectors.positions(payload, cardinality).tolist() == sorted(rows)
    inline = {"storageType": "i", "pathOrInlineDv": z85_encode(payload), "sizeInBytes": len(payload)}
    assert deletion_vectors.deleted_rows(inline | {"cardinality": cardinality}, _no_fetch).tolist() == rows


def _no_fetch(url: str, start: int, length: int) -> bytes:
    raise AssertionError("an inline vector needs no fetch")


def test_file_vectors_are_read_at_their_offset_and_checked() -> None:
    payload, cardinality = serialize_positions([2, 4])
    framed = len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
    content = b"\x01" + b"other vector" + framed
    asked = []

    def get(url: str, start: int, length: int) -> bytes:
        asked.append((url, start, length))
        return content[start : start + length]

    descriptor = {
        "storageType": "p",
        "pathOrInlineDv": "https://storage/dv.bin?sig=1",
        "offset": 13,
        "sizeInBytes": len(payload),
        "cardinality": cardinality,
    }
    assert deletion_vectors.deleted_rows(descriptor, get).tolist() == [2, 4]
    assert asked == [("https://storage/dv.bin?sig=1", 13, len(payload) + 8)]
    corrupt = framed[:-1] + bytes([framed[-1] ^ 1])
    with pytest.raises(deletion_vectors.DeletionVectorError, match="CRC-32"):
        deletion_vectors.framed_payload(corrupt, len(payload))
    with pytest.raises(deletion_vectors.DeletionVectorError, match="descriptor says 99"):
        deletion_vectors.framed_payload(framed, 99)


def test_malformed_vectors_are_refused_with_reasons() -> None:
    payload, _ = serialize_positions([1, 2, 3])
    with pytest.raises(deletion_vectors.DeletionVectorError, match="magic"):
        deletion_vectors.positions(b"\0" * 4 + payload[4:])
    with pytest.raises(deletion_vectors.DeletionVectorError, match="deletes 3 rows"):
        deletion_vectors.positions(payload, 4)
    with pytest.raises(deletion_vectors.DeletionVectorError, match="not valid Z85"):
        deletion_vectors.z85_decode("~~~~~")
    relative = {"storageType": "u", "pathOrInlineDv": "ab" + z85_encode(b"\1" * 16), "sizeInBytes": 1}
    with pytest.raises(deletion_vectors.DeletionVectorError, match="signed URL"):
        deletion_vectors.deleted_rows(relative, _no_fetch)


def test_masks_cover_batches_at_any_offset() -> None:
    deleted = np.array([0, 5, 6, 130], dtype=np.uint64)
    assert deletion_vectors.kept(deleted, 10, 100) is None  # no deletes in rows 10..109
    mask = deletion_vectors.kept(deleted, 4, 4)
    assert mask is not None and mask.tolist() == [True, False, False, True]
    assert deletion_vectors.chosen(deleted, 128, 4).tolist() == [False, False, True, False]


# -- column mapping and conversions ------------------------------------------------------------------

PHYSICAL = "delta.columnMapping.physicalName"
MAPPED = {
    "type": "struct",
    "fields": [
        {
            "name": "s",
            "type": {
                "type": "struct",
                "fields": [
                    {
                        "name": "a",
                        "type": "integer",
                        "nullable": True,
                        "metadata": {
                            "delta.columnMapping.physicalName": "col-a",
                            "delta.columnMapping.id": 2,
                        },
                    }
                ],
            },
            "nullable": True,
            "metadata": {
                "comment": "kept",
                "delta.columnMapping.physicalName": "col-s",
                "delta.columnMapping.id": 1,
                "delta.identity.start": 1,
            },
        },
        {
            "name": "m",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": {
                    "type": "array",
                    "elementType": {
                        "type": "struct",
                        "fields": [
                            {
                                "name": "x",
                                "type": "long",
                                "nullable": True,
                                "metadata": {"delta.columnMapping.physicalName": "col-x"},
                            }
                        ],
                    },
                    "containsNull": True,
                },
                "valueContainsNull": True,
            },
            "nullable": True,
            "metadata": {"delta.columnMapping.physicalName": "col-m"},
        },
    ],
}


def test_the_logical_schema_keeps_comments_and_drops_deltas_own_metadata() -> None:
    logical = column_mapping.logical_schema(json.dumps(MAPPED))
    assert logical["fields"][0]["metadata"] == {"comment": "kept"}
    assert logical["fields"][0]["type"]["fields"][0]["metadata"] == {}
    inner = logical["fields"][1]["type"]["valueType"]["elementType"]["fields"][0]
    assert inner == {"name": "x", "type": "long", "nullable": True, "metadata": {}}


def test_columns_know_their_physical_names_and_ids_all_the_way_down() -> None:
    table = column_mapping.table_columns(json.dumps(MAPPED), "name")
    s, m = table.children
    assert (s.name, s.physical, s.field_id, s.kind) == ("s", "col-s", 1, "struct")
    assert s.children[0] == Column("a", "col-a", 2)
    element = m.children[1].children[0]
    assert element.children[0].physical == "col-x" and m.renamed
    plain = column_mapping.table_columns(json.dumps(MAPPED), "none")
    assert not plain.renamed
    with pytest.raises(ValueError, match="unsupported"):
        column_mapping.mode({"delta.columnMapping.mode": "other"})


def test_nested_columns_are_renamed_and_widened_even_when_sliced() -> None:
    table = column_mapping.table_columns(json.dumps(MAPPED), "name")
    element = pa.struct([pa.field("col-x", pa.int32())])
    file_type = pa.map_(pa.string(), pa.list_(element))
    data = pa.array(
        [[("k", [{"col-x": 1}, None])], None, [("j", []), ("l", [{"col-x": 2}])], [("z", None)]], file_type
    )
    target = pa.map_(pa.string(), pa.list_(pa.struct([pa.field("x", pa.int64())])))
    converted = files.convert(data.slice(1, 3), file_type, table.children[1], target, "name")
    assert converted.type == target
    assert converted.to_pylist() == [None, [("j", []), ("l", [{"x": 2}])], [("z", None)]]
    struct_type = pa.struct([pa.field("col-a", pa.int16())])
    structs = pa.array([{"col-a": 1}, None, {"col-a": None}], struct_type).slice(1)
    target_struct = pa.struct([pa.field("a", pa.int32())])
    out = files.convert(structs, struct_type, table.children[0], target_struct, "name")
    assert out.to_pylist() == [None, {"a": None}]


UTC_US = pa.timestamp("us", "UTC")


@pytest.mark.parametrize(
    ("value", "arrow_type", "expected"),
    [
        ("2024-01-02 03:04:05", pa.timestamp("us", "UTC"), dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
        (
            "2024-01-02T03:04:05.000006Z",
            pa.timestamp("us", "UTC"),
            dt.datetime(2024, 1, 2, 3, 4, 5, 6, dt.UTC),
        ),
        ("2024-01-02 03:04:05.5", pa.timestamp("us"), dt.datetime(2024, 1, 2, 3, 4, 5, 500000)),
        ("2024-02-29", pa.date32(), dt.date(2024, 2, 29)),
        ("TRUE", pa.bool_(), True),
        ("ab", pa.binary(), b"ab"),
        ("12.5", pa.decimal128(5, 2), Decimal("12.50")),
        ("", pa.string(), ""),
        ("", pa.int32(), None),
        (None, pa.int64(), None),
    ],
)
def test_partition_values_parse_as_delta_writes_them(
    value: Any, arrow_type: pa.DataType, expected: Any
) -> None:
    assert files.partition_scalar(value, arrow_type).as_py() == expected


# -- listings -------------------------------------------------------------------------------------------


def _line(kind: str, file_id: str, version: int, vector: dict[str, Any] | None = None) -> dict[str, Any]:
    action: dict[str, Any] = {
        "path": f"https://s/{file_id}?X-Amz-Signature=x",
        "size": 10,
        "partitionValues": {},
    }
    if vector:
        action["deletionVector"] = vector
    wrapper = {"id": file_id, "version": version, "timestamp": 1000 * version, "expirationTimestamp": 9}
    return {"file": wrapper | {"deltaSingleAction": {kind: action}}}


def test_a_rewritten_vector_reads_as_the_rows_it_deleted() -> None:
    old = {"storageType": "i", "pathOrInlineDv": "old", "sizeInBytes": 1}
    new = {"storageType": "i", "pathOrInlineDv": "new", "sizeInBytes": 1}
    lines = [
        _line("remove", "f", 2, old),
        _line("add", "f", 2, new),
        _line("add", "g", 2),
        _line("remove", "h", 2, old),
        _line("cdc", "c", 3),
        _line("add", "f", 3),  # same file, another version: not a pair
    ]
    found = {f["key"]: f for f in listing.change_files(lines)}
    assert sorted(found) == [
        "add:f:3",
        "add:g:2",
        "cdc:c:3",
        "delete-by-vector:f:2",
        "insert-by-vector:f:2",
        "remove:h:2",
    ]
    deleted = found["delete-by-vector:f:2"]
    assert deleted["rows"] == {"only": new, "except": old} and deleted["change"]["_change_type"] == "delete"
    restored = found["insert-by-vector:f:2"]
    assert restored["rows"] == {"only": old, "except": new} and restored["change"]["_change_type"] == "insert"
    assert "deletion_vector" not in deleted
    assert found["remove:h:2"]["deletion_vector"] == old
    assert found["cdc:c:3"]["change"]["_change_type"] is None  # the cdc file holds it
    assert found["add:g:2"]["change"]["_commit_timestamp"] == dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC)


def test_capabilities_announce_what_the_source_reads() -> None:
    assert listing.capabilities("parquet") == "responseformat=parquet"
    assert listing.capabilities("delta,parquet") == (
        "responseformat=delta,parquet;"
        "readerfeatures=deletionvectors,columnmapping,timestampntz,typewidening,typewidening-preview"
    )


def test_small_tables_spread_over_the_cores_and_large_ones_by_size() -> None:
    eight = [{"size": 3_000_000} for _ in range(8)]
    assert [len(group) for group in source.plan_partitions(eight, 2)] == [4, 4]
    assert len(source.plan_partitions(eight, 64)) == 8
    large = [{"size": 100_000_000} for _ in range(10)]
    assert len(source.plan_partitions(large, 2)) == 10  # 128 MB at most per partition
    assert source.plan_partitions([], 2) == []


# -- pushdown and the workers' Python -------------------------------------------------------------------


def _frame(module: str, enable_pushdown: bool | None) -> Any:
    local_vars = {} if enable_pushdown is None else {"enable_pushdown": enable_pushdown}
    return SimpleNamespace(f_globals={"__name__": module, "__spec__": None}, f_locals=local_vars)


def test_filters_are_pushed_unless_spark_plans_without_them(
    caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:
    monkeypatch.setattr(source, "_pushdown_warned", False)
    planner = "pyspark.sql.worker.plan_data_source_read"
    with caplog.at_level(logging.WARNING, logger="pyspark_delta_sharing"):
        assert source.pushdown_allowed(_frame("pyspark.sql.worker.data_source_pushdown_filters", None))
        assert not source.pushdown_allowed(_frame(planner, True))  # no filters to push
        assert not caplog.records
        assert not source.pushdown_allowed(_frame(planner, False))
        assert not source.pushdown_allowed(_frame(planner, False))
    assert len(caplog.records) == 1  # said once
    assert "spark.sql.python.filterPushdown.enabled is off" in caplog.records[0].getMessage()


def test_the_advice_names_the_environment_pyspark_lives_in(tmp_path) -> None:
    env = tmp_path / "venv"
    home = env / "lib" / "python3.11" / "site-packages" / "pyspark"
    home.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").write_text("")
    (env / "bin" / "python").chmod(0o755)
    assert environment.environment_python(str(home)) == str(env / "bin" / "python")
    message = environment.advice(["pyarrow", "delta_sharing"], "/usr/bin/python3", str(home))
    assert "/usr/bin/python3" in message and "cannot import pyarrow, delta_sharing" in message
    assert f"Set PYSPARK_PYTHON={env / 'bin' / 'python'}" in message
    same = environment.advice(["pyroaring"], str(env / "bin" / "python"), str(home))
    assert "Install table-sharing-server into that interpreter" in same
    assert environment.environment_python(None) is None
    assert os.path.isfile(
        environment.environment_python(os.path.dirname(__import__("pyspark").__file__)) or ""
    )


def test_reader_is_made_when_no_python_frame_calls_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sail (a Spark Connect server in Rust) calls reader() from native code, no Python frame beneath.

    _thread.start_new_thread calls its function from C, so reader() is the bottom frame there, as
    under Sail; before the fix sys._getframe(1) raised "call stack is not deep enough".
    """
    import _thread
    import threading

    profile = tmp_path / "profile.share"
    profile.write_text(
        json.dumps({"shareCredentialsVersion": 1, "endpoint": "http://127.0.0.1:1/x", "bearerToken": "t"})
    )
    data_source = source.DeltaSharingDataSource({"path": f"{profile}#s.d.t"})
    done = threading.Event()
    made: list[type] = []
    errors: list[BaseException | None] = []

    class Seen(source.FilteringReader):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(type(self))
            done.set()

    def unraisable(hook: Any) -> None:
        errors.append(hook.exc_value)
        done.set()

    monkeypatch.setattr(source, "FilteringReader", Seen)
    monkeypatch.setattr("sys.unraisablehook", unraisable)
    _thread.start_new_thread(data_source.reader, (source.StructType([]),))
    assert done.wait(10)
    assert errors == [] and made == [Seen]
