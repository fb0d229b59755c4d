"""Pure snapshot → protocol action mapping (both formats), tested without a server."""

from __future__ import annotations

import json

import pytest

from share_store.delta.deletion_vectors import dv_relative_path, dv_storage_path, z85_decode
from share_store.delta.file_keys import file_key
from share_store.errors import UnsupportedOperation
from share_store.tables import actions
from share_store.tables.compiled_hints import matches_hint
from share_store.tables.snapshot import TableSnapshot

SCHEMA = {
    "type": "struct",
    "fields": [
        {
            "name": "id",
            "type": "long",
            "nullable": True,
            "metadata": {"comment": "key", "delta.identity.highWaterMark": 3},
        },
        {"name": "p", "type": "date", "nullable": True, "metadata": {}},
    ],
}
ADD_A = {
    "path": "p=2024-01-01/a.parquet",
    "partitionValues": {"p": "2024-01-01"},
    "size": 10,
    "modificationTime": 1,
    "dataChange": True,
    "tags": {"INSERTION_TIME": "1"},
    "stats": '{"numRecords":3,"minValues":{"id":1},"maxValues":{"id":9},"nullCount":{"id":0}}',
}
ADD_B = {
    "path": "p=__HIVE_DEFAULT_PARTITION__/b%20c.parquet",
    "partitionValues": {"p": None},
    "size": 20,
    "modificationTime": 2,
    "dataChange": True,
}
DV = {
    "storageType": "u",
    "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
    "offset": 4,
    "sizeInBytes": 40,
    "cardinality": 6,
}


def snapshot(
    configuration: dict | None = None, protocol: dict | None = None, adds: list | None = None
) -> TableSnapshot:
    metadata = {
        "id": "m-id",
        "name": "orders",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(SCHEMA),
        "partitionColumns": ["p"],
        "configuration": configuration or {},
        "createdTime": 0,
    }
    return TableSnapshot(
        7,
        protocol or {"minReaderVersion": 1, "minWriterVersion": 2},
        metadata,
        adds if adds is not None else [ADD_A, ADD_B],
    )


def test_parquet_metadata_line() -> None:
    snap = snapshot({"delta.enableChangeDataFeed": "true"})
    meta = actions.parquet_metadata(snap, history_shared=True)["metaData"]
    assert meta["id"] == "m-id" and meta["name"] == "orders" and "description" not in meta
    assert meta["format"] == {"provider": "parquet"}
    assert meta["configuration"] == {"enableChangeDataFeed": "true"}
    assert meta["size"] == 30 and meta["numFiles"] == 2
    assert json.loads(meta["schemaString"])["fields"][0]["metadata"] == {"comment": "key"}
    assert actions.parquet_metadata(snap, False)["metaData"]["configuration"] == {}
    assert actions.parquet_metadata(snap, True, version=3)["metaData"]["version"] == 3


def test_parquet_file_lines() -> None:
    first, second = list(actions.entries(snapshot()))
    assert first.partition_values == {"p": "2024-01-01"} and second.partition_values == {"p": None}
    assert first.num_records == 3 and second.num_records is None
    line = actions.parquet_file(first, "https://x", 123)["file"]
    assert line == {
        "url": "https://x",
        "id": actions.file_id(first.path),
        "partitionValues": {"p": "2024-01-01"},
        "size": 10,
        "stats": ADD_A["stats"],
        "expirationTimestamp": 123,
    }
    change = actions.parquet_file(second, "u", 1, version=7, timestamp=99, kind="remove")
    assert change == {
        "remove": {
            "url": "u",
            "id": actions.file_id(second.path),
            "partitionValues": {"p": None},
            "size": 20,
            "version": 7,
            "timestamp": 99,
            "expirationTimestamp": 1,
        }
    }
    assert len(actions.file_id("a", "delta")) == 64


