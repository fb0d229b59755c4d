"""Vended credentials on the recipients' Iceberg catalog: DuckDB and pyiceberg read with keys from STS.

The server vends keys with `[iceberg] credential_vending = "sts"`: SeaweedFS's STS
(`testbed/seaweed.py`'s IAM config) assumes the reader role with a session
policy cut to the table, and SeaweedFS enforces it. DuckDB 1.4 (extensions from
the `duckdb-ext-*` wheels) reads Delta tables and Spark-written Iceberg tables
through `/iceberg` with those keys; what it reads equals `delta_sharing.load_as_pandas`.
The keys cannot read another table, list outside the table, or write.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import delta_sharing
import httpx
import pandas as pd
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from pyiceberg.catalog.rest import RestCatalog

from share_store.model import TableSpec
from testbed.seaweed import READER_ROLE_ARN, SeaweedS3, upload_tree
from tests.conftest import Deployment, audit_lines, deploy
from tests.end_to_end.test_client_local import canonical
from tests.end_to_end.test_iceberg_deletes import frame_rows
from tests.end_to_end.test_warehouse_engines import duckdb_connection
from tests.iceberg_relocate import relocate_table, same_length_uri

DELTA_BUCKET = "vendeddelta"
SPARK_BUCKET = "vendedspark"
DELTA_TABLES = {
    "plain": "simple_table",
    "parted": "delta-0.8.0-partitioned",
    "mapped": "table_with_column_mapping",
    "dv": "table-with-dv-small",
}
SPARK_TABLES = ("pos_v2", "dv_v3")
VENDED = {"header.X-Iceberg-Access-Delegation": "vended-credentials"}
SIGNED = {"header.X-Iceberg-Access-Delegation": "remote-signing"}


@pytest.fixture(scope="module")
def vending_server(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3, testdata: Path, written: Path
) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("iceberg-vended")
    client = seaweed.client()
    for bucket in (DELTA_BUCKET, SPARK_BUCKET):
        client.create_bucket(Bucket=bucket)
    for directory in DELTA_TABLES.values():
        upload_tree(client, testdata / directory, DELTA_BUCKET, directory)
    catalogs = {
        "wh": {
            "type": "sql",
            "uri": f"sqlite:///{tmp / 'catalog.db'}",
            "warehouse": f"s3://{SPARK_BUCKET}/wh",
            "s3.endpoint": seaweed.endpoint,
            "s3.access-key-id": seaweed.access_key,
            "s3.secret-access-key": seaweed.secret_key,
            "s3.region": seaweed.region,
        }
    }
    env = {
        "SHARING_ICEBERG_CREDENTIAL_VENDING": "sts",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": READER_ROLE_ARN,
    }
    deployment = deploy(tmp, seaweed.storage_config(), catalogs, env=env)
    local = str(written / "buckets" / "spark")
    catalog = deployment.catalogs.catalog("wh")
    catalog.create_namespace("spark")
    for name in SPARK_TABLES:
        table_dir = written / "buckets" / "spark" / "db" / name
        metadata = relocate_table(
            table_dir, local, same_length_uri(local, SPARK_BUCKET), client, SPARK_BUCKET
        )
        catalog.register_table(("spark", name), metadata)
    specs = [TableSpec.parse(f"db:{name}:delta:{DELTA_BUCKET}:{path}") for name, path in DELTA_TABLES.items()]
    specs += [TableSpec.parse(f"db:{name}:uniform:wh:spark:{name}") for name in SPARK_TABLES]
    deployment.store.create_share("vended", specs)
    deployment.store.create_share("latest", specs[:1], history_shared=False)
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def catalog_uri(server: Deployment) -> str:
    return server.endpoint.removesuffix("/delta-sharing") + "/iceberg"


def recipient(server: Deployment, share: str, **properties: str) -> RestCatalog:
    return RestCatalog(share, **{"uri": catalog_uri(server), "token": server.token(share)} | properties)


def load_raw(
    server: Deployment, share: str, table: str, delegation: str = "vended-credentials"
) -> httpx.Response:
    return httpx.get(
        f"{catalog_uri(server)}/v1/namespaces/db/tables/{table}",
        headers={
            "Authorization": f"Bearer {server.token(share)}",
            "X-Iceberg-Access-Delegation": delegation,
        },
    )


def shared_frame(server: Deployment, share: str, table: str) -> pd.DataFrame:
    return delta_sharing.load_as_pandas(f"{server.profile(share)}#{share}.db.{table}", use_delta_format=True)


def as_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return canonical(frame[sorted(frame.columns)])


def store_client(keys: dict[str, str], endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=keys["s3.access-key-id"],
        aws_secret_access_key=keys["s3.secret-access-key"],
        aws_session_token=keys["s3.session-token"],
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )


def denied(call: Any) -> bool:
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"] == "AccessDenied"
    return False


# -- DuckDB ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def duck(vending_server: Deployment) -> Iterator[Any]:
    """DuckDB attached to the share's catalog with its bearer token, as a recipient sets it up."""
    connection = duckdb_connection()
    connection.execute(f"CREATE SECRET share (TYPE iceberg, TOKEN '{vending_server.token('vended')}')")
    connection.execute(
        f"ATTACH 'vended' AS shared (TYPE iceberg, ENDPOINT '{catalog_uri(vending_server)}', SECRET share, "
        "ACCESS_DELEGATION_MODE 'vended_credentials')"
    )
    yield connection
    connection.close()


@pytest.mark.parametrize("name", DELTA_TABLES)
def test_duckdb_reads_delta_tables_with_vended_keys(vending_server: Deployment, duck: Any, name: str) -> None:
    through_duckdb = duck.execute(f"SELECT * FROM shared.db.{name}").fetchdf()
    shared = shared_frame(vending_server, "vended", name)
    assert len(through_duckdb) == len(shared) > 0
    assert as_rows(through_duckdb).equals(as_rows(shared))


