"""Engines not tried before, configured as their own documentation says, against both catalogs on SeaweedFS.

- **Sail 0.7** (a Spark Connect server in Rust, `pysail`): the writers' catalog `/_iceberg` as an
  `iceberg-rest` catalog of `SAIL_CATALOG__LIST` with a bearer token, S3 through the AWS
  environment variables; PySpark's Connect client drives it.
- **ClickHouse 26.9** in process (`chdb` 4.4): `/iceberg` as a `DataLakeCatalog` database
  (`catalog_type = 'rest'`, the share token in `auth_header`), reading shared Delta tables, whose
  generated metadata ClickHouse finds relative to the table's `location`.
- **polars 2.1** (`polars[iceberg]`) and **daft 0.7**: `scan_iceberg` / `read_iceberg` of a table
  pyiceberg loaded from `/iceberg`, S3 read with the keys the server vends.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import pandas as pd
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.model import TableSpec
from testbed.seaweed import READER_ROLE_ARN, SeaweedS3, free_port, upload_tree
from tests.conftest import Deployment, deploy
from tests.end_to_end.test_client_local import canonical
from tests.end_to_end.test_warehouse_catalog import catalog_root, signed
from tests.end_to_end.test_warehouse_engines import catalog_token

WAREHOUSE = "engines"
DELTA_BUCKET = "enginesdelta"
DELTA_TABLES = {"plain": "simple_table", "parted": "delta-0.8.0-partitioned", "dv": "table-with-dv-small"}
SHARE = "engines"
#: An Iceberg table pyiceberg writes through `/_iceberg` (its Parquet files carry field ids), shared.
ICEBERG_SHARE = "engines_ice"
SAIL = Path(sys.executable).with_name("sail")


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3, testdata: Path
) -> Iterator[Deployment]:
    """One server for every engine of the module: the writers' catalog and a share of Delta tables, with
    vending on (recipients' engines read S3 with the keys it vends, as none of them signs remotely)."""
    client = seaweed.client()
    client.create_bucket(Bucket=DELTA_BUCKET)
    for directory in DELTA_TABLES.values():
        upload_tree(client, testdata / directory, DELTA_BUCKET, directory)
    env = {
        "SHARING_ICEBERG_CREDENTIAL_VENDING": "sts",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": READER_ROLE_ARN,
    }
    deployment = deploy(tmp_path_factory.mktemp("engines"), seaweed.storage_config(), env=env)
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    specs = [TableSpec.parse(f"db:{name}:delta:{DELTA_BUCKET}:{path}") for name, path in DELTA_TABLES.items()]
    deployment.store.create_share(SHARE, specs)
    yield deployment
    deployment.server.stop()
    deployment.store.close()


@pytest.fixture(scope="module")
def writer(server: Deployment) -> IssuedUser:
    user = CatalogUsers(server.store.transactions, server.secret).create(f"engines-{uuid.uuid4().hex[:6]}")
    response = signed(
        user, "POST", f"{catalog_root(server)}/v1/warehouses", json.dumps({"name": WAREHOUSE}).encode()
    )
    assert response.status_code in (200, 409), response.text
    return user


def wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"sail exited: {log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"sail did not listen in 60 s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def sail(server: Deployment, writer: IssuedUser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Sail server whose catalog is `/_iceberg`, as Sail's catalog guide configures one; its `sc://` URL."""
    seaweed: SeaweedS3 = server.seaweed  # type: ignore[attr-defined]
    port = free_port()
    catalog = (
        f'[{{type="iceberg-rest", name="shared", uri="{catalog_root(server)}", warehouse="{WAREHOUSE}", '
        f'bearer_access_token="{catalog_token(server, writer)}"}}]'
    )
    env = os.environ | {
        "SAIL_CATALOG__LIST": catalog,
        "SAIL_CATALOG__DEFAULT_CATALOG": "shared",
        "AWS_ACCESS_KEY_ID": seaweed.access_key,
        "AWS_SECRET_ACCESS_KEY": seaweed.secret_key,
        "AWS_REGION": seaweed.region,
        "AWS_ENDPOINT_URL": seaweed.endpoint,
        "AWS_ENDPOINT": seaweed.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }
    workdir = tmp_path_factory.mktemp("sail")
    log_path = workdir / "sail.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(SAIL), "spark", "server", "--port", str(port), "-C", str(workdir)],
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        wait_listening(port, process, log_path)
        yield f"sc://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def test_sail_creates_writes_and_reads_a_table_with_no_location(
    sail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import SparkSession

    # A Connect session sets SPARK_CONNECT_MODE_ENABLED in this process's environment, after which
    # every classic session of the later Spark tests asks for a Connect URL: undone at teardown.
    monkeypatch.setenv("SPARK_CONNECT_MODE_ENABLED", "1")
    spark = SparkSession.builder.remote(sail).getOrCreate()
    try:
        namespace = f"ns_{uuid.uuid4().hex[:8]}"
        spark.sql(f"CREATE DATABASE {namespace}")
        spark.sql(f"CREATE TABLE {namespace}.t (id BIGINT, name STRING) USING iceberg")
        spark.sql(f"INSERT INTO {namespace}.t VALUES (1, 'a'), (2, 'b')")
        rows = spark.sql(f"SELECT * FROM {namespace}.t ORDER BY id").collect()
    finally:
        spark.stop()  # the Connect client's threads would otherwise keep pytest from exiting
    assert [tuple(row) for row in rows] == [(1, "a"), (2, "b")]


def test_a_relative_create_location_gets_a_folder_of_the_servers_choosing_and_named_ones_are_still_checked(
    server: Deployment, writer: IssuedUser
) -> None:
    namespace = f"loc_{uuid.uuid4().hex[:8]}"
    with server.catalog_api(catalog_token(server, writer)) as api:
        assert api.post(f"/{WAREHOUSE}/namespaces", json={"namespace": [namespace]}).status_code == 200
        schema = {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False}]}  # fmt: skip
        tables = f"/{WAREHOUSE}/namespaces/{namespace}/tables"
        made = api.post(tables, json={"name": "sail", "schema": schema, "location": "spark-warehouse/t-1"})
        assert made.status_code == 200, made.text
        location = made.json()["metadata"]["location"]
        assert location.startswith(f"s3://{WAREHOUSE}/{namespace}/sail-"), location
        for hostile in ("s3://other-bucket/x", "../x", "spark-warehouse/../x", "file:///etc", "/etc/x"):
            refused = api.post(tables, json={"name": "t", "schema": schema, "location": hostile})
            assert refused.status_code == 400, (hostile, refused.text)
            assert refused.json()["error"]["type"] == "BadRequestException"
        assert api.get(f"{tables}/t").status_code == 404