def test_delta_protocol_metadata_and_file() -> None:
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
    snap = snapshot(protocol=protocol)
    assert actions.delta_protocol(snap) == {"protocol": {"deltaProtocol": protocol}}
    assert actions.delta_protocol(snapshot()) == {
        "protocol": {"deltaProtocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    }
    meta = actions.delta_metadata(snap, version=4)["metaData"]
    assert meta["deltaMetadata"]["schemaString"] == json.dumps(SCHEMA)  # raw, column mapping included
    assert (meta["version"], meta["size"], meta["numFiles"]) == (4, 30, 2)
    with_dv = ADD_A | {"deletionVector": DV}
    line = actions.delta_file("add", with_dv, "https://data", 5, dv_url="https://dv", version=2, timestamp=9)[
        "file"
    ]
    add = line["deltaSingleAction"]["add"]
    assert add["path"] == "https://data" and "tags" not in add and add["stats"] == ADD_A["stats"]
    assert add["deletionVector"] == DV | {"storageType": "p", "pathOrInlineDv": "https://dv"}
    assert line["deletionVectorFileId"] == actions.file_id(DV["pathOrInlineDv"], "delta")
    assert (line["id"], line["version"], line["timestamp"], line["expirationTimestamp"]) == (
        actions.file_id(ADD_A["path"], "delta"),
        2,
        9,
        5,
    )
    inline = {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    kept = actions.delta_file("add", ADD_A | {"deletionVector": inline}, "u", 1)["file"]
    assert kept["deltaSingleAction"]["add"]["deletionVector"] == inline and "deletionVectorFileId" not in kept
    with pytest.raises(UnsupportedOperation, match="without size"):
        actions.delta_file("remove", {"path": "x", "dataChange": True}, "u", 1)


def test_deletion_vector_paths() -> None:
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert dv_relative_path(DV) == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert dv_storage_path({"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA"}) == (
        "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    )
    assert dv_storage_path({"storageType": "i", "pathOrInlineDv": "x"}) is None
    with pytest.raises(UnsupportedOperation):
        dv_storage_path({"storageType": "p", "pathOrInlineDv": "s3://elsewhere/dv.bin"})


def test_object_keys_are_url_decoded_and_stay_inside_the_table() -> None:
    assert file_key("t/path", "p=x/b%20c.parquet") == "t/path/p=x/b c.parquet"
    assert file_key("t", "x=A%252FA/f.parquet") == "t/x=A%2FA/f.parquet"
    for outside in (
        "s3://other/bucket/f.parquet",
        "/etc/passwd",
        "file:///etc/passwd",
        "../x.parquet",
        "a/%2E%2E/%2E%2E/x.parquet",
        "..",
        "a/..",
        "./a.parquet",
        "a/./b.parquet",
        "a/.",
    ):
        with pytest.raises(UnsupportedOperation):
            file_key("t", outside)
    for inside in ("..a/b.parquet", "a../b.parquet", ".hidden/x.parquet", "a/b.", "a/..b"):
        assert file_key("t", inside) == f"t/{inside}"


@pytest.mark.parametrize(
    ("configuration", "protocol", "reason"),
    [
        (
            {"delta.columnMapping.mode": "name"},
            {"minReaderVersion": 2, "minWriterVersion": 5},
            "columnMapping",
        ),
        (
            {"delta.enableDeletionVectors": "true"},
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]},
            "deletion vectors",
        ),
        (
            {},
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["variantType"]},
            "variantType",
        ),
    ],
)
def test_parquet_refuses_tables_it_cannot_describe(configuration: dict, protocol: dict, reason: str) -> None:
    with pytest.raises(UnsupportedOperation, match=reason):
        actions.check_parquet_readable(snapshot(configuration, protocol))
    actions.check_parquet_readable(snapshot())
    v2 = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"]}
    actions.check_parquet_readable(snapshot(protocol=v2))  # log layout only


def test_delta_format_requires_announced_reader_features() -> None:
    dv_table = snapshot(
        {"delta.enableDeletionVectors": "true"},
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]},
    )
    with pytest.raises(UnsupportedOperation, match="deletionVectors"):
        actions.check_delta_readable(dv_table, frozenset())
    actions.check_delta_readable(dv_table, frozenset({"deletionvectors"}))
    mapped = snapshot({"delta.columnMapping.mode": "id"}, {"minReaderVersion": 2, "minWriterVersion": 5})
    with pytest.raises(UnsupportedOperation, match="columnMapping"):
        actions.check_delta_readable(mapped, frozenset({"deletionvectors"}))
    v2 = snapshot(protocol={"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"]})
    actions.check_delta_readable(v2, frozenset())


def test_hints_use_physical_names_under_column_mapping() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {
                "name": "Id",
                "type": "long",
                "nullable": True,
                "metadata": {"delta.columnMapping.physicalName": "col-1a2b"},
            }
        ],
    }
    add = {
        "path": "f",
        "size": 1,
        "partitionValues": {},
        "stats": '{"numRecords":2,"minValues":{"col-1a2b":5},"maxValues":{"col-1a2b":8}}',
    }
    snap = TableSnapshot(
        0,
        {"minReaderVersion": 2, "minWriterVersion": 5},
        {
            "id": "x",
            "schemaString": json.dumps(schema),
            "partitionColumns": [],
            "configuration": {"delta.columnMapping.mode": "name"},
        },
        [add],
    )
    names = actions.physical_names(snap)
    assert names == {"Id": "col-1a2b"}
    tree = {
        "op": "greaterThan",
        "children": [
            {"op": "column", "name": "Id", "valueType": "long"},
            {"op": "literal", "value": "10", "valueType": "long"},
        ],
    }
    assert not matches_hint(tree, next(actions.entries(snap)), names)
    assert matches_hint(tree, next(actions.entries(snap)), {})  # unknown column: kept


