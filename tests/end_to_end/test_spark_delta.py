"""The deltaSharing source on tables only the delta response format carries.

Deletion vectors, column mapping (by name and by id, nested fields), `timestamp_ntz`,
type widening: read through Spark and checked against the Python client's delta path
(delta-kernel-rs) and against a replay of the table's own log and files.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import delta_sharing
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType

from pyspark_delta_sharing.listing import list_snapshot
from pyspark_delta_sharing.source import DeltaSharingDataSource, ReadOptions
from share_store.delta.replay import LogReader
from share_store.model import TableSpec
from tests.conftest import TESTDATA_BUCKET, Deployment
from tests.dv import deleted_row_indexes
from tests.end_to_end.test_client_local import canonical, table_name
from tests.end_to_end.test_iceberg_deletes import (
    change_rows,
    deploy_tables,
    expected_changes,
    frame_rows,
    spark_rows,
    stop,
)
from tests.end_to_end.test_spark import same
from tests.handmade_delta import write_mapped, write_widened

DV_TABLES = ["table-with-dv-small", "table_with_deletion_logs"]
# Every table of the test data whose protocol needs the delta format and whose files are all there.
DELTA_TABLES = [*DV_TABLES, "table_with_column_mapping", "checkpoint-v2-table"]
REFUSED = {
    "simple_table_features": "reader version 5",  # no such Delta protocol (and a made-up feature)
    "table-with-domain-metadata": "table files missing",  # a log without its data files
}
HANDMADE_BUCKET = "handmade"


@pytest.fixture(scope="module")
def profile(local: Deployment) -> str:
    paths = [*DELTA_TABLES, *REFUSED, "simple_table", "delta-0.8.0-partitioned", "cdf-table"]
    local.share_tables("sparkdelta", {table_name(p): p for p in paths})
    return local.profile("sparkdelta")


@pytest.fixture(scope="module")
def handmade(local: Deployment) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The hand-written tables in a bucket of their own, shared, and each one's rows."""
    root = local.storage.root / HANDMADE_BUCKET
    expected = {
        "by_name": write_mapped(root / "by_name", "name"),
        "by_id": write_mapped(root / "by_id", "id"),
        "widened": write_widened(root / "widened"),
    }
    local.share_tables("handmade", {name: name for name in expected}, bucket=HANDMADE_BUCKET)
    return local.profile("handmade"), expected


def replay(local: Deployment, path: str) -> pd.DataFrame:
    """The table read from its own log and files: vectors applied, physical names mapped back."""
    root = local.storage.root / TESTDATA_BUCKET / path
    reader = LogReader(local.storage, TESTDATA_BUCKET, path)
    listing = reader.listing()
    state = reader.replay(listing, listing.latest_version)
    fields = json.loads(state.metadata["schemaString"])["fields"]
    logical = {
        (f["metadata"] or {}).get("delta.columnMapping.physicalName", f["name"]): f["name"] for f in fields
    }
    pieces = []
    for add in state.active.values():
        data = pq.read_table(root / unquote(add["path"]))
        if add.get("deletionVector"):
            deleted = deleted_row_indexes(root, add["deletionVector"])
            data = data.take([i for i in range(data.num_rows) if i not in deleted])
        data = data.rename_columns([logical.get(name, name) for name in data.column_names])
        for key, value in (add.get("partitionValues") or {}).items():
            data = data.append_column(logical.get(key, key), pa.array([value] * data.num_rows, pa.string()))
        pieces.append(data)
    return pa.concat_tables(pieces, promote_options="default").to_pandas()


def rows(frame: Any) -> list[dict[str, Any]]:
    """A Spark DataFrame's rows as plain dicts, sorted by their first column."""
    out = [row.asDict(recursive=True) for row in frame.collect()]
    return sorted(out, key=lambda row: tuple(str(v) for v in row.values()))


# -- the test data's tables ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", DELTA_TABLES)
def test_delta_tables_read_as_the_client_and_a_replay_read_them(
    spark, local: Deployment, profile: str, path: str
) -> None:
    url = f"{profile}#sparkdelta.default.{table_name(path)}"
    frame = spark.read.format("deltaSharing").load(url)
    client = delta_sharing.load_as_pandas(url, use_delta_format=True)
    replayed = replay(local, path)
    assert frame.count() == len(client) == len(replayed) > 0
    same(frame, client)
    got = frame.toPandas()
    columns = sorted(got.columns)
    pd.testing.assert_frame_equal(canonical(got[columns]), canonical(replayed[columns]))


