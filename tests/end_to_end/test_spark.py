"""`spark.read.format("deltaSharing")` through our pure-PySpark data source, on one shared Spark session."""

from __future__ import annotations

import delta_sharing
import pandas as pd
import pytest

from share_store.model import TableSpec
from share_store.tables.commit_times import format_ms
from tests.conftest import Deployment
from tests.end_to_end.test_client_local import canonical, table_name
from tests.end_to_end.test_iceberg import SCHEMA, rows


@pytest.fixture(scope="module")
def profile(local: Deployment) -> str:
    tables = {table_name(p): p for p in ("cdf-table", "simple_table", "delta-0.8.0-partitioned")}
    local.share_tables("spark_src", tables)
    catalog = local.catalogs.catalog("default")
    catalog.create_namespace_if_not_exists("spark")
    table = catalog.create_table("spark.orders", SCHEMA)
    table.append(rows(0, 7).cast(table.schema().as_arrow()))
    spec = TableSpec.parse("default:orders_ice:uniform:default:spark:orders")
    local.store.update_share("spark_src", add=[spec])
    return local.profile("spark_src")


def same(spark_frame, pandas_frame: pd.DataFrame) -> None:
    got = spark_frame.toPandas()
    assert sorted(got.columns) == sorted(pandas_frame.columns)
    columns = sorted(got.columns)
    pd.testing.assert_frame_equal(canonical(got[columns]), canonical(pandas_frame[columns]))


@pytest.mark.parametrize("name", ["cdf_table", "simple_table", "delta_0_8_0_partitioned"])
def test_read_matches_pandas(spark, profile: str, name: str) -> None:
    url = f"{profile}#spark_src.default.{name}"
    same(spark.read.format("deltaSharing").load(url), delta_sharing.load_as_pandas(url))


def test_iceberg_table(spark, local: Deployment, profile: str) -> None:
    url = f"{profile}#spark_src.default.orders_ice"
    expected = local.catalogs.catalog("default").load_table("spark.orders").scan().to_arrow().to_pandas()
    same(spark.read.format("deltasharing").load(url), expected)


def test_filters_and_partitions(spark, profile: str) -> None:
    url = f"{profile}#spark_src.default.delta_0_8_0_partitioned"
    frame = spark.read.format("deltaSharing").option("pushFilters", "true").load(url)
    pruned = frame.where("year = '2021' and month = '4'")
    expected = delta_sharing.load_as_pandas(url)
    expected = expected[(expected["year"] == "2021") & (expected["month"] == "4")]
    same(pruned, expected)
    assert pruned.count() == len(expected) > 0


def test_time_travel(spark, local: Deployment, profile: str) -> None:
    url = f"{profile}#spark_src.default.simple_table"
    for version in range(5):
        by_version = delta_sharing.load_as_spark(url, version=version)
        same(by_version, delta_sharing.load_as_pandas(url, version=version))
    table = local.store.get_table("spark_src", "default", "simple_table")
    reader = local.server.app.state.services.readers.reader(table)
    commit = reader.commits(reader.listing())[2]
    by_time = spark.read.format("deltaSharing").option("TimestampAsOf", format_ms(commit.timestamp)).load(url)
    same(by_time, delta_sharing.load_as_pandas(url, version=2))


def test_change_data_feed(spark, profile: str) -> None:
    url = f"{profile}#spark_src.default.cdf_table"
    changes = delta_sharing.load_table_changes_as_spark(url, starting_version=0, ending_version=3)
    expected = delta_sharing.load_table_changes_as_pandas(url, starting_version=0, ending_version=3)
    got = changes.toPandas()
    key = ["_commit_version", "_change_type", "id"]
    assert got[key].sort_values(key).values.tolist() == expected[key].sort_values(key).values.tolist()
    stamps = got.groupby("_commit_version")["_commit_timestamp"].first()
    assert all(pd.notna(stamps))


def test_server_errors_surface(spark, profile: str) -> None:
    with pytest.raises(Exception, match="does not exist"):
        spark.read.format("deltaSharing").load(f"{profile}#spark_src.default.nope").collect()
    with pytest.raises(Exception, match="Cannot load table version 99"):
        spark.read.format("deltaSharing").option("versionAsOf", "99").load(
            f"{profile}#spark_src.default.simple_table"
        ).collect()


def test_url_expiry_is_read_from_the_url() -> None:
    from pyspark_delta_sharing.source import url_expiration_ms

    sigv4 = (
        "https://s3/b/k?X-Amz-Algorithm=AWS4&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-Signature=x"
    )
    assert url_expiration_ms(sigv4, 0) == 1767229200000
    assert url_expiration_ms("http://h/f?X-Sharing-Expires=100&X-Amz-Signature=x", 0) == 100_000
    assert url_expiration_ms("https://h/f?sig=1", 5) == 5 + 3600_000
