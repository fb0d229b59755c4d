"""The read-only Iceberg REST catalog (`/iceberg`), read by pyiceberg's own REST client.

A real SeaweedFS holds the tables; pyiceberg reads their files straight from it
with headers signed by the server (`S3V4RestSigner`), never holding storage keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from share_store.model import TableSpec
from testbed.seaweed import SeaweedS3, ensure_bucket, upload_tree
from tests.conftest import Deployment, audit_records, deploy
from tests.end_to_end.test_client_local import canonical
from tests.end_to_end.test_iceberg_deletes import frame_rows, row_order, rows_of
from tests.end_to_end.test_iceberg_s3 import CUSTOMER, customers
from tests.iceberg_relocate import relocate_table, same_length_uri

BUCKET = "restwarehouse"


@pytest.fixture(scope="module")
def seaweed_server(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    ensure_bucket(seaweed.client(), BUCKET)  # made again where another module imports this fixture
    tmp = tmp_path_factory.mktemp("iceberg-rest")
    catalogs = {
        "wh": {
            "type": "sql",
            "uri": f"sqlite:///{tmp / 'catalog.db'}",
            "warehouse": f"s3://{BUCKET}/wh",
            "s3.endpoint": seaweed.endpoint,
            "s3.access-key-id": seaweed.access_key,
            "s3.secret-access-key": seaweed.secret_key,
            "s3.region": seaweed.region,
        }
    }
    deployment = deploy(tmp, seaweed.storage_config(), catalogs)
    catalog = deployment.catalogs.catalog("wh")
    catalog.create_namespace("tpch")
    for name in ("customer", "private"):
        table = catalog.create_table(f"tpch.{name}", CUSTOMER)
        table.append(customers(1, 5).cast(table.schema().as_arrow()))
        table.append(customers(6, 3).cast(table.schema().as_arrow()))
    # Files added from outside the table's location (pyiceberg's add_files), as migrations do.
    external = catalog.create_table("tpch.external", CUSTOMER)
    outside = f"s3://{BUCKET}/landing/customers.parquet"
    with external.io.new_output(outside).create(overwrite=True) as stream:  # made again: see above
        pq.write_table(customers(1, 4).cast(external.schema().as_arrow()), stream)
    external.add_files([outside])
    store = deployment.store
    store.create_share(
        "ice",
        [
            TableSpec.parse("tpch:customer:uniform:wh:tpch:customer"),
            TableSpec.parse("tpch:external:uniform:wh:tpch:external"),
        ],
    )
    store.create_share(
        "latest", [TableSpec.parse("tpch:customer:uniform:wh:tpch:customer")], history_shared=False
    )
    store.create_share("other", [TableSpec.parse("sales:private:uniform:wh:tpch:private")])
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def catalog_uri(server: Deployment) -> str:
    return server.endpoint.removesuffix("/delta-sharing") + "/iceberg"


def recipient(server: Deployment, share: str, **properties: str) -> RestCatalog:
    """pyiceberg's REST catalog as a recipient configures it: the URI and the share's token."""
    props = {"uri": catalog_uri(server), "token": server.token(share)} | properties
    return RestCatalog(share, **props)


def source_rows(server: Deployment, name: str = "customer", snapshot_id: int | None = None) -> list[dict]:
    table = server.catalogs.catalog("wh").load_table(f"tpch.{name}")
    return sorted(table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist(), key=lambda r: r["custkey"])


def scanned(table: Any, snapshot_id: int | None = None) -> list[dict]:
    result: pa.Table = table.scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(result.to_pylist(), key=lambda r: r["custkey"])


def test_a_recipient_lists_and_scans_its_share(seaweed_server: Deployment) -> None:
    catalog = recipient(seaweed_server, "ice")
    assert catalog.list_namespaces() == [("tpch",)]
    assert catalog.list_tables("tpch") == [("tpch", "customer"), ("tpch", "external")]
    assert catalog.table_exists("tpch.customer")
    assert not catalog.table_exists("tpch.private")  # another share's
    table = catalog.load_table("tpch.customer")
    assert table.io.properties.get("s3.access-key-id") is None  # no storage keys handed out
    rows = scanned(table)
    assert rows == source_rows(seaweed_server)
    assert len(rows) == 8
    shared = delta_sharing.load_as_pandas(f"{seaweed_server.profile('ice')}#ice.tpch.customer")
    assert sorted(shared.to_dict("records"), key=lambda r: r["custkey"]) == rows


def test_files_outside_the_table_location_are_readable(seaweed_server: Deployment) -> None:
    table = recipient(seaweed_server, "ice").load_table("tpch.external")
    assert [r["custkey"] for r in scanned(table)] == [1, 2, 3, 4]


def test_time_travel_by_snapshot_id_when_history_is_shared(seaweed_server: Deployment) -> None:
    table = recipient(seaweed_server, "ice").load_table("tpch.customer")
    snapshots = table.metadata.snapshots
    assert len(snapshots) == 2
    first = snapshots[0].snapshot_id
    assert scanned(table, first) == source_rows(seaweed_server, snapshot_id=first)
    assert [r["custkey"] for r in scanned(table, first)] == [1, 2, 3, 4, 5]


def test_without_history_only_the_current_snapshot_is_shown_and_readable(seaweed_server: Deployment) -> None:
    table = recipient(seaweed_server, "latest").load_table("tpch.customer")
    assert [s.snapshot_id for s in table.metadata.snapshots] == [table.metadata.current_snapshot_id]
    assert table.metadata.metadata_log == []
    assert scanned(table) == source_rows(seaweed_server)
    source = seaweed_server.catalogs.catalog("wh").load_table("tpch.customer")
    older = source.metadata.snapshots[0]
    token = seaweed_server.token("latest")
    # The older snapshot's manifest list, and the metadata file listing every snapshot: refused.
    for uri in (older.manifest_list, source.metadata_location):
        answer = sign(seaweed_server, token, "GET", object_url(seaweed_server, uri))
        assert answer.status_code == 403, uri
    current = source.metadata.current_snapshot()
    assert current is not None
    assert (
        sign(seaweed_server, token, "GET", object_url(seaweed_server, current.manifest_list)).status_code
        == 200
    )


def object_url(server: Deployment, s3_uri: str) -> str:
    """The path-style URL a client builds for `s3://bucket/key` at the store's endpoint."""
    endpoint = server.config.storage["endpoint"]
    return f"{endpoint}/{s3_uri.removeprefix('s3://')}"


