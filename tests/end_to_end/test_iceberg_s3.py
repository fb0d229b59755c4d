"""Iceberg warehouses on S3: a SQL catalog, and SeaweedFS's REST catalog reached with SigV4 (`s3tables`)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from share_store.model import TableSpec
from testbed.seaweed import SeaweedS3
from tests.conftest import Deployment, deploy
from tests.end_to_end.test_client_local import canonical

CUSTOMER = Schema(
    NestedField(1, "custkey", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "acctbal", DoubleType()),
)


def customers(start: int, count: int) -> pa.Table:
    keys = list(range(start, start + count))
    return pa.table(
        {
            "custkey": pa.array(keys, pa.int64()),
            "name": [f"Customer#{k:09d}" for k in keys],
            "acctbal": [k * 1.25 for k in keys],
        }
    )


@pytest.fixture(scope="module")
def catalog_configs(
    seaweed: SeaweedS3, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, str]]:
    seaweed.client().create_bucket(Bucket="sqlwarehouse")
    tables = seaweed.tables_client()
    tables.create_table_bucket(name="testice")
    s3 = {
        "s3.endpoint": seaweed.endpoint,
        "s3.access-key-id": seaweed.access_key,
        "s3.secret-access-key": seaweed.secret_key,
        "s3.region": seaweed.region,
    }
    sql_db = tmp_path_factory.mktemp("icesql") / "catalog.db"
    return {
        "sqlwh": {"type": "sql", "uri": f"sqlite:///{sql_db}", "warehouse": "s3://sqlwarehouse/wh"} | s3,
        # The AIStor form of the seeds, pointed at SeaweedFS: one REST catalog, many warehouses.
        "aistor": {
            "type": "rest",
            "uri": f"http://127.0.0.1:{seaweed.iceberg_port}",
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": seaweed.region,
            "client.access-key-id": "${TEST_ICEBERG_ACCESS_KEY}",
            "client.secret-access-key": "${TEST_ICEBERG_SECRET_KEY}",
            "client.region": seaweed.region,
            "s3.endpoint": seaweed.endpoint,
            "s3.path-style-access": "true",
            "sharing.warehouses": "*",
            "sharing.warehouse-template": "s3://{}/",
        },
    }


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, seaweed: SeaweedS3, catalog_configs, monkeypatch_module) -> Deployment:
    monkeypatch_module.setenv("TEST_ICEBERG_ACCESS_KEY", seaweed.access_key)
    monkeypatch_module.setenv("TEST_ICEBERG_SECRET_KEY", seaweed.secret_key)
    result = deploy(tmp_path_factory.mktemp("ices3"), seaweed.storage_config(), catalog_configs)
    yield result
    result.server.stop()
    result.store.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def shared_equals_scan(profile: str, url: str, table) -> None:
    expected = table.scan().to_arrow().to_pandas()
    for use_delta_format in (False, True):
        shared = delta_sharing.load_as_pandas(f"{profile}#{url}", use_delta_format=use_delta_format)
        assert sorted(shared.columns) == sorted(expected.columns)
        assert canonical(shared[sorted(shared.columns)]).equals(canonical(expected[sorted(expected.columns)]))


def test_sql_catalog_with_s3_warehouse(deployment: Deployment) -> None:
    catalog = deployment.catalogs.catalog("sqlwh")
    catalog.create_namespace("tpch")
    table = catalog.create_table("tpch.customer", CUSTOMER)
    table.append(customers(1, 5).cast(table.schema().as_arrow()))
    table.append(customers(6, 3).cast(table.schema().as_arrow()))
    deployment.store.create_share("ices3", [TableSpec.parse("tpch:customer:uniform:sqlwh:tpch:customer")])
    profile = deployment.profile("ices3")
    shared_equals_scan(profile, "ices3.tpch.customer", catalog.load_table("tpch.customer"))
    v0 = delta_sharing.load_as_pandas(f"{profile}#ices3.tpch.customer", version=0)
    assert sorted(v0["custkey"]) == [1, 2, 3, 4, 5]


def test_rest_catalog_with_sigv4(deployment: Deployment, seaweed: SeaweedS3, catalog_configs) -> None:
    writer = load_catalog(
        "writer",
        **{k: v for k, v in catalog_configs["aistor"].items() if not k.startswith("sharing.")}
        | {
            "warehouse": "s3://testice/",
            "client.access-key-id": seaweed.access_key,
            "client.secret-access-key": seaweed.secret_key,
            "s3.access-key-id": seaweed.access_key,
            "s3.secret-access-key": seaweed.secret_key,
        },
    )
    writer.create_namespace("tpch")
    table = writer.create_table("tpch.customer", CUSTOMER)
    table.append(customers(1, 4).cast(table.schema().as_arrow()))
    # The seeds' exact grammar: share update … --add "tpch:customer:uniform:testice:tpch:customer"
    deployment.store.create_share("test", [])
    deployment.store.update_share(
        "test", add=[TableSpec.parse("tpch:customer:uniform:testice:tpch:customer")]
    )
    profile = deployment.profile("test")
    shared_equals_scan(profile, "test.tpch.customer", writer.load_table("tpch.customer"))
    token = json.loads(open(profile).read())["bearerToken"]
    response = httpx.post(
        f"{deployment.endpoint}/shares/test/schemas/tpch/tables/customer/query",
        json={},
        headers={"Authorization": f"Bearer {token}"},
    )
    url = json.loads(response.text.splitlines()[2])["file"]["url"]
    assert url.startswith(f"{seaweed.endpoint}/testice/") and "X-Amz-Signature=" in url
    # SeaweedFS's catalog vends keys with the table (`-s3.iceberg.credentialRole`): they sign, not the
    # configured ones, and the URL ends no later than they do.
    query = parse_qs(urlparse(url).query)
    assert "X-Amz-Security-Token" in query
    assert not query["X-Amz-Credential"][0].startswith(seaweed.access_key + "/")
    assert int(query["X-Amz-Expires"][0]) <= 900
    assert httpx.get(url).status_code == 200
    changes = delta_sharing.load_table_changes_as_pandas(f"{profile}#test.tpch.customer", starting_version=0)
    assert sorted(changes["custkey"]) == [1, 2, 3, 4] and set(changes["_change_type"]) == {"insert"}


def test_unsigned_rest_access_is_refused(seaweed: SeaweedS3) -> None:
    """The catalog really demands SigV4: what we sign is what gets us in."""
    response = httpx.get(f"http://127.0.0.1:{seaweed.iceberg_port}/v1/testice/namespaces")
    assert response.status_code in (401, 403)
