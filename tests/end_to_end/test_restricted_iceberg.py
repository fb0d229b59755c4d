"""Restricted tables read at `/iceberg` (issue 50): pyiceberg and DuckDB on SeaweedFS, every byte checked.

The provider shares through the CLI against a running server on SeaweedFS with
vending on (`[iceberg] credential_vending = "sts"`), restricts the tables
(`share restrict`) and hands out per-share tokens (`token create`), which is
what `/iceberg` takes. A restricted table at `/iceberg` is Iceberg metadata the
server generates from its restricted snapshot, so the tests walk that metadata
as a recipient can (the metadata file, the manifest list, every manifest and
every file any manifest entry names, deleted entries too), download each file
through the server's signer or with the vended keys, and read it raw: no row
outside the filter, no column outside the list. A file of the table the
restricted manifests do not name (the original of a derived file) is refused by
the signer and unreadable with the vended keys. A restricted table with more files than
a session policy can name answers with the signer only, even to a client asking for keys.

Tables: a partitioned Delta table on S3 in two versions with a delete, and an
own-warehouse Iceberg table written through `/_iceberg` by pyiceberg with a
delete and an overwrite (pyiceberg deletes copy-on-write, so the source's
snapshots hold removed files), shared as `uniform`.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from share_store.authentication.tokens import hash_secret
from share_store.catalog.users import CatalogUsers
from share_store.iceberg_shares.grants import MAX_EXACT_FILES
from sharing_server.cli import main
from testbed.seaweed import READER_ROLE_ARN, SeaweedS3, empty_prefix, ensure_bucket, upload_tree
from tests.conftest import ADMIN_TOKEN, Deployment, audit_lines, deploy
from tests.end_to_end.test_iceberg_vended import denied, store_client
from tests.end_to_end.test_restricted_tables import customers
from tests.end_to_end.test_warehouse_catalog import aistor_catalog, signed
from tests.end_to_end.test_warehouse_engines import duckdb_connection

DELTA_BUCKET = "restrictedice"
WAREHOUSE = "restrictedwh"
#: The Delta table's restriction: a partition column and a data column, and a column cut.
DELTA_WHERE = "acctbal > 100 AND region = 'emea'"
DELTA_COLUMNS = ["custkey", "name", "acctbal", "region"]  # in the table's order
#: The own-warehouse table's restriction.
OWN_WHERE = "amount > 40 AND region = 'emea'"
OWN_COLUMNS = ["id", "region", "amount"]
SIGNED = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
VENDED = {"header.X-Iceberg-Access-Delegation": "vended-credentials"}
ORDERS = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType()),
    NestedField(3, "region", StringType()),
    NestedField(4, "amount", DoubleType()),
    NestedField(5, "secret", StringType()),
)


def orders(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"order-{i}" for i in ids],
            "region": ["emea" if i % 2 else "apac" for i in ids],
            "amount": [float((i * 13) % 100) for i in ids],
            "secret": [f"secret-{i}" for i in ids],
        }
    )


# -- the provider's deployment ---------------------------------------------------------------


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    env = {
        "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
        "SHARING_ICEBERG_CREDENTIAL_VENDING": "sts",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": READER_ROLE_ARN,
    }
    result = deploy(
        tmp_path_factory.mktemp("restricted-iceberg"), seaweed.storage_config(path_style="true"), env=env
    )
    result.seaweed = seaweed  # type: ignore[attr-defined]
    yield result
    result.server.stop()
    result.store.close()


def cli(deployment: Deployment, *args: str) -> int:
    return main(["--server", deployment.server.url, "--admin-token", ADMIN_TOKEN, *args])


def share_token(deployment: Deployment, share: str, tmp: Path) -> str:
    """A per-share token made by the provider's CLI, as `/iceberg` takes them."""
    profile = tmp / f"{share}-{uuid.uuid4().hex[:6]}.share"
    assert cli(deployment, "token", "create", share, "--expires", "1d", "--profile", str(profile)) == 0
    return str(json.loads(profile.read_text())["bearerToken"])


def restricted_share(
    deployment: Deployment, tmp: Path, share: str, schema: str, spec: str, where: str, columns: list[str]
) -> str:
    """A share of one table made and restricted through the CLI, and a per-share token of it."""
    assert cli(deployment, "share", "create", share, schema, spec) == 0
    table = f"{schema}/{spec.split(':')[0]}"
    restriction = ["--where", where, *(["--columns", ",".join(columns)] if columns else [])]
    assert cli(deployment, "share", "restrict", share, table, *restriction) == 0
    return share_token(deployment, share, tmp)