@pytest.mark.parametrize("name", SPARK_TABLES)
def test_duckdb_reads_spark_tables_with_deletes_with_vended_keys(
    vending_server: Deployment, duck: Any, name: str
) -> None:
    through_duckdb = duck.execute(f"SELECT * FROM shared.db.{name}").fetchdf()
    shared = shared_frame(vending_server, "vended", name)
    assert frame_rows(through_duckdb, name) == frame_rows(shared, name)


# -- pyiceberg, and remote signing beside vending ------------------------------------


@pytest.mark.parametrize("name", ["parted", "pos_v2"])
def test_pyiceberg_reads_with_vended_keys_and_with_remote_signing(
    vending_server: Deployment, name: str
) -> None:
    vended = recipient(vending_server, "vended", **VENDED).load_table(f"db.{name}")
    assert vended.io.properties["s3.session-token"]  # keys, not the signer
    assert "s3.signer" not in vended.io.properties
    assert vended.io.properties["s3.access-key-id"] != vending_server.config.storage["access_key"]
    signed = recipient(vending_server, "vended", **SIGNED).load_table(f"db.{name}")
    assert (
        signed.io.properties["s3.signer"] == "S3V4RestSigner"
        and "s3.session-token" not in signed.io.properties
    )
    for table in (vended, signed):
        through_iceberg = table.scan().to_arrow().to_pandas()
        assert as_rows(through_iceberg).equals(as_rows(shared_frame(vending_server, "vended", name)))


def test_with_vending_on_the_signer_signs_with_keys_scoped_to_the_table(
    vending_server: Deployment, seaweed: SeaweedS3
) -> None:
    """The store bounds what a recipient's signature reaches, not only the signer's checks: the
    signature is made with STS keys whose session policy is the table's prefixes."""
    parted = DELTA_TABLES["parted"]
    listed = seaweed.client().list_objects_v2(Bucket=DELTA_BUCKET, Prefix=f"{parted}/")["Contents"]
    key = next(item["Key"] for item in listed if item["Key"].endswith(".parquet"))
    uri = f"{seaweed.endpoint}/{DELTA_BUCKET}/{key}"
    answer = httpx.post(
        f"{catalog_uri(vending_server)}/v1/aws/s3/sign",
        json={"method": "GET", "region": "us-east-1", "uri": uri, "headers": {}},
        headers={"Authorization": f"Bearer {vending_server.token('vended')}"},
    )
    assert answer.status_code == 200, answer.text
    headers = {name: values[0] for name, values in answer.json()["headers"].items()}
    assert headers["x-amz-security-token"]
    assert f"Credential={seaweed.access_key}/" not in headers["Authorization"]
    got = httpx.get(answer.json()["uri"], headers=headers)
    assert got.status_code == 200 and got.content[:4] == b"PAR1"


# -- what the keys can and cannot do ------------------------------------------------------


def test_vended_keys_read_their_table_only_list_only_under_it_and_never_write(
    vending_server: Deployment, seaweed: SeaweedS3
) -> None:
    answer = load_raw(vending_server, "vended", "parted")
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    keys = answer.json()["config"]
    store = store_client(keys, seaweed.endpoint)
    parted = DELTA_TABLES["parted"]
    inside = store.list_objects_v2(Bucket=DELTA_BUCKET, Prefix=f"{parted}/")["Contents"]
    first = next(item["Key"] for item in inside if item["Key"].endswith(".parquet"))
    assert store.get_object(Bucket=DELTA_BUCKET, Key=first)["Body"].read()[:4] == b"PAR1"
    other = seaweed.client().list_objects_v2(Bucket=DELTA_BUCKET, Prefix=f"{DELTA_TABLES['plain']}/")
    other_key = next(item["Key"] for item in other["Contents"] if item["Key"].endswith(".parquet"))
    assert denied(lambda: store.get_object(Bucket=DELTA_BUCKET, Key=other_key))  # another table's file
    assert denied(lambda: store.list_objects_v2(Bucket=DELTA_BUCKET))  # the bucket's root
    assert denied(lambda: store.list_objects_v2(Bucket=DELTA_BUCKET, Prefix=f"{DELTA_TABLES['plain']}/"))
    assert denied(lambda: store.put_object(Bucket=DELTA_BUCKET, Key=f"{parted}/x.parquet", Body=b"x"))
    assert denied(lambda: store.delete_object(Bucket=DELTA_BUCKET, Key=first))
    assert denied(lambda: store.get_object(Bucket=SPARK_BUCKET, Key=first))  # another bucket


def test_without_history_keys_name_the_current_files_one_by_one(
    vending_server: Deployment, seaweed: SeaweedS3
) -> None:
    """Share `latest` has the plain table without history: its few files fit a session policy."""
    answer = load_raw(vending_server, "latest", "plain")
    assert answer.status_code == 200, answer.text
    store = store_client(answer.json()["config"], seaweed.endpoint)
    listed = seaweed.client().list_objects_v2(Bucket=DELTA_BUCKET, Prefix=f"{DELTA_TABLES['plain']}/")
    log = next(item["Key"] for item in listed["Contents"] if "_delta_log/" in item["Key"])
    assert denied(lambda: store.get_object(Bucket=DELTA_BUCKET, Key=log))  # in the table, not a current file
    records = audit_lines(vending_server, lambda r: bool(r.get("vended")) and r.get("table") == "plain")
    assert records and not any(
        line.endswith("*") and "simple_table/" in line for line in records[-1]["vended"]["scope"]
    )