def sign(server: Deployment, token: str, method: str, uri: str, **extra: Any) -> httpx.Response:
    body = {"method": method, "region": "us-east-1", "uri": uri, "headers": {}} | extra
    return httpx.post(
        catalog_uri(server) + "/v1/aws/s3/sign",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
    )


def test_signing_refuses_other_objects_methods_and_revoked_tokens(seaweed_server: Deployment) -> None:
    source = seaweed_server.catalogs.catalog("wh").load_table("tpch.customer")
    data_file = next(iter(source.scan().plan_files())).file.file_path
    private = seaweed_server.catalogs.catalog("wh").load_table("tpch.private")
    private_file = next(iter(private.scan().plan_files())).file.file_path
    token_id, token = seaweed_server.store.create_token("ice", timedelta(hours=1), "signing")
    allowed = sign(seaweed_server, token, "GET", object_url(seaweed_server, data_file))
    assert allowed.status_code == 200
    signed = allowed.json()
    assert signed["uri"] == object_url(seaweed_server, data_file)  # the request the signer built: the same
    # The signed request reads the object from the store itself.
    headers = {name: ", ".join(values) for name, values in signed["headers"].items()}
    got = httpx.get(signed["uri"], headers=headers)
    assert got.status_code == 200 and got.content[:4] == b"PAR1"
    refused = {
        "another share's table": ("GET", object_url(seaweed_server, private_file), {}),
        "a write": ("PUT", object_url(seaweed_server, data_file), {}),
        "a delete": ("DELETE", object_url(seaweed_server, data_file), {}),
        "a listing": ("GET", f"{seaweed_server.config.storage['endpoint']}/{BUCKET}?list-type=2", {}),
        "a parent escape": ("GET", object_url(seaweed_server, data_file.rsplit("/", 1)[0] + "/../../x"), {}),
        "another host": ("GET", "http://127.0.0.2:9/latest/meta-data", {}),  # not the store
        # A store that resolves no virtual hosts (SeaweedFS, MinIO without MINIO_DOMAIN) serves the
        # bucket the path names: the host form is refused, whatever the path.
        "a virtual host": ("GET", object_url(seaweed_server, data_file).replace("//", f"//{BUCKET}.", 1), {}),
        "another share's file by a virtual host": (
            "GET",
            object_url(seaweed_server, private_file).replace("//", f"//{BUCKET}.", 1),
            {},
        ),
        "a copy source": (
            "GET",
            object_url(seaweed_server, data_file),
            {"headers": {"x-amz-copy-source": [private_file.removeprefix("s3://")]}},
        ),
        "an ACL header": (
            "GET",
            object_url(seaweed_server, data_file),
            {"headers": {"x-amz-acl": ["public-read"]}},
        ),
    }
    for case, (method, uri, extra) in refused.items():
        answer = sign(seaweed_server, token, method, uri, **extra)
        assert answer.status_code == 403, case
        assert answer.json()["error"]["type"] == "ForbiddenException", case
    assert (
        sign(seaweed_server, "not-a-token", "GET", object_url(seaweed_server, data_file)).status_code == 403
    )
    seaweed_server.store.revoke_token("ice", token_id.id)
    assert sign(seaweed_server, token, "GET", object_url(seaweed_server, data_file)).status_code == 403
    bad = httpx.post(
        catalog_uri(seaweed_server) + "/v1/aws/s3/sign",
        content=b"{not json",
        headers={"Authorization": "Bearer x"},
    )
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadRequestException"


