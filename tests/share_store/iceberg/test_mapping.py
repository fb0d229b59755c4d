"""Pure Iceberg → Delta mapping, versions, and what happens when snapshots roll back or expire."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from share_store.iceberg.schema import delta_type, names_changed, schema_string
from share_store.iceberg.versions import EMPTY_SNAPSHOT, SnapshotVersion, new_versions, visible_versions
from share_store.model import TableSpec
from share_store.table_sources.registry import CatalogRegistry
from tests.conftest import Deployment


@pytest.mark.parametrize(
    ("iceberg", "delta"),
    [
        (BooleanType(), "boolean"),
        (IntegerType(), "integer"),
        (LongType(), "long"),
        (FloatType(), "float"),
        (DoubleType(), "double"),
        (DecimalType(38, 9), "decimal(38,9)"),
        (DateType(), "date"),
        (TimeType(), "long"),
        (TimestampType(), "timestamp_ntz"),
        (TimestamptzType(), "timestamp"),
        (StringType(), "string"),
        (UUIDType(), "binary"),
        (FixedType(8), "binary"),
        (BinaryType(), "binary"),
    ],
)
def test_primitive_types(iceberg, delta: str) -> None:
    assert delta_type(iceberg, column_mapping=False) == delta


def test_nested_types_nullability_and_docs() -> None:
    schema = Schema(
        NestedField(1, "s", StructType(NestedField(2, "a", IntegerType(), required=True)), doc="a struct"),
        NestedField(3, "l", ListType(4, StringType(), element_required=True), required=True),
        NestedField(5, "m", MapType(6, StringType(), 7, LongType(), value_required=False)),
    )
    fields = json.loads(schema_string(schema, column_mapping=False))["fields"]
    assert fields[0] == {
        "name": "s",
        "type": {
            "type": "struct",
            "fields": [{"name": "a", "type": "integer", "nullable": False, "metadata": {}}],
        },
        "nullable": True,
        "metadata": {"comment": "a struct"},
    }
    assert fields[1]["type"] == {"type": "array", "elementType": "string", "containsNull": False}
    assert fields[1]["nullable"] is False
    assert fields[2]["type"] == {
        "type": "map",
        "keyType": "string",
        "valueType": "long",
        "valueContainsNull": True,
    }
    mapped = json.loads(schema_string(schema, column_mapping=True))["fields"]
    assert mapped[0]["metadata"]["delta.columnMapping.id"] == 1
    assert mapped[0]["type"]["fields"][0]["metadata"]["delta.columnMapping.id"] == 2


def test_renames_and_readded_names_are_detected() -> None:
    v0 = Schema(NestedField(1, "id", LongType()), NestedField(2, "amount", IntegerType()), schema_id=0)
    added = Schema(*v0.fields, NestedField(3, "note", StringType()), schema_id=1)
    renamed = Schema(NestedField(1, "id", LongType()), NestedField(2, "total", LongType()), schema_id=2)
    readded = Schema(NestedField(1, "id", LongType()), NestedField(4, "amount", IntegerType()), schema_id=3)
    assert names_changed([v0, added], added) == []  # adding and widening keep names
    assert names_changed([v0, renamed], renamed) == ["total"]
    assert names_changed([v0, readded], readded) == ["amount"]


def test_versions_are_dense_and_never_renumbered() -> None:
    first = new_versions([], [(11, 100), (22, 200)], created_ms=50)
    assert first == [SnapshotVersion(0, 11, 100), SnapshotVersion(1, 22, 200)]
    later = new_versions(first, [(11, 100), (22, 200), (33, 300)], created_ms=50)
    assert later == [SnapshotVersion(2, 33, 300)]
    known = first + later
    # Snapshot 11 expired from the ancestry: nothing renumbers.
    assert new_versions(known, [(22, 200), (33, 300), (44, 400)], 50) == [SnapshotVersion(3, 44, 400)]
    assert [v.version for v in visible_versions(known, {22, 33})] == [1, 2]
    assert new_versions([], [], created_ms=50) == [SnapshotVersion(0, EMPTY_SNAPSHOT, 50)]
    after_empty = new_versions([SnapshotVersion(0, EMPTY_SNAPSHOT, 50)], [(11, 100)], 50)
    assert after_empty == [SnapshotVersion(1, 11, 100)]


def test_delete_files_are_refused_in_both_formats() -> None:
    from share_store.iceberg.mapping import snapshot_from_tasks

    class FakeTable:
        metadata = SimpleNamespace(
            snapshot_by_id=lambda _id: SimpleNamespace(timestamp_ms=5),
            last_updated_ms=5,
            schemas=[],
            properties={},
            table_uuid="u",
            last_column_id=1,
        )

        def specs(self):
            from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC

            return {0: UNPARTITIONED_PARTITION_SPEC}

        def spec(self):
            return self.specs()[0]

        def schema(self) -> Schema:
            return SCHEMA

        def name(self) -> tuple[str, ...]:
            return ("ns", "t")

    data_file = SimpleNamespace(
        spec_id=0,
        file_path="s3://b/f.parquet",
        file_size_in_bytes=10,
        record_count=2,
        partition=[],
        lower_bounds={},
        upper_bounds={},
        null_value_counts={},
    )
    task = SimpleNamespace(
        file=data_file, delete_files=[SimpleNamespace(file_path="s3://b/pos-deletes.parquet")]
    )
    snapshot = snapshot_from_tasks(FakeTable(), 0, 1, SCHEMA, [task])
    assert (
        "row-level deletes" in snapshot.refusals["parquet"]
        and "row-level deletes" in snapshot.refusals["delta"]
    )
    clean = snapshot_from_tasks(FakeTable(), 0, 1, SCHEMA, [SimpleNamespace(file=data_file, delete_files=[])])
    assert clean.refusals == {} and [add["stats"] for add in clean.adds] == ['{"numRecords":2}']


SCHEMA = Schema(NestedField(1, "id", LongType()))


def test_rollback_and_expiry_give_clear_errors(local: Deployment) -> None:
    catalog = local.catalogs.catalog("default")
    catalog.create_namespace_if_not_exists("lifecycle")
    table = catalog.create_table("lifecycle.t", SCHEMA)
    for start in (0, 10, 20):
        table.append(pa.table({"id": pa.array([start, start + 1], pa.int64())}))
    local.store.create_share("lifecycle", [TableSpec.parse("default:t:uniform:default:lifecycle:t")])
    profile = local.profile("lifecycle")
    url = f"{profile}#lifecycle.default.t"
    assert len(delta_sharing.load_as_pandas(url)) == 6  # versions 0, 1, 2 numbered
    snapshots = table.snapshots()
    table.manage_snapshots().rollback_to_snapshot(snapshots[1].snapshot_id).commit()
    api = httpx.Client(
        base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token('lifecycle')}"}
    )
    path = "/shares/lifecycle/schemas/default/tables/t"
    assert api.get(f"{path}/version").headers["delta-table-version"] == "1"
    rolled_back = api.post(f"{path}/query", json={"version": 2})
    assert rolled_back.status_code == 400 and "rolled back" in rolled_back.json()["message"]
    table = catalog.load_table("lifecycle.t")
    table.append(pa.table({"id": pa.array([30], pa.int64())}))
    assert api.get(f"{path}/version").headers["delta-table-version"] == "3"  # never reuses version 2
    table = catalog.load_table("lifecycle.t")
    table.maintenance.expire_snapshots().by_id(snapshots[0].snapshot_id).commit()
    expired = api.post(f"{path}/query", json={"version": 0})
    assert expired.status_code == 400 and "expired" in expired.json()["message"]
    assert "snapshot management" in expired.json()["message"]
    assert "The earliest version available is 1" in expired.json()["message"]
    assert sorted(delta_sharing.load_as_pandas(url, version=1)["id"]) == [0, 1, 10, 11]


def test_an_expired_versions_error_names_the_retention_that_expired_it() -> None:
    from share_store.iceberg.listing import retention

    assert "120 hours" in retention({})
    told = retention(
        {"history.expire.max-snapshot-age-ms": "7200000", "history.expire.min-snapshots-to-keep": "3"}
    )
    assert told == (
        "the table's snapshot retention: snapshots older than 2 hours expire "
        "(history.expire.max-snapshot-age-ms), keeping at least 3 (history.expire.min-snapshots-to-keep)"
    )
    assert retention({"history.expire.max-snapshot-age-ms": "soon"}).endswith(
        "its history.expire.* properties"
    )


def test_hints_become_row_filters() -> None:
    from pyiceberg.expressions import AlwaysTrue, And, EqualTo, GreaterThan, In, IsNull, Not, Or

    from share_store.iceberg.filters import PLANNED_LEAVES, row_filter

    def leaf(op: str, name: str, value: str, kind: str = "long") -> dict:
        return {
            "op": op,
            "children": [
                {"op": "column", "name": name, "valueType": kind},
                {"op": "literal", "value": value, "valueType": kind},
            ],
        }

    columns = {"id", "region", "day"}
    assert row_filter(leaf("equal", "id", "3"), columns) == EqualTo("id", 3)
    mirrored = {
        "op": "lessThan",
        "children": [
            {"op": "literal", "value": "3", "valueType": "long"},
            {"op": "column", "name": "id", "valueType": "long"},
        ],
    }
    assert row_filter(mirrored, columns) == GreaterThan("id", 3)
    both = {
        "op": "and",
        "children": [leaf("equal", "region", "eu", "string"), leaf("equal", "day", "2024-01-02", "date")],
    }
    assert row_filter(both, columns) == And(EqualTo("region", "eu"), EqualTo("day", "2024-01-02"))
    assert (
        row_filter({"op": "or", "children": [leaf("equal", "id", "1"), leaf("equal", "nope", "1")]}, columns)
        == AlwaysTrue()
    )
    # Equalities on one column under an OR are one In; other children stay ORed to it.
    assert row_filter(
        {"op": "or", "children": [leaf("equal", "id", "1"), leaf("equal", "id", "2")]}, columns
    ) == In("id", {1, 2})
    assert row_filter(
        {
            "op": "or",
            "children": [leaf("equal", "id", "1"), leaf("greaterThan", "id", "5"), leaf("equal", "id", "2")],
        },
        columns,
    ) == Or(GreaterThan("id", 5), In("id", {1, 2}))
    # Wider than pyiceberg plans with (it would walk the filter for every file, recursively): no pruning.
    wide = {"op": "or", "children": [leaf("lessThan", "id", str(i)) for i in range(PLANNED_LEAVES + 1)]}
    assert row_filter(wide, columns) == AlwaysTrue()
    wide_in = {"op": "or", "children": [leaf("equal", "id", str(i)) for i in range(5000)]}
    assert row_filter(wide_in, columns) == In("id", set(range(5000)))
    assert row_filter(
        {
            "op": "not",
            "children": [{"op": "isNull", "children": [{"op": "column", "name": "id", "valueType": "long"}]}],
        },
        columns,
    ) == Not(IsNull("id"))
    assert row_filter({"op": "not", "children": [leaf("equal", "nope", "1")]}, columns) == AlwaysTrue()
    assert row_filter(None, columns) == AlwaysTrue()


def _signed_host(registry: CatalogRegistry, warehouse: str) -> str:
    storage = registry.storage(warehouse)
    assert storage is not None
    url, _ = storage.presign("bucket", "db/t/data/file.parquet", time.time())
    return url.split("/bucket/")[0]


def test_iceberg_files_on_the_storage_store_are_signed_for_its_public_endpoint() -> None:
    """A catalog whose `s3.endpoint` is `[storage]`'s store signs for `[storage].public_endpoint`."""
    catalog = {
        "type": "rest",
        "uri": "http://127.0.0.1:19000/_iceberg",
        "s3.endpoint": "http://127.0.0.1:19000/",
        "s3.access-key-id": "key",
        "s3.secret-access-key": "secret",
    }
    other = catalog | {"s3.endpoint": "http://127.0.0.1:19001"}
    own = catalog | {"sharing.s3-public-endpoint": "https://lake.example.com"}
    registry = CatalogRegistry(
        {"same": catalog, "other": other, "own": own},
        storage_endpoints=("http://127.0.0.1:19000", "https://s3.example.com"),
    )
    assert _signed_host(registry, "same") == "https://s3.example.com"
    assert _signed_host(registry, "other") == "http://127.0.0.1:19001"  # another store: its own address
    assert _signed_host(registry, "own") == "https://lake.example.com"  # a catalog's own setting wins


