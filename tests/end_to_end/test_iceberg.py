"""Iceberg tables over Delta Sharing, read by the real client, checked against pyiceberg scans."""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from decimal import Decimal

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
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

from share_store.model import TableSpec
from share_store.tables.commit_times import format_ms
from tests.conftest import Deployment
from tests.end_to_end.test_client_local import canonical

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "amount", IntegerType(), doc="order amount"),
)


def rows(start: int, count: int, regions: tuple[str, ...] = ("eu", "us")) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([regions[i % len(regions)] for i in ids]),
            "amount": pa.array([i * 10 for i in ids], pa.int32()),
        }
    )


@pytest.fixture(scope="module")
def catalog(local: Deployment):
    catalog = local.catalogs.catalog("default")
    catalog.create_namespace("sales")
    return catalog


@pytest.fixture(scope="module")
def orders(catalog):
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    table = catalog.create_table("sales.orders", SCHEMA, partition_spec=spec)
    arrow = table.schema().as_arrow()
    table.append(rows(0, 6).cast(arrow))
    time.sleep(0.01)
    table.append(rows(6, 4, ("eu", "us", "apac")).cast(arrow))
    time.sleep(0.01)
    table.delete("id = 1")  # copy-on-write: a file removed, a file added
    return catalog.load_table("sales.orders")


@pytest.fixture(scope="module")
def profile(local: Deployment, orders) -> str:
    local.store.create_share("ice", [TableSpec.parse("sales:orders:uniform:default:sales:orders")])
    return local.profile("ice")


def scan(table, snapshot_id: int | None = None) -> pd.DataFrame:
    return table.scan(snapshot_id=snapshot_id).to_arrow().to_pandas()


def same(shared: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert sorted(shared.columns) == sorted(expected.columns)
    pd.testing.assert_frame_equal(
        canonical(shared[sorted(shared.columns)]), canonical(expected[sorted(expected.columns)])
    )


@pytest.mark.parametrize("use_delta_format", [False, True])
def test_latest_snapshot(orders, profile: str, use_delta_format: bool) -> None:
    shared = delta_sharing.load_as_pandas(f"{profile}#ice.sales.orders", use_delta_format=use_delta_format)
    same(shared, scan(orders))
    assert 1 not in set(shared["id"])


def test_versions_are_dense_and_time_travel_works(local: Deployment, orders, profile: str) -> None:
    snapshots = [s for s in orders.snapshots()]
    assert len(snapshots) == 3
    api = httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token('ice')}"})
    assert api.get("/shares/ice/schemas/sales/tables/orders/version").headers["delta-table-version"] == "2"
    for version, snapshot in enumerate(snapshots):
        for use_delta_format in (False, True):
            by_version = delta_sharing.load_as_pandas(
                f"{profile}#ice.sales.orders", version=version, use_delta_format=use_delta_format
            )
            same(by_version, scan(orders, snapshot.snapshot_id))
        by_time = delta_sharing.load_as_pandas(
            f"{profile}#ice.sales.orders", timestamp=format_ms(snapshot.timestamp_ms)
        )
        same(by_time, scan(orders, snapshot.snapshot_id))
    starting = api.get(
        "/shares/ice/schemas/sales/tables/orders/version",
        params={"startingTimestamp": format_ms(snapshots[1].timestamp_ms)},
    )
    assert starting.headers["delta-table-version"] == "1"