def test_signatures_are_audited_and_counted(seaweed_server: Deployment) -> None:
    catalog = recipient(seaweed_server, "ice")
    scanned(catalog.load_table("tpch.customer"))
    records = [r for r in audit_records(seaweed_server) if r.get("signing")]
    signed = [r for r in records if "object" in r["signing"] and r.get("share") == "ice"]
    assert signed and all(r["status"] == 200 for r in signed)
    assert {r["table"] for r in signed} <= {"customer", "external"}
    assert any(r["signing"]["object"].endswith(".parquet") and r["table"] == "customer" for r in signed)
    assert any(r["status"] == 403 and "refused" in r["signing"] for r in records)
    metrics = httpx.get(seaweed_server.endpoint.removesuffix("/delta-sharing") + "/metrics").text
    assert 'sharing_iceberg_signatures_total{outcome="signed"}' in metrics


def test_a_token_sees_only_its_share(seaweed_server: Deployment) -> None:
    catalog = recipient(seaweed_server, "other")
    assert catalog.list_namespaces() == [("sales",)]
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("tpch")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("tpch.customer")
    assert [r["custkey"] for r in scanned(catalog.load_table("sales.private"))] == list(range(1, 9))


def test_the_catalog_is_read_only(seaweed_server: Deployment) -> None:
    catalog = recipient(seaweed_server, "ice")
    # The config lists read endpoints only, so pyiceberg does not even try a write...
    with pytest.raises(NotImplementedError):
        catalog.create_namespace("new")
    with pytest.raises(NotImplementedError):
        catalog.drop_table("tpch.customer")
    # ...and a client that does gets the spec's 403, with no effect.
    headers = {"Authorization": f"Bearer {seaweed_server.token('ice')}"}
    writes = [
        ("POST", "/v1/namespaces", {"namespace": ["new"]}),
        ("DELETE", "/v1/namespaces/tpch", None),
        ("POST", "/v1/namespaces/tpch/tables", {"name": "t", "schema": {"type": "struct", "fields": []}}),
        ("POST", "/v1/namespaces/tpch/tables/customer", {"requirements": [], "updates": []}),
        ("DELETE", "/v1/namespaces/tpch/tables/customer", None),
        ("POST", "/v1/tables/rename", {}),
        ("POST", "/v1/namespaces/tpch/register", {}),
        ("POST", "/v1/transactions/commit", {}),
    ]
    for method, path, body in writes:
        answer = httpx.request(method, catalog_uri(seaweed_server) + path, json=body, headers=headers)
        assert answer.status_code == 403, (method, path)
        assert answer.json()["error"]["type"] == "ForbiddenException"
    assert catalog.list_namespaces() == [("tpch",)]
    assert catalog.list_tables("tpch") == [("tpch", "customer"), ("tpch", "external")]
    assert len(scanned(catalog.load_table("tpch.customer"))) == 8