def test_the_default_asks_for_both_formats_and_the_server_picks(local: Deployment, profile: str) -> None:
    options = ReadOptions.parse({"path": f"{profile}#sparkdelta.default.simple_table"})
    assert options.response_format == "delta,parquet"
    plain = list_snapshot(options.profile, options.table, options.response_format)
    # Listing delta first, it gets delta for a reader-version-1 table too ([server]
    # prefer_delta_format); asking parquet first, parquet.
    assert plain.response_format == "delta" and len(plain.files) > 0
    as_parquet = list_snapshot(options.profile, options.table, "parquet")
    assert as_parquet.response_format == "parquet" and len(as_parquet.files) == len(plain.files)
    with_dvs = ReadOptions.parse({"path": f"{profile}#sparkdelta.default.table_with_dv_small"})
    listing = list_snapshot(with_dvs.profile, with_dvs.table, with_dvs.response_format)
    assert listing.response_format == "delta"
    assert listing.files[0]["deletion_vector"]["storageType"] == "p"


def test_response_format_option_forces_a_format(spark, profile: str) -> None:
    dv_url = f"{profile}#sparkdelta.default.table_with_dv_small"
    with pytest.raises(Exception, match="can only be read with responseformat=delta"):
        spark.read.format("deltaSharing").option("responseFormat", "parquet").load(dv_url).collect()
    plain_url = f"{profile}#sparkdelta.default.delta_0_8_0_partitioned"
    as_delta = spark.read.format("deltaSharing").option("responseFormat", "delta").load(plain_url)
    same(as_delta, delta_sharing.load_as_pandas(plain_url))


@pytest.mark.parametrize(("path", "reason"), REFUSED.items())
def test_tables_the_server_refuses_fail_with_its_reason(spark, profile: str, path: str, reason: str) -> None:
    url = f"{profile}#sparkdelta.default.{table_name(path)}"
    with pytest.raises(Exception, match=reason):
        delta_sharing.load_as_pandas(url, use_delta_format=True)
    with pytest.raises(Exception, match=reason):
        spark.read.format("deltaSharing").load(url).collect()


# -- hand-written tables ------------------------------------------------------------------------------


@pytest.mark.parametrize("table", ["by_name", "by_id"])
def test_column_mapping_with_nested_fields_and_deletion_vectors(spark, handmade, table: str) -> None:
    """Inline vectors and two vectors in one file, mapped names down to map values and list elements.

    In `by_id` the schema's physical names are not the files' names: only field ids match.
    """
    profile, expected = handmade
    frame = spark.read.format("deltaSharing").load(f"{profile}#handmade.default.{table}")
    assert frame.schema.simpleString() == (
        "struct<id:bigint,person:struct<first name:string,tags:array<struct<k:string>>>,"
        "scores:map<string,struct<v:int>>,seen:timestamp_ntz,day:date>"
    )
    assert all(not field.metadata for field in frame.schema.fields)
    assert rows(frame) == sorted(expected[table], key=lambda row: tuple(str(v) for v in row.values()))
    assert frame.count() == len(expected[table]) == 10


def test_column_mapping_by_name_as_the_client_reads_it(spark, handmade) -> None:
    profile, expected = handmade
    url = f"{profile}#handmade.default.by_name"
    client = delta_sharing.load_as_pandas(url, use_delta_format=True)
    frame = spark.read.format("deltaSharing").load(url)
    assert sorted(client["id"]) == sorted(row["id"] for row in expected["by_name"])
    same(frame.select("id", "seen", "day"), client[["id", "seen", "day"]])


def test_projection_and_partition_columns_alone(spark, handmade) -> None:
    profile, expected = handmade
    url = f"{profile}#handmade.default.by_name"
    pruned = spark.read.format("deltaSharing").schema("day date, id long").load(url)
    assert rows(pruned) == sorted(
        ({"day": row["day"], "id": row["id"]} for row in expected["by_name"]),
        key=lambda row: (str(row["day"]), str(row["id"])),
    )
    days = spark.read.format("deltaSharing").schema("day date").load(url)
    assert days.count() == 10 and days.where("day is null").count() == 2


def test_type_widening(spark, handmade) -> None:
    profile, expected = handmade
    frame = spark.read.format("deltaSharing").load(f"{profile}#handmade.default.widened")
    assert frame.schema.simpleString() == "struct<small:bigint,ratio:double,price:decimal(9,3),p:bigint>"
    assert rows(frame) == sorted(expected["widened"], key=lambda row: tuple(str(v) for v in row.values()))


def test_filters_reach_the_server_as_hints_by_logical_name(handmade) -> None:
    """A pushed filter on a column-mapped partition column leaves out the other days' files."""
    from pyspark.sql.datasource import EqualTo

    profile, _ = handmade
    source = DeltaSharingDataSource({"path": f"{profile}#handmade.default.by_name"})
    schema = source.schema()
    everything = source.reader(schema).partitions()
    reader = source.reader(schema)
    assert reader.pushFilters([EqualTo(("day",), dt.date(2024, 1, 2))]) == [
        EqualTo(("day",), dt.date(2024, 1, 2))
    ]
    assert reader.hints is not None and '"name":"day"' in reader.hints
    pruned = reader.partitions()
    assert sum(len(p.files) for p in everything) == 4
    assert sum(len(p.files) for p in pruned) == 1


# -- Iceberg tables, served with column mapping by id -------------------------------------------------