def test_metadata_partitions_and_stats(local: Deployment, profile: str) -> None:
    api = httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token('ice')}"})
    response = api.post("/shares/ice/schemas/sales/tables/orders/query", json={})
    lines = [json.loads(line) for line in response.text.splitlines()]
    meta = lines[1]["metaData"]
    assert meta["partitionColumns"] == ["region"]
    fields = json.loads(meta["schemaString"])["fields"]
    assert [(f["name"], f["type"], f["nullable"]) for f in fields] == [
        ("id", "long", False),
        ("region", "string", True),
        ("amount", "integer", True),
    ]
    assert fields[2]["metadata"] == {"comment": "order amount"}
    for line in lines[2:]:
        file = line["file"]
        assert file["partitionValues"]["region"] in ("eu", "us", "apac")
        stats = json.loads(file["stats"])
        assert stats["numRecords"] >= 1 and stats["minValues"]["id"] <= stats["maxValues"]["id"]
    hint = {
        "op": "equal",
        "children": [
            {"op": "column", "name": "region", "valueType": "string"},
            {"op": "literal", "value": "apac", "valueType": "string"},
        ],
    }
    pruned = api.post(
        "/shares/ice/schemas/sales/tables/orders/query", json={"jsonPredicateHints": json.dumps(hint)}
    )
    files = [json.loads(line)["file"] for line in pruned.text.splitlines()[2:]]
    assert files and all(f["partitionValues"]["region"] == "apac" for f in files)
    delta = api.get(
        "/shares/ice/schemas/sales/tables/orders/metadata",
        headers={"delta-sharing-capabilities": "responseformat=delta;readerfeatures=columnmapping"},
    )
    protocol, metadata = (json.loads(line) for line in delta.text.splitlines())
    # Never renamed: a plain table, no column mapping needed.
    assert protocol["protocol"]["deltaProtocol"] == {"minReaderVersion": 1, "minWriterVersion": 4}
    assert "delta.columnMapping.mode" not in metadata["metaData"]["deltaMetadata"]["configuration"]


@pytest.mark.parametrize("use_delta_format", [False, True])
def test_changes_are_snapshot_differences(orders, profile: str, use_delta_format: bool) -> None:
    changes = delta_sharing.load_table_changes_as_pandas(
        f"{profile}#ice.sales.orders", starting_version=0, use_delta_format=use_delta_format
    )
    snapshots = orders.snapshots()
    for version in range(3):
        before = scan(orders, snapshots[version - 1].snapshot_id) if version else scan(orders).iloc[0:0]
        after = scan(orders, snapshots[version].snapshot_id)
        of_version = changes[changes["_commit_version"] == version]
        inserted = of_version[of_version["_change_type"] == "insert"][list(after.columns)]
        deleted = of_version[of_version["_change_type"] == "delete"][list(after.columns)]
        # Applying the version's changes to the previous snapshot gives the next one.
        remaining = pd.concat([before, deleted]).drop_duplicates(keep=False)
        same(pd.concat([remaining, inserted]), after)


def test_schema_evolution(local: Deployment, catalog) -> None:
    table = catalog.create_table(
        "sales.evolving",
        Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "amount", IntegerType()),
            NestedField(3, "note", StringType()),
        ),
    )
    first = {"id": pa.array([1, 2], pa.int64()), "amount": pa.array([10, 20], pa.int32()), "note": ["a", "b"]}
    table.append(pa.table(first).cast(table.schema().as_arrow()))
    with table.update_schema() as update:
        update.add_column("extra", StringType())
        update.update_column("amount", LongType())
        update.rename_column("amount", "total")
        update.delete_column("note")
    table = catalog.load_table("sales.evolving")
    second = {"id": pa.array([3], pa.int64()), "total": pa.array([30], pa.int64()), "extra": ["x"]}
    table.append(pa.table(second).cast(table.schema().as_arrow()))
    local.store.update_share("ice", add=[TableSpec.parse("sales:evolving:uniform:default:sales:evolving")])
    profile = local.profile("ice")
    url = f"{profile}#ice.sales.evolving"
    shared = delta_sharing.load_as_pandas(url, use_delta_format=True)
    same(shared, scan(catalog.load_table("sales.evolving")))
    assert sorted(shared["total"]) == [10, 20, 30]  # renamed and widened, read by field id
    with pytest.raises(Exception, match="renamed or re-added"):
        delta_sharing.load_as_pandas(url, use_delta_format=False)
    old = delta_sharing.load_as_pandas(url, version=0, use_delta_format=True)
    assert sorted(old.columns) == ["amount", "id", "note"]