def test_requests_without_a_valid_token_are_refused(seaweed_server: Deployment) -> None:
    for path in ("/v1/config", "/v1/namespaces", "/v1/namespaces/tpch/tables/customer"):
        answer = httpx.get(catalog_uri(seaweed_server) + path, headers={"Authorization": "Bearer nope"})
        assert answer.status_code == 401, path
        assert answer.json()["error"]["type"] == "NotAuthorizedException"


def test_oauth_clients_exchange_credentials_for_catalog_tokens(seaweed_server: Deployment) -> None:
    client, secret = seaweed_server.store.create_oauth_client("ice", timedelta(hours=1), "pyiceberg")
    catalog = RestCatalog(
        "ice",
        uri=catalog_uri(seaweed_server),
        credential=f"{client.id}:{secret}",
        **{"oauth2-server-uri": catalog_uri(seaweed_server) + "/v1/oauth/tokens"},
    )
    assert len(scanned(catalog.load_table("tpch.customer"))) == 8


# -- tables with row-level deletes, written by Spark 3.5 + Iceberg ---------------------

DELETE_TABLES = ("pos_v2", "dv_v3")


@pytest.fixture(scope="module")
def spark_tables(seaweed_server: Deployment, written: Path, seaweed: SeaweedS3) -> dict[str, Any]:
    """The Spark-written tables with deletes, moved into S3 and shared as share `deletes`."""
    bucket = "sparkdeletes"
    s3 = seaweed.client()
    ensure_bucket(s3, bucket)
    local = str(written / "buckets" / "spark")
    prefix = same_length_uri(local, bucket)
    catalog = seaweed_server.catalogs.catalog("wh")
    catalog.create_namespace("spark")
    for name in DELETE_TABLES:
        metadata = relocate_table(written / "buckets" / "spark" / "db" / name, local, prefix, s3, bucket)
        catalog.register_table(("spark", name), metadata)
    specs = [TableSpec.parse(f"db:{name}:uniform:wh:spark:{name}") for name in DELETE_TABLES]
    seaweed_server.store.create_share("deletes", specs)
    return json.loads((written / "expected.json").read_text())


@pytest.mark.parametrize("name", DELETE_TABLES)
def test_tables_with_deletes_read_as_spark_reads_them(
    seaweed_server: Deployment, spark_tables: dict[str, Any], name: str
) -> None:
    table = recipient(seaweed_server, "deletes").load_table(f"db.{name}")
    snapshots = spark_tables[name]["snapshots"]
    assert [s.snapshot_id for s in table.metadata.snapshots] == [s["snapshot_id"] for s in snapshots]
    assert any(task.delete_files for task in table.scan().plan_files())  # deletes, not rewrites
    for snapshot in (snapshots[-1], snapshots[2]):
        rows = table.scan(snapshot_id=snapshot["snapshot_id"]).to_arrow().to_pylist()
        assert rows_of(rows, name) == spark_rows_of(snapshot)
    # And what the Delta Sharing path serves from the same files.
    shared = delta_sharing.load_as_pandas(
        f"{seaweed_server.profile('deletes')}#deletes.db.{name}", use_delta_format=True
    )
    assert frame_rows(shared, name) == spark_rows_of(snapshots[-1])


def spark_rows_of(snapshot: dict[str, Any]) -> list[list[Any]]:
    return sorted(snapshot["rows"], key=row_order)


# -- Delta tables, served as Iceberg tables ---------------------------------------------

DELTA_TABLES = {
    "dv": "table-with-dv-small",  # a deletion vector
    "dvlog": "table_with_deletion_logs",  # deletion vectors over several versions
    "mapped": "table_with_column_mapping",  # column mapping by name, a partition column with a space
    "parted": "delta-0.8.0-partitioned",  # three partition columns
    "typed": "delta-2.2.0-partitioned-types",
}