# -- recipients: /iceberg ------------------------------------------------------------------------


def catalog_uri(server: Deployment) -> str:
    return f"{server.server.url}/iceberg"


def shared_frame(server: Deployment, share: str, schema: str, table: str) -> pd.DataFrame:
    """The table as the Delta Sharing path reads it: what every engine must read too."""
    url = f"{server.profile(share)}#{share}.{schema}.{table}"
    return delta_sharing.load_as_pandas(url, use_delta_format=True)


def as_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return canonical(frame[sorted(frame.columns)])


@pytest.fixture(scope="module")
def iceberg_share(server: Deployment, writer: IssuedUser) -> str:
    """`shared.t` in the writers' warehouse, written by pyiceberg (with the store's keys) and shared."""
    seaweed: SeaweedS3 = server.seaweed  # type: ignore[attr-defined]
    keys = {
        "s3.endpoint": seaweed.endpoint,
        "s3.access-key-id": seaweed.access_key,
        "s3.secret-access-key": seaweed.secret_key,
        "s3.region": seaweed.region,
    }
    token = catalog_token(server, writer)
    catalog = RestCatalog("writer", uri=catalog_root(server), warehouse=WAREHOUSE, token=token, **keys)
    catalog.create_namespace("shared")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None]})
    catalog.create_table("shared.t", rows.schema).append(rows)
    spec = TableSpec.parse(f"shared:t:uniform:{WAREHOUSE}:shared:t")
    server.store.create_share(ICEBERG_SHARE, [spec])
    return ICEBERG_SHARE