def _sized(version: int, files: int) -> TableSnapshot:
    return TableSnapshot(version, {}, {}, [{"path": str(i)} for i in range(files)])


def test_snapshot_cache_is_bounded_by_count_per_table_and_files() -> None:
    from share_store.tables.snapshot_cache import SnapshotCache

    cache = SnapshotCache(max_files=10, per_table=3).table()
    for version in range(4):
        cache.put(_sized(version, 2))
    assert cache.get(0) is None and cache.get(3) is not None  # at most three
    cache.put(_sized(9, 9))
    assert cache.get(9) is not None and cache.get(3) is None  # 9 + 2 files > 10: older ones go
    cache.put(_sized(10, 50))
    assert cache.get(10) is not None  # one oversized snapshot is still kept


def test_empty_feature_lists_are_served_as_empty_lists() -> None:
    """delta-kernel refuses reader version 3 without `readerFeatures`, even an empty one."""
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": []}
    body = actions.delta_protocol(snapshot(protocol=protocol))["protocol"]["deltaProtocol"]
    assert body == protocol
    plain = actions.delta_protocol(snapshot())["protocol"]["deltaProtocol"]
    assert "readerFeatures" not in plain and "writerFeatures" not in plain


@pytest.mark.parametrize(
    ("protocol", "named"),
    [
        ({"minReaderVersion": 99, "minWriterVersion": 7}, "reader version 99"),
        ({"minReaderVersion": 4, "minWriterVersion": 7, "readerFeatures": []}, "reader version 4"),
        (
            {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors", "teleport"]},
            "teleport",
        ),
    ],
)
def test_a_protocol_the_server_does_not_understand_is_refused_in_both_formats(
    protocol: dict, named: str
) -> None:
    table = snapshot(protocol=protocol)
    with pytest.raises(UnsupportedOperation, match=named):
        actions.check_parquet_readable(table)
    everything = frozenset({"deletionvectors", "columnmapping", "teleport"})
    with pytest.raises(UnsupportedOperation, match=named):
        actions.check_delta_readable(table, everything)


def test_snapshot_cache_bounds_all_tables_together_least_recently_used_first() -> None:
    from share_store.tables.snapshot_cache import SnapshotCache

    shared = SnapshotCache(max_files=10)
    tables = [shared.table() for _ in range(5)]
    for table in tables[:4]:
        table.put(_sized(0, 3))  # 12 files in all: the first table's snapshot goes
    assert shared.files == 9 and len(shared) == 3
    assert tables[0].get(0) is None
    assert tables[1].get(0) is not None  # used now: the third table's goes next
    tables[4].put(_sized(0, 3))
    assert tables[2].get(0) is None and tables[1].get(0) is not None
    assert shared.files <= 10
    # A table's view holds its own versions only.
    assert 0 in tables[1] and 1 not in tables[1]


def test_a_files_check_is_trusted_for_its_seconds_only() -> None:
    from share_store.tables.snapshot_cache import CheckedVersions

    always = CheckedVersions(seconds=0)
    always.mark(1)
    assert not always.fresh(1)  # 0 s: every answer checks again
    hour = CheckedVersions(seconds=3600)
    assert not hour.fresh(1)
    hour.mark(1)
    assert hour.fresh(1) and not hour.fresh(2)


def test_a_long_files_check_is_trusted_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trusted for 20 times what it took, when that is longer than the setting (never with 0 s)."""
    from share_store.tables import snapshot_cache as snapshot
    from share_store.tables.snapshot_cache import CheckedVersions

    clock = [1000.0]
    monkeypatch.setattr(snapshot.time, "monotonic", lambda: clock[0])
    checked = CheckedVersions(seconds=5)
    checked.mark("quick", took=0.1)
    checked.mark("slow", took=2.0)
    clock[0] += 6
    assert not checked.fresh("quick") and checked.fresh("slow")
    clock[0] += 33  # 39 s after: still within the 40 s a 2 s check earns
    assert checked.fresh("slow")
    clock[0] += 2
    assert not checked.fresh("slow")
    always = CheckedVersions(seconds=0)
    always.mark("slow", took=2.0)
    assert not always.fresh("slow")