def test_a_replace_snapshot_changes_no_data_and_others_do() -> None:
    """Iceberg's `replace` (compaction, rewritten delete files) is Delta's OPTIMIZE: its adds and
    removes are `dataChange: false`, so neither the change data feed nor a stream reads them."""
    from share_store.iceberg.mapping import as_data_change, snapshot_changes
    from share_store.tables.active_files import FileSet
    from share_store.tables.snapshot import TableSnapshot

    def files(*paths: str, vector: str | None = None) -> TableSnapshot:
        dv = {"deletionVector": {"pathOrInlineDv": vector}} if vector else {}
        adds = [{"path": p, "partitionValues": {}, "size": 10, "dataChange": True} | dv for p in paths]
        return TableSnapshot(version=1, protocol={}, metadata={"schemaString": "s"}, adds=FileSet(adds))

    def summary(operation: str) -> SimpleNamespace:
        return SimpleNamespace(summary=SimpleNamespace(operation=SimpleNamespace(value=operation)))

    before, after = files("a.parquet", "b.parquet", vector="dv"), files("c.parquet")
    compacted = snapshot_changes(before, after, summary("replace"), 7)
    file_actions = [body for action in compacted for kind, body in action.items() if kind != "commitInfo"]
    assert len(file_actions) == 3 and not any(body["dataChange"] for body in file_actions)
    assert compacted[0] == {"commitInfo": {"timestamp": 7, "operation": "replace"}}
    overwritten = snapshot_changes(before, after, summary("overwrite"), 7)
    assert all(body["dataChange"] for action in overwritten for body in action.values() if "path" in body)
    kept = [{"commitInfo": {"operation": "replace"}}, {"metaData": {"id": "m"}}]
    assert as_data_change(kept, "replace") == kept