def recipient(server: Deployment, share: str) -> RestCatalog:
    """pyiceberg as a recipient sets it up: the address and the token (it asks for vended keys)."""
    return RestCatalog(share, uri=catalog_uri(server), token=server.token(share))


@pytest.fixture(scope="module")
def clickhouse(server: Deployment) -> Iterator[object]:
    """chdb with `/iceberg` attached as ClickHouse's REST-catalog guide does, with the store's keys.

    Not with vended keys: ClickHouse 26.9 then compares the table's location in its endpoint form
    (`/bucket/path/`) with the metadata's (`bucket/path/...`), finds no prefix, and reads
    `<path>/<bucket>/<path>/metadata/...` (404) for every table, Iceberg ones too: its own bug,
    fixed in ClickHouse's later `TableMetadata::getMetadataLocation`.
    """
    from chdb import session

    seaweed: SeaweedS3 = server.seaweed  # type: ignore[attr-defined]
    clickhouse = session.Session()
    clickhouse.query("SET allow_experimental_database_iceberg = 1")
    clickhouse.query(
        f"CREATE DATABASE shared ENGINE = DataLakeCatalog('{catalog_uri(server)}/v1', "
        f"'{seaweed.access_key}', '{seaweed.secret_key}') SETTINGS catalog_type = 'rest', "
        f"warehouse = '{SHARE}', auth_header = 'Authorization: Bearer {server.token(SHARE)}', "
        f"storage_endpoint = '{seaweed.endpoint}', vended_credentials = false"
    )
    yield clickhouse
    clickhouse.close()


@pytest.mark.parametrize("name", DELTA_TABLES)
def test_clickhouse_reads_shared_delta_tables(server: Deployment, clickhouse: Any, name: str) -> None:
    through_clickhouse = clickhouse.query(f"SELECT * FROM shared.`db.{name}`", "DataFrame")
    shared = shared_frame(server, SHARE, "db", name)
    assert len(through_clickhouse) == len(shared) > 0
    assert as_rows(through_clickhouse).equals(as_rows(shared))


def test_a_delta_tables_generated_metadata_lies_under_its_location(server: Deployment) -> None:
    """What ClickHouse relies on: the metadata file is `<location>/metadata/...`, and the data files,
    named whole, stay in the provider's Delta table (nothing is written into it)."""
    table = recipient(server, SHARE).load_table("db.plain")
    location = table.metadata.location
    assert table.metadata_location.startswith(f"{location}/metadata/")
    assert location.startswith(f"s3://{DELTA_BUCKET}/.delta-sharing-cache/iceberg/")
    files = [task.file.file_path for task in table.scan().plan_files()]
    assert files and all(path.startswith(f"s3://{DELTA_BUCKET}/simple_table/") for path in files)


@pytest.mark.parametrize("name", DELTA_TABLES)
def test_polars_scans_shared_delta_tables(server: Deployment, name: str) -> None:
    import polars as pl

    table = recipient(server, SHARE).load_table(f"db.{name}")
    through_polars = pl.scan_iceberg(table).collect().to_pandas()
    shared = shared_frame(server, SHARE, "db", name)
    assert len(through_polars) == len(shared) > 0
    assert as_rows(through_polars).equals(as_rows(shared))


def test_polars_and_daft_read_a_shared_iceberg_table(server: Deployment, iceberg_share: str) -> None:
    import daft
    import polars as pl

    table = recipient(server, iceberg_share).load_table("shared.t")
    shared = as_rows(shared_frame(server, iceberg_share, "shared", "t"))
    through_polars = pl.scan_iceberg(table).collect().to_pandas()
    through_daft = daft.read_iceberg(table).to_pandas()
    assert len(shared) == 3
    assert as_rows(through_polars).equals(shared)
    assert as_rows(through_daft).equals(shared)