def test_iceberg_nested_renames_and_promotions_read_by_field_id(spark, local: Deployment) -> None:
    catalog = local.catalogs.catalog("default")
    catalog.create_namespace("sparkdelta")
    table = catalog.create_table(
        "sparkdelta.evolving",
        Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(
                2, "info", StructType(NestedField(3, "a", IntegerType()), NestedField(4, "b", StringType()))
            ),
            NestedField(5, "n", IntegerType()),
        ),
    )
    first = [{"id": 1, "info": {"a": 10, "b": "x"}, "n": 100}, {"id": 2, "info": None, "n": None}]
    table.append(pa.Table.from_pylist(first, schema=table.schema().as_arrow()))
    with table.update_schema() as update:
        update.update_column("n", LongType())
        update.rename_column("n", "count")
        update.rename_column("info.a", "alpha")
        update.delete_column("info.b")
    with table.update_schema() as update:
        update.add_column(("info", "b"), StringType())  # a new field under an old name
    table = catalog.load_table("sparkdelta.evolving")
    second = [{"id": 3, "info": {"alpha": 30, "b": "new"}, "count": 2**40}]
    table.append(pa.Table.from_pylist(second, schema=table.schema().as_arrow()))
    spec = TableSpec.parse("default:evolving:uniform:default:sparkdelta:evolving")
    local.store.create_share("sparkice", [spec])
    frame = spark.read.format("deltaSharing").load(f"{local.profile('sparkice')}#sparkice.default.evolving")
    assert rows(frame) == [
        {"id": 1, "info": {"alpha": 10, "b": None}, "count": 100},
        {"id": 2, "info": None, "count": None},
        {"id": 3, "info": {"alpha": 30, "b": "new"}, "count": 2**40},
    ]


# -- Iceberg tables with row-level deletes, written by Spark 3.5 (tests/iceberg_writer.py) ------------


DELETE_TABLES = ("pos_v2", "dv_v3", "eq_v2")  # position deletes, deletion vectors, equality deletes


@pytest.fixture(scope="module")
def deletes(tmp_path_factory: pytest.TempPathFactory, written: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Spark-written tables served (their deletes as deletion vectors), and Spark's own rows."""
    expected = json.loads((written / "expected.json").read_text())
    deployment = deploy_tables(tmp_path_factory.mktemp("spark-deletes"), written, expected, DELETE_TABLES)
    yield deployment.profile("deletes"), expected
    stop(deployment)


@pytest.mark.parametrize("name", DELETE_TABLES)
def test_iceberg_row_level_deletes_read_as_spark_wrote_them(spark, deletes, name: str) -> None:
    profile, expected = deletes
    url = f"{profile}#deletes.db.{name}"
    for version in range(len(expected[name]["snapshots"])):
        frame = spark.read.format("deltaSharing").option("versionAsOf", version).load(url)
        assert frame_rows(frame.toPandas(), name) == spark_rows(expected, name, version), (name, version)


@pytest.mark.parametrize("name", DELETE_TABLES)
def test_iceberg_change_data_feed_over_deletes(spark, deletes, name: str) -> None:
    """A delete snapshot's remove (old vector) and add (new vector) read as the rows it deleted."""
    profile, expected = deletes
    url = f"{profile}#deletes.db.{name}"
    for version in range(len(expected[name]["snapshots"])):
        frame = (
            spark.read.format("deltaSharing")
            .option("readChangeFeed", "true")
            .option("startingVersion", version)
            .option("endingVersion", version)
            .load(url)
        )
        assert change_rows(frame.toPandas(), name) == expected_changes(expected, name, version), (
            name,
            version,
        )


def test_pushdown_setting_off_reads_without_pushing(spark, handmade) -> None:
    """With spark.sql.python.filterPushdown.enabled off, Spark filters alone (and the log says so)."""
    profile, expected = handmade
    url = f"{profile}#handmade.default.by_name"
    wanted = sorted(row["id"] for row in expected["by_name"] if row["day"] == dt.date(2024, 1, 2))
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        off = spark.read.format("deltaSharing").load(url).where("day = DATE'2024-01-02'")
        assert sorted(row.id for row in off.collect()) == wanted
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    on = spark.read.format("deltaSharing").load(url).where("day = DATE'2024-01-02'")
    assert sorted(row.id for row in on.collect()) == wanted == [6, 7, 8]


def test_change_data_feed_with_cdc_files_in_the_delta_format(spark, profile: str) -> None:
    url = f"{profile}#sparkdelta.default.cdf_table"
    frame = (
        spark.read.format("deltaSharing")
        .option("responseFormat", "delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .option("endingVersion", 3)
        .load(url)
    )
    expected = delta_sharing.load_table_changes_as_pandas(url, starting_version=0, ending_version=3)
    key = ["_commit_version", "_change_type", "id", "name"]
    got = frame.toPandas()
    assert got[key].sort_values(key).values.tolist() == expected[key].sort_values(key).values.tolist()
    assert len(got) == len(expected) > 0