@pytest.fixture(scope="module")
def delta_shares(seaweed_server: Deployment, seaweed: SeaweedS3, testdata: Path) -> str:
    bucket = "restdelta"
    client = seaweed.client()
    ensure_bucket(client, bucket)
    for directory in DELTA_TABLES.values():
        upload_tree(client, testdata / directory, bucket, directory)
    specs = [TableSpec.parse(f"db:{name}:delta:{bucket}:{path}") for name, path in DELTA_TABLES.items()]
    seaweed_server.store.create_share("deltas", specs)
    seaweed_server.store.create_share("deltalatest", specs, history_shared=False)
    return seaweed_server.profile("deltas")


def as_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return canonical(frame[sorted(frame.columns)])


@pytest.mark.parametrize("name", DELTA_TABLES)
def test_delta_tables_read_as_iceberg_tables(
    seaweed_server: Deployment, delta_shares: str, name: str
) -> None:
    catalog = recipient(seaweed_server, "deltas")
    assert ("db", name) in catalog.list_tables("db")
    table = catalog.load_table(f"db.{name}")
    through_iceberg = table.scan().to_arrow().to_pandas()
    shared = delta_sharing.load_as_pandas(f"{delta_shares}#deltas.db.{name}", use_delta_format=True)
    assert len(through_iceberg) == len(shared)
    assert as_rows(through_iceberg).equals(as_rows(shared))


def test_delta_versions_are_snapshots_by_version(seaweed_server: Deployment, delta_shares: str) -> None:
    table = recipient(seaweed_server, "deltas").load_table("db.dvlog")
    versions = [int(s.summary["delta-version"]) for s in table.metadata.snapshots]
    assert len(versions) > 1 and versions == sorted(versions)
    for snapshot, version in zip(table.metadata.snapshots, versions, strict=True):
        assert snapshot.snapshot_id == version + 1
        rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().to_pandas()
        shared = delta_sharing.load_as_pandas(
            f"{delta_shares}#deltas.db.dvlog", version=version, use_delta_format=True
        )
        assert as_rows(rows).equals(as_rows(shared)), version


def test_a_delta_table_without_history_shows_and_signs_its_latest_version_only(
    seaweed_server: Deployment, delta_shares: str
) -> None:
    recipient(seaweed_server, "deltalatest").load_table("db.dvlog")  # generates the latest version
    latest = recipient(seaweed_server, "deltalatest").load_table("db.dvlog")  # finds it written
    assert len(latest.metadata.snapshots) == 1
    shared = delta_sharing.load_as_pandas(f"{delta_shares}#deltas.db.dvlog", use_delta_format=True)
    assert as_rows(latest.scan().to_arrow().to_pandas()).equals(as_rows(shared))  # its deletes signed too
    full = recipient(seaweed_server, "deltas").load_table("db.dvlog")
    older = full.metadata.snapshots[0]
    token = seaweed_server.token("deltalatest")
    for uri in (
        older.manifest_list,
        "s3://restdelta/table_with_deletion_logs/_delta_log/00000000000000000000.json",
    ):
        assert sign(seaweed_server, token, "GET", object_url(seaweed_server, uri)).status_code == 403, uri
    current = latest.metadata.current_snapshot()
    assert current is not None
    assert (
        sign(seaweed_server, token, "GET", object_url(seaweed_server, current.manifest_list)).status_code
        == 200
    )


def test_clients_are_told_and_signed_for_the_public_endpoint(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3, delta_shares: str
) -> None:
    public = seaweed.endpoint.replace("127.0.0.1", "localhost")  # another name of the same store
    tmp = tmp_path_factory.mktemp("iceberg-rest-public")
    deployment = deploy(tmp, seaweed.storage_config(public_endpoint=public))
    try:
        deployment.store.create_share(
            "pub", [TableSpec.parse("db:parted:delta:restdelta:delta-0.8.0-partitioned")]
        )
        table = recipient(deployment, "pub").load_table("db.parted")
        assert table.io.properties["s3.endpoint"] == public
        assert len(table.scan().to_arrow()) == 7
        manifest_list = table.metadata.current_snapshot().manifest_list
        private = f"{seaweed.endpoint}/{manifest_list.removeprefix('s3://')}"
        token = deployment.token("pub")
        assert sign(deployment, token, "GET", private).status_code == 403  # not the address clients use
    finally:
        deployment.server.stop()
        deployment.store.close()