ALL_TYPES = Schema(
    NestedField(1, "b", BooleanType()),
    NestedField(2, "i", IntegerType()),
    NestedField(3, "l", LongType()),
    NestedField(4, "f", FloatType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "dec", DecimalType(10, 2)),
    NestedField(7, "day", DateType()),
    NestedField(9, "ts", TimestampType()),
    NestedField(10, "tstz", TimestamptzType()),
    NestedField(11, "s", StringType()),
    NestedField(14, "bin", BinaryType()),
    NestedField(
        15, "st", StructType(NestedField(16, "x", IntegerType()), NestedField(17, "y", StringType()))
    ),
    NestedField(18, "li", ListType(19, LongType(), element_required=False)),
    NestedField(20, "mp", MapType(21, StringType(), 22, IntegerType(), value_required=False)),
)
ROW = {
    "b": True,
    "i": 1,
    "l": 2,
    "f": 1.5,
    "d": 2.5,
    "dec": Decimal("12.34"),
    "day": dt.date(2024, 2, 29),
    "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    "tstz": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
    "s": "hé",
    "bin": b"\x00\x01",
    "st": {"x": 1, "y": "z"},
    "li": [1, None, 3],
    "mp": {"k": 1},
}


def check_row(row: pd.Series) -> None:
    for column in ("b", "i", "l", "f", "d", "s", "bin"):
        assert row[column] == ROW[column], column
    assert Decimal(str(row["dec"])) == Decimal("12.34")
    assert pd.Timestamp(row["day"]).date() == dt.date(2024, 2, 29)
    if "ts" in row:
        assert pd.Timestamp(row["ts"]).tz_localize(None) == pd.Timestamp("2024-01-02 03:04:05.000006")
    tstz = pd.Timestamp(row["tstz"])
    assert (tstz.tz_convert("UTC") if tstz.tzinfo else tstz.tz_localize("UTC")) == pd.Timestamp(
        "2024-01-02 03:04:05", tz="UTC"
    )
    assert dict(row["st"]) == {"x": 1, "y": "z"} and next(iter(row["li"])) == 1
    assert dict(row["mp"]) == {"k": 1} or list(row["mp"]) == [("k", 1)]


def test_every_type(local: Deployment, catalog) -> None:
    spec = PartitionSpec(
        PartitionField(7, 1001, IdentityTransform(), "day"),
        PartitionField(10, 1002, DayTransform(), "tstz_day"),
    )
    table = catalog.create_table("sales.types", ALL_TYPES, partition_spec=spec)
    table.append(pa.Table.from_pylist([ROW], schema=table.schema().as_arrow()))
    # The Python client's parquet path cannot parse timestamp_ntz (Iceberg `timestamp`), so the
    # table read in that format leaves it out; Spark's parquet path reads it.
    plain_fields = [field for field in ALL_TYPES.fields if field.name != "ts"]
    with_odd = Schema(
        *plain_fields,
        NestedField(23, "u", UUIDType()),
        NestedField(24, "fx", FixedType(4)),
        NestedField(25, "t", TimeType()),
    )
    odd = catalog.create_table("sales.odd_types", with_odd)
    odd_uuid = uuid.UUID("12345678-1234-5678-1234-567812345678").bytes
    odd_row = {k: v for k, v in ROW.items() if k != "ts"} | {
        "u": odd_uuid,
        "fx": b"abcd",
        "t": dt.time(1, 2, 3),
    }
    odd.append(pa.Table.from_pylist([odd_row], schema=odd.schema().as_arrow()))
    local.store.update_share(
        "ice",
        add=[
            TableSpec.parse("sales:types:uniform:default:sales:types"),
            TableSpec.parse("sales:odd_types:uniform:default:sales:odd_types"),
        ],
    )
    profile = local.profile("ice")
    shared = delta_sharing.load_as_pandas(f"{profile}#ice.sales.types", use_delta_format=True)
    assert len(shared) == 1
    check_row(shared.iloc[0])
    odd_shared = delta_sharing.load_as_pandas(f"{profile}#ice.sales.odd_types", use_delta_format=False)
    check_row(odd_shared.iloc[0])
    assert odd_shared.iloc[0]["fx"] == b"abcd" and odd_shared.iloc[0]["t"] == dt.time(1, 2, 3)
    with pytest.raises(Exception, match="fixed, uuid or time"):
        delta_sharing.load_as_pandas(f"{profile}#ice.sales.odd_types", use_delta_format=True)


def test_unknown_warehouse_and_table(local: Deployment, catalog) -> None:
    local.store.create_share("ice_bad", [TableSpec.parse("sales:gone:uniform:default:sales:gone")])
    api = httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token('ice_bad')}"})
    response = api.get("/shares/ice_bad/schemas/sales/tables/gone/metadata")
    assert response.status_code == 400 and "not found in warehouse 'default'" in response.json()["message"]