def profile_of(deployment: Deployment, token: str, tmp: Path) -> str:
    path = tmp / f"profile-{uuid.uuid4().hex[:6]}.share"
    path.write_text(
        json.dumps({"shareCredentialsVersion": 1, "endpoint": deployment.endpoint, "bearerToken": token})
    )
    return str(path)


@pytest.fixture(scope="module")
def delta_table(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A partitioned Delta table in two versions with a delete, on S3, shared and restricted."""
    tmp = tmp_path_factory.mktemp("restricted-delta")
    local = str(tmp / "customers")
    write_deltalake(local, customers(0, 40), partition_by=["region"])
    write_deltalake(local, customers(40, 20), partition_by=["region"], mode="append")
    DeltaTable(local).delete("custkey % 7 = 0")
    client = deployment.seaweed.client()  # type: ignore[attr-defined]
    # Made again where another module imports this fixture: the table holds only this run's files.
    ensure_bucket(client, DELTA_BUCKET)
    empty_prefix(client, DELTA_BUCKET, "customers/")
    upload_tree(client, Path(local), DELTA_BUCKET, "customers")
    spec = f"customers:delta:{DELTA_BUCKET}:customers"
    token = restricted_share(deployment, tmp, "restricted_delta", "sales", spec, DELTA_WHERE, DELTA_COLUMNS)
    whole = DeltaTable(local).to_pandas()
    expected = whole[(whole.acctbal > 100) & (whole.region == "emea")][DELTA_COLUMNS]
    assert 5 < len(expected) < len(whole)
    originals = [
        key["Key"]
        for key in client.list_objects_v2(Bucket=DELTA_BUCKET, Prefix="customers/")["Contents"]
        if key["Key"].endswith(".parquet")
    ]
    return {"token": token, "expected": expected, "originals": originals, "tmp": tmp}


# -- what a recipient sees ------------------------------------------------------------------


def catalog_uri(deployment: Deployment) -> str:
    return deployment.server.url + "/iceberg"


def recipient(deployment: Deployment, token: str, **properties: str) -> RestCatalog:
    return RestCatalog(
        f"r-{uuid.uuid4().hex[:6]}", **{"uri": catalog_uri(deployment), "token": token} | properties
    )


def canonical(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    frame = frame[sorted(frame.columns)]
    return frame.sort_values(key).reset_index(drop=True).astype(object)


def assert_same_rows(got: pd.DataFrame, expected: pd.DataFrame, key: str) -> None:
    assert sorted(got.columns) == sorted(expected.columns)
    pd.testing.assert_frame_equal(canonical(got, key), canonical(expected, key), check_dtype=False)


def object_of(location: str) -> tuple[str, str]:
    assert location.startswith("s3://"), location
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return bucket, key


def named_files(table: Table) -> dict[str, dict[str, Any]]:
    """Every object a recipient can learn of from the table's metadata: the metadata file, the
    manifest list, each manifest, and every data or delete file any manifest entry names (deleted
    entries too), with the partition each entry gives it."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    found: dict[str, dict[str, Any]] = {table.metadata_location: {"kind": "metadata"}}
    found[snapshot.manifest_list] = {"kind": "manifest list"}
    for manifest in snapshot.manifests(table.io):
        found[manifest.manifest_path] = {"kind": "manifest"}
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            partition = {
                field.name: entry.data_file.partition[position]
                for position, field in enumerate(table.specs()[manifest.partition_spec_id].fields)
            }
            found[entry.data_file.file_path] = {
                "kind": "data",
                "partition": partition,
                "status": entry.status,
            }
    # What the scan plans is what the manifests name (and nothing else).
    for task in table.scan().plan_files():
        assert task.file.file_path in found
        for delete in task.delete_files:
            assert delete.file_path in found
    return found


def sign(deployment: Deployment, token: str, uri: str) -> httpx.Response:
    return httpx.post(
        f"{catalog_uri(deployment)}/v1/aws/s3/sign",
        json={"method": "GET", "region": "us-east-1", "uri": uri, "headers": {}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def through_signer(deployment: Deployment, token: str, location: str) -> bytes:
    bucket, key = object_of(location)
    answer = sign(deployment, token, f"{deployment.seaweed.endpoint}/{bucket}/{key}")  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    headers = {name: values[0] for name, values in answer.json()["headers"].items()}
    got = httpx.get(answer.json()["uri"], headers=headers, timeout=60)
    assert got.status_code == 200, got.text
    return got.content


def assert_raw_file_allowed(content: bytes, info: dict[str, Any], columns: list[str], allowed: Any) -> None:
    """A data file read as it is: only the served columns, only rows `allowed` accepts (the
    partition's values stand in for columns a file does not hold)."""
    assert content[:4] == b"PAR1"
    rows = pq.read_table(io.BytesIO(content))
    assert set(rows.column_names) <= set(columns), rows.column_names
    frame = rows.to_pandas()
    for name, value in info.get("partition", {}).items():
        if name not in frame.columns:
            frame[name] = value
    assert allowed(frame).all(), frame


def assert_named_files_clean(
    deployment: Deployment, token: str, table: Table, columns: list[str], allowed: Any, cut: list[bytes]
) -> list[str]:
    """Every file the table's metadata names, fetched through the signer and read raw (and each data
    file again with the test's own keys, as a hostile client holding them would): only `columns`,
    only rows `allowed` accepts; no metadata file names a `cut` column. The data files' locations."""
    files = named_files(table)
    data = [location for location, info in files.items() if info["kind"] == "data"]
    assert data
    for location, info in files.items():
        content = through_signer(deployment, token, location)
        if info["kind"] == "data":
            assert_raw_file_allowed(content, info, columns, allowed)
        else:
            assert not [name for name in cut if name in content], location
    client = deployment.seaweed.client()  # type: ignore[attr-defined]
    for location in data:
        bucket, key = object_of(location)
        content = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert_raw_file_allowed(content, files[location], columns, allowed)
    return data


def load_asking_for_keys(deployment: Deployment, token: str, table: str) -> httpx.Response:
    """The load-table answer of `sales.<table>` to a client that asks for vended keys."""
    return httpx.get(
        f"{catalog_uri(deployment)}/v1/namespaces/sales/tables/{table}",
        headers={"Authorization": f"Bearer {token}", "X-Iceberg-Access-Delegation": "vended-credentials"},
        timeout=120,
    )


def delta_allowed(frame: pd.DataFrame) -> Any:
    return (frame.acctbal > 100) & (frame.region == "emea")


def own_allowed(frame: pd.DataFrame) -> Any:
    return (frame.amount > 40) & (frame.region == "emea")


# -- 1. a restricted Delta table on S3 ------------------------------------------------------


def test_pyiceberg_reads_the_restricted_delta_table_exactly_with_remote_signing(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    table = recipient(deployment, delta_table["token"], **SIGNED).load_table("sales.customers")
    assert table.io.properties["s3.signer"] == "S3V4RestSigner"
    assert "s3.session-token" not in table.io.properties
    assert [field.name for field in table.schema().fields] == DELTA_COLUMNS
    assert_same_rows(table.scan().to_arrow().to_pandas(), delta_table["expected"], "custkey")


def test_every_file_the_restricted_manifests_name_holds_only_allowed_rows_and_columns(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    table = recipient(deployment, delta_table["token"], **SIGNED).load_table("sales.customers")
    data = assert_named_files_clean(
        deployment, delta_table["token"], table, DELTA_COLUMNS, delta_allowed, [b"ssn", b"nation"]
    )
    # The restricted table's files are not the table's own: its originals hold cut rows and columns.
    originals = set(delta_table["originals"])
    assert not {object_of(location)[1] for location in data} & originals


def test_the_signer_refuses_the_original_data_files_outside_the_restricted_manifests(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    token = delta_table["token"]
    recipient(deployment, token, **SIGNED).load_table("sales.customers")
    endpoint = deployment.seaweed.endpoint  # type: ignore[attr-defined]
    assert delta_table["originals"]
    for key in delta_table["originals"]:
        answer = sign(deployment, token, f"{endpoint}/{DELTA_BUCKET}/{key}")
        assert answer.status_code == 403, (key, answer.text)
        assert "X-Amz-Signature" not in answer.text and "Authorization" not in answer.text
    log = f"{endpoint}/{DELTA_BUCKET}/customers/_delta_log/00000000000000000000.json"
    assert sign(deployment, token, log).status_code == 403


def test_duckdb_reads_the_restricted_delta_table_exactly(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    connection = duckdb_connection()
    try:
        connection.execute(f"CREATE SECRET share (TYPE iceberg, TOKEN '{delta_table['token']}')")
        connection.execute(
            f"ATTACH 'restricted_delta' AS shared (TYPE iceberg, ENDPOINT '{catalog_uri(deployment)}', "
            "SECRET share, ACCESS_DELEGATION_MODE 'vended_credentials')"
        )
        through_duckdb = connection.execute("SELECT * FROM shared.sales.customers").fetchdf()
        described = connection.execute("DESCRIBE shared.sales.customers").fetchall()
    finally:
        connection.close()
    assert [row[0] for row in described] == DELTA_COLUMNS
    assert_same_rows(through_duckdb, delta_table["expected"], "custkey")


def test_vended_keys_of_a_restricted_table_name_exactly_its_files(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    """The table's few files fit a session policy: the keys are vended, scoped to them one by one
    (no prefix), and read none of the table's original files."""
    token = delta_table["token"]
    answer = load_asking_for_keys(deployment, token, "customers")
    assert answer.status_code == 200, answer.text
    keys = answer.json()["config"]
    assert keys["s3.session-token"] and "s3.signer" not in keys
    records = audit_lines(
        deployment, lambda r: bool(r.get("vended")) and r.get("table") == "customers", count=1
    )
    assert records
    scope = records[-1]["vended"]["scope"]
    endpoint = deployment.seaweed.endpoint  # type: ignore[attr-defined]
    store = store_client(keys, endpoint)
    table = recipient(deployment, token, **SIGNED).load_table("sales.customers")
    files = named_files(table)
    # Every data file and the metadata file by name; a prefix only for the version folder of the
    # restricted table's own generated manifests, which holds nothing else.
    bucket, key = object_of(table.metadata_location)
    generated = f"{bucket}/{key.rpartition('/metadata/')[0]}/"
    for location, info in files.items():
        if info["kind"] in ("data", "metadata"):
            assert "/".join(object_of(location)) in scope, (location, scope)
    assert all(line.startswith(generated) for line in scope if line.endswith("*")), scope
    for location, info in files.items():
        bucket, key = object_of(location)
        content = store.get_object(Bucket=bucket, Key=key)["Body"].read()
        if info["kind"] == "data":
            assert_raw_file_allowed(content, info, DELTA_COLUMNS, delta_allowed)
    for key in delta_table["originals"]:
        assert denied(lambda key=key: store.get_object(Bucket=DELTA_BUCKET, Key=key)), key
    some = object_of(next(iter(files)))
    assert denied(lambda: store.list_objects_v2(Bucket=some[0]))
    assert denied(lambda: store.list_objects_v2(Bucket=DELTA_BUCKET, Prefix="customers/"))
    # pyiceberg with the vended keys reads the same rows.
    vended = recipient(deployment, token, **VENDED).load_table("sales.customers")
    assert vended.io.properties["s3.session-token"]
    assert_same_rows(vended.scan().to_arrow().to_pandas(), delta_table["expected"], "custkey")


@pytest.fixture(scope="module")
def many_files(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A restricted Delta table with more files than a session policy names one by one."""
    tmp = tmp_path_factory.mktemp("restricted-many")
    local = str(tmp / "many")
    for start in range(0, 16 * 8, 8):
        write_deltalake(local, customers(start, 8), mode="append")
    assert len(DeltaTable(local).file_uris()) > MAX_EXACT_FILES
    client = deployment.seaweed.client()  # type: ignore[attr-defined]
    upload_tree(client, Path(local), DELTA_BUCKET, "many")
    spec = f"many:delta:{DELTA_BUCKET}:many"
    token = restricted_share(deployment, tmp, "restricted_many", "sales", spec, DELTA_WHERE, DELTA_COLUMNS)
    whole = DeltaTable(local).to_pandas()
    return {"token": token, "expected": whole[delta_allowed(whole)][DELTA_COLUMNS]}


def test_a_restricted_table_too_big_to_name_in_keys_answers_remote_signing_only(
    deployment: Deployment, many_files: dict[str, Any]
) -> None:
    """Keys scoped to a prefix would reach the rows and columns the restriction leaves out, so a
    client that asks for keys is answered with the signer instead, and reads the same rows."""
    token = many_files["token"]
    answer = load_asking_for_keys(deployment, token, "many")
    assert answer.status_code == 200, answer.text
    config = answer.json()["config"]
    assert config["s3.signer"] == "S3V4RestSigner"
    assert "s3.session-token" not in config and "s3.secret-access-key" not in config
    assert "storage-credentials" not in answer.json()
    # pyiceberg as a recipient sets it up by default (asking for keys) reads through the signer.
    table = recipient(deployment, token).load_table("sales.many")
    assert table.io.properties["s3.signer"] == "S3V4RestSigner"
    assert_same_rows(table.scan().to_arrow().to_pandas(), many_files["expected"], "custkey")
    data = assert_named_files_clean(deployment, token, table, DELTA_COLUMNS, delta_allowed, [b"ssn"])
    assert len(data) > MAX_EXACT_FILES


# -- 2. an own-warehouse Iceberg table with deletes, shared as `uniform` -----------------------


@pytest.fixture(scope="module")
def own_table(deployment: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("restricted-own")
    owner = CatalogUsers(deployment.store.transactions, deployment.secret).create("restricted-owner")
    made = signed(
        owner,
        "POST",
        f"{deployment.server.url}/_iceberg/v1/warehouses",
        json.dumps({"name": WAREHOUSE}).encode(),
    )
    if made.status_code == 409:  # the bucket made by another module's import of this fixture
        adopt = {"name": WAREHOUSE, "adopt": True}  # only the provider adopts a bucket
        made = httpx.post(f"{deployment.server.url}/_iceberg/v1/warehouses", json=adopt,
                          headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
    assert made.status_code == 200, made.text
    writer: Catalog = aistor_catalog(deployment, owner, WAREHOUSE)
    writer.create_namespace("shop")
    table = writer.create_table("shop.orders", ORDERS)
    table.append(orders(0, 30).cast(table.schema().as_arrow()))
    table.append(orders(30, 30).cast(table.schema().as_arrow()))
    table.delete("id < 10")
    table = writer.load_table("shop.orders")
    table.overwrite(orders(100, 10).cast(table.schema().as_arrow()), overwrite_filter="id >= 50")
    whole = writer.load_table("shop.orders").scan().to_arrow().to_pandas()
    assert sorted(whole.id) == [*range(10, 50), *range(100, 110)]
    spec = f"orders:uniform:{WAREHOUSE}:shop:orders"
    token = restricted_share(deployment, tmp, "restricted_own", "shop", spec, OWN_WHERE, OWN_COLUMNS)
    expected = whole[(whole.amount > 40) & (whole.region == "emea")][OWN_COLUMNS]
    assert 5 < len(expected) < len(whole)
    source = writer.load_table("shop.orders")
    originals = {
        entry.data_file.file_path
        for snapshot in source.snapshots()
        for manifest in snapshot.manifests(source.io)
        for entry in manifest.fetch_manifest_entry(source.io, discard_deleted=False)
    }
    return {
        "token": token,
        "profile": profile_of(deployment, token, tmp),
        "expected": expected,
        "originals": originals,
    }


def test_the_restricted_own_table_reads_exactly_through_delta_sharing_in_both_formats(
    deployment: Deployment, own_table: dict[str, Any]
) -> None:
    url = f"{own_table['profile']}#restricted_own.shop.orders"
    for delta_format in (False, True):
        shared = delta_sharing.load_as_pandas(url, use_delta_format=delta_format)
        assert_same_rows(shared, own_table["expected"], "id")
        headers = {"Authorization": f"Bearer {own_table['token']}"}
        if delta_format:
            headers["delta-sharing-capabilities"] = "responseformat=delta;readerfeatures=deletionvectors"
        answer = httpx.post(
            f"{deployment.endpoint}/shares/restricted_own/schemas/shop/tables/orders/query",
            json={}, headers=headers, timeout=60,
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        lines = [json.loads(line) for line in answer.text.splitlines()]
        files = [line for line in lines if set(line) & {"file", "add"}]
        assert files
        for line in files:
            if delta_format:
                action = line["file"]["deltaSingleAction"]["add"]
                assert "deletionVector" not in action
                file_url = action["path"]
            else:
                file_url = line["file"]["url"]
            got = httpx.get(file_url, timeout=60)
            assert got.status_code == 200
            assert_raw_file_allowed(got.content, {}, OWN_COLUMNS, own_allowed)


#: Why pyiceberg cannot read a restricted Iceberg-source table's rows at /iceberg (reported, not fixed
#: here: the ids are decided in share_store/iceberg/ and share_store/restrictions/).


def test_the_restricted_own_table_reads_exactly_through_iceberg(
    deployment: Deployment, own_table: dict[str, Any]
) -> None:
    table = recipient(deployment, own_table["token"], **SIGNED).load_table("shop.orders")
    assert_same_rows(table.scan().to_arrow().to_pandas(), own_table["expected"], "id")


def test_the_restricted_own_table_at_iceberg_names_only_clean_files(
    deployment: Deployment, own_table: dict[str, Any]
) -> None:
    token = own_table["token"]
    table = recipient(deployment, token, **SIGNED).load_table("shop.orders")
    assert [field.name for field in table.schema().fields] == OWN_COLUMNS
    data = assert_named_files_clean(deployment, token, table, OWN_COLUMNS, own_allowed, [b"secret"])
    # None of the source's data files (live or deleted) is named, and the signer refuses each.
    assert not set(data) & own_table["originals"]
    endpoint = deployment.seaweed.endpoint  # type: ignore[attr-defined]
    for location in own_table["originals"]:
        bucket, key = object_of(location)
        assert sign(deployment, token, f"{endpoint}/{bucket}/{key}").status_code == 403, location


# -- 3. CURRENT_RECIPIENT with a per-share token ----------------------------------------------


def test_a_recipient_property_restriction_refuses_a_per_share_token_at_iceberg(
    deployment: Deployment, delta_table: dict[str, Any]
) -> None:
    spec = f"customers:delta:{DELTA_BUCKET}:customers"
    where = "nation = CURRENT_RECIPIENT('nation')"
    token = restricted_share(deployment, delta_table["tmp"], "by_nation", "sales", spec, where, [])
    headers = {"Authorization": f"Bearer {token}"}
    for delegation in ("remote-signing", "vended-credentials"):
        answer = httpx.get(
            f"{catalog_uri(deployment)}/v1/namespaces/sales/tables/customers",
            headers=headers | {"X-Iceberg-Access-Delegation": delegation},
            timeout=60,
        )
        assert answer.status_code == 403, answer.text
        message = answer.json()["error"]["message"]
        assert "recipient property 'nation'" in message and "share's own token" in message, message
        assert "metadata-location" not in answer.text and "s3://" not in answer.text
        assert DELTA_BUCKET not in answer.text and ".parquet" not in answer.text
        assert "s3.session-token" not in answer.text
    # Nor does the signer sign any of the table's files for it.
    endpoint = deployment.seaweed.endpoint  # type: ignore[attr-defined]
    for key in delta_table["originals"]:
        refused = sign(deployment, token, f"{endpoint}/{DELTA_BUCKET}/{key}")
        assert refused.status_code == 403 and "X-Amz-Signature" not in refused.text
    # pyiceberg sees the same refusal.
    with pytest.raises(Exception, match="nation"):
        recipient(deployment, token, **SIGNED).load_table("sales.customers")


def test_a_tightened_restriction_takes_effect_at_once_at_iceberg(
    deployment: Deployment, delta_table: dict[str, Any], tmp_path: Path
) -> None:
    """A grant kept from before a restriction changed must neither answer the old metadata nor sign
    the old restriction's files: the change applies to the next request, as at /delta-sharing."""
    spec = f"customers:delta:{DELTA_BUCKET}:customers"
    token = restricted_share(deployment, tmp_path, "tightened", "sales", spec, DELTA_WHERE, DELTA_COLUMNS)
    loose = recipient(deployment, token, **SIGNED).load_table("sales.customers")
    loose_files = list(named_files(loose))
    assert len(loose.scan().to_arrow()) == len(delta_table["expected"])
    tighter = f"{DELTA_WHERE} AND custkey < 20"
    assert cli(deployment, "share", "restrict", "tightened", "sales/customers", "--where", tighter,
               "--columns", ",".join(DELTA_COLUMNS)) == 0  # fmt: skip
    endpoint = deployment.seaweed.endpoint  # type: ignore[attr-defined]
    old_data = [f for f in loose_files if f.endswith(".parquet")]
    # An engine that loaded before the change asks at once, without loading again.
    for location in old_data:
        answer = sign(deployment, token, location.replace("s3://", endpoint + "/"))
        assert answer.status_code == 403, (location, answer.text)
    table = recipient(deployment, token, **SIGNED).load_table("sales.customers")
    rows = table.scan().to_arrow().to_pandas()
    expected = delta_table["expected"][delta_table["expected"].custkey < 20]
    assert_same_rows(rows, expected, "custkey")
    now = set(named_files(table))
    for location in [f for f in old_data if f not in now]:
        # The looser restriction's derived files hold rows the tighter one leaves out.
        assert sign(deployment, token, location.replace("s3://", endpoint + "/")).status_code == 403
