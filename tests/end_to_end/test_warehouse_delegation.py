"""Writers with only the catalog's keys: vended keys and remote signing on the own warehouses.

The server runs on SeaweedFS with `[warehouses] access_delegation = ["vended-credentials",
"remote-signing"]` and the writer role of `testbed/seaweed.py`. pyiceberg is configured as AIStor
documents it (SigV4 with a catalog user's keys) and given no S3 keys at all: it creates, appends,
overwrites and deletes in both modes. The keys and signatures reach only the table's location:
not another table (one whose location extends the first's prefix included), another warehouse or
the bucket's root; a read-only user's keys and signatures cannot write.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import boto3
import httpx
import pyarrow as pa
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import BadRequestError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

from share_store.catalog.users import CatalogUsers, IssuedUser
from testbed.seaweed import WRITER_ROLE_ARN, SeaweedS3
from tests.conftest import Deployment, audit_lines, audit_records, deploy
from tests.end_to_end.test_warehouse_catalog import signed

WAREHOUSE = "writers"
OTHER = "elsewhere"
ROWS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
VENDED = "vended-credentials"
SIGNED = "remote-signing"


def root(deployment: Deployment) -> str:
    return f"{deployment.server.url}/_iceberg"


@pytest.fixture(scope="module")
def delegating_server(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    env = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": f"{VENDED},{SIGNED}",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    deployment = deploy(
        tmp_path_factory.mktemp("delegation"), seaweed.storage_config(path_style="true"), env=env
    )
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    yield deployment
    deployment.server.stop()
    deployment.store.close()


@pytest.fixture(scope="module")
def owner(delegating_server: Deployment) -> IssuedUser:
    user = CatalogUsers(delegating_server.store.transactions, delegating_server.secret).create("owner")
    for name in (WAREHOUSE, OTHER):
        made = signed(
            user, "POST", f"{root(delegating_server)}/v1/warehouses", json.dumps({"name": name}).encode()
        )
        assert made.status_code == 200, made.text
    return user


@pytest.fixture(scope="module")
def reader(delegating_server: Deployment) -> IssuedUser:
    """Allowed to read every table's data, and to write none."""
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "s3tables:Get*",
                    "s3tables:List*",
                    "s3tables:GetTableData",
                ],
                "Resource": ["arn:aws:s3tables:::bucket/*"],
            }
        ],
    }
    return CatalogUsers(delegating_server.store.transactions, delegating_server.secret).create(
        "reader", json.dumps(policy)
    )


def writer(deployment: Deployment, user: IssuedUser, mode: str, warehouse: str = WAREHOUSE) -> Catalog:
    """pyiceberg as AIStor's documentation configures it, with no S3 keys: only the catalog's."""
    return load_catalog(
        f"{mode}-{uuid.uuid4().hex[:6]}",
        **{
            "uri": root(deployment),
            "warehouse": warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "local",
            "client.region": "local",
            "client.access-key-id": user.access_key,
            "client.secret-access-key": user.secret_key,
            "header.X-Iceberg-Access-Delegation": mode,
        },
    )


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "name": n} for i, n in pairs], ROWS)


def sorted_rows(table: Any) -> list[tuple[Any, ...]]:
    frame = table.scan().to_arrow()
    return sorted(zip(frame["id"].to_pylist(), frame["name"].to_pylist(), strict=True))


@pytest.mark.parametrize("mode", [VENDED, SIGNED])
def test_pyiceberg_writes_with_only_the_catalogs_keys(
    delegating_server: Deployment, owner: IssuedUser, mode: str
) -> None:
    catalog = writer(delegating_server, owner, mode)
    namespace = f"ns_{mode.split('-')[0]}"
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.orders", schema=ROWS)
    assert table.metadata.format_version == 2
    table.append(rows((1, "a"), (2, "b"), (3, "c")))
    table.append(rows((4, "d")))
    table.delete("id = 2")
    assert sorted_rows(catalog.load_table(f"{namespace}.orders")) == [(1, "a"), (3, "c"), (4, "d")]
    table = catalog.load_table(f"{namespace}.orders")
    table.overwrite(rows((9, "z")))
    assert sorted_rows(catalog.load_table(f"{namespace}.orders")) == [(9, "z")]
    # A staged create: its writes go to the location handed out with it.
    with catalog.create_table_transaction(f"{namespace}.staged", schema=ROWS) as staged:
        staged.append(rows((5, "e")))
    assert sorted_rows(catalog.load_table(f"{namespace}.staged")) == [(5, "e")]
    what = "vended" if mode == VENDED else "signing"
    assert audit_lines(delegating_server, lambda record: what in record and namespace in json.dumps(record))


def test_views_on_s3_with_a_sigv4_catalog_user(delegating_server: Deployment, owner: IssuedUser) -> None:
    """pyiceberg's view API as AIStor configures it, on SeaweedFS: the view's metadata goes to the
    namespace's folder in the warehouse's bucket; it loads, is refused under a second name while it
    lives, is dropped (pyiceberg 0.12 has no view replace or rename; Spark's are tested on
    local storage in test_warehouse_views.py)."""
    catalog = writer(delegating_server, owner, VENDED)
    catalog.create_namespace("ns_views")
    catalog.create_table("ns_views.base", schema=ROWS)
    made = catalog.create_view(
        "ns_views.recent", Schema(NestedField(1, "id", LongType(), required=True)),
        ViewVersion.model_validate({
            "version-id": 1, "schema-id": 0, "summary": {"engine-name": "pyiceberg"},
            "representations": [SQLViewRepresentation(type="sql", sql="SELECT id FROM base", dialect="sp")],
            "default-namespace": ["ns_views"]}),
    )  # fmt: skip
    assert made.metadata.location.startswith(f"s3://{WAREHOUSE}/ns_views/recent-")
    keys = [o["Key"] for o in delegating_server.seaweed.client().list_objects_v2(  # type: ignore[attr-defined]
        Bucket=WAREHOUSE, Prefix="ns_views/recent-").get("Contents", [])]  # fmt: skip
    (metadata_key,) = [key for key in keys if key.endswith(".metadata.json")]
    loaded = catalog.load_view("ns_views.recent")
    assert loaded.metadata.versions[-1].representations[0].root.sql == "SELECT id FROM base"
    metadata_file = f"s3://{WAREHOUSE}/{metadata_key}"
    with pytest.raises(BadRequestError, match="overlaps"):  # one location, one owner
        catalog.register_view("ns_views.again", metadata_file)
    catalog.drop_view("ns_views.recent")
    assert not catalog.view_exists("ns_views.recent")
    again = catalog.register_view("ns_views.again", metadata_file)  # the dropped view's files kept
    assert again.metadata.view_uuid == made.metadata.view_uuid
    assert catalog.list_views("ns_views") == [("ns_views", "again")]
    catalog.drop_view("ns_views.again")
    assert catalog.table_exists("ns_views.base")


def vended_config(server: Deployment, user: IssuedUser, namespace: str, table: str) -> dict[str, str]:
    url = f"{root(server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}"
    loaded = signed(user, "GET", url, b"", **{"X-Iceberg-Access-Delegation": VENDED})
    assert loaded.status_code == 200, loaded.text
    assert loaded.headers["cache-control"] == "no-store"
    body = loaded.json()
    credentials = body["storage-credentials"]
    assert len(credentials) == 1 and credentials[0]["prefix"].startswith(f"s3://{WAREHOUSE}/{namespace}/")
    assert body["config"] == credentials[0]["config"]
    return dict(body["config"])


def s3_with(config: dict[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=config["s3.endpoint"],
        region_name=config["s3.region"],
        aws_access_key_id=config["s3.access-key-id"],
        aws_secret_access_key=config["s3.secret-access-key"],
        aws_session_token=config["s3.session-token"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def refused(call: Any) -> bool:
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"] in ("AccessDenied", "Forbidden", "403")
    return False


@pytest.fixture(scope="module")
def two_tables(delegating_server: Deployment, owner: IssuedUser) -> tuple[str, str, str]:
    """`ns.a` at `<ns>/a` and `ns.ab` at `<ns>/ab`, whose location extends a's as a string."""
    catalog = writer(delegating_server, owner, VENDED)
    catalog.create_namespace("scope")
    base = f"s3://{WAREHOUSE}/scope"
    catalog.create_table("scope.a", schema=ROWS, location=f"{base}/a")
    catalog.create_table("scope.ab", schema=ROWS, location=f"{base}/ab")
    other = writer(delegating_server, owner, VENDED, OTHER)
    other.create_namespace("scope")
    other.create_table("scope.a", schema=ROWS)
    return "scope", "a", "ab"


def test_vended_keys_reach_only_their_tables_location(
    delegating_server: Deployment, owner: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    namespace, a, ab = two_tables
    config = vended_config(delegating_server, owner, namespace, a)
    seaweed = delegating_server.seaweed  # type: ignore[attr-defined]
    # Temporary keys of the table's own, never the server's.
    assert config["s3.access-key-id"] != seaweed.access_key and seaweed.secret_key not in json.dumps(config)
    assert seaweed.secret_key not in json.dumps(audit_records(delegating_server))
    keys = s3_with(config)
    inside = f"{namespace}/{a}/data/by-keys.parquet"
    keys.put_object(Bucket=WAREHOUSE, Key=inside, Body=b"x")
    assert keys.get_object(Bucket=WAREHOUSE, Key=inside)["Body"].read() == b"x"
    listed = keys.list_objects_v2(Bucket=WAREHOUSE, Prefix=f"{namespace}/{a}/")
    assert any(item["Key"] == inside for item in listed.get("Contents", []))
    keys.delete_object(Bucket=WAREHOUSE, Key=inside)
    for bucket, key in (
        (WAREHOUSE, f"{namespace}/{ab}/data/x.parquet"),  # the prefix extended: another table
        (WAREHOUSE, "root.parquet"),  # the bucket's root
        (OTHER, f"{namespace}/{a}/data/x.parquet"),  # another warehouse
    ):
        assert refused(lambda b=bucket, k=key: keys.put_object(Bucket=b, Key=k, Body=b"x")), (bucket, key)
        assert refused(lambda b=bucket, k=key: keys.get_object(Bucket=b, Key=k)), (bucket, key)
    assert refused(lambda: keys.list_objects_v2(Bucket=WAREHOUSE, Prefix=f"{namespace}/"))
    assert refused(lambda: keys.list_objects_v2(Bucket=OTHER))


def test_a_read_only_users_keys_and_signatures_cannot_write(
    delegating_server: Deployment, owner: IssuedUser, reader: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    namespace, a, _ = two_tables
    written = writer(delegating_server, owner, VENDED).load_table(f"{namespace}.{a}")
    written.append(rows((1, "a")))
    keys = s3_with(vended_config(delegating_server, reader, namespace, a))
    data = next(f.file.file_path for f in written.scan().plan_files())
    bucket, _, key = data.removeprefix("s3://").partition("/")
    assert keys.get_object(Bucket=bucket, Key=key)["Body"].read()[:4] == b"PAR1"
    assert refused(lambda: keys.put_object(Bucket=bucket, Key=f"{namespace}/{a}/data/no.parquet", Body=b"x"))
    assert refused(lambda: keys.delete_object(Bucket=bucket, Key=key))
    # Through the signer: reads signed, writes refused, for the same user.
    for_reader = writer(delegating_server, reader, SIGNED).load_table(f"{namespace}.{a}")
    assert sorted_rows(for_reader) == [(1, "a")]
    with pytest.raises(Exception, match=r"403|Forbidden|sign"):
        for_reader.append(rows((2, "b")))


def test_the_signer_signs_only_the_grants_table_and_user(
    delegating_server: Deployment, owner: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    namespace, a, ab = two_tables
    url = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{a}"
    loaded = signed(owner, "GET", url, b"", **{"X-Iceberg-Access-Delegation": SIGNED}).json()
    config = loaded["config"]
    assert config["s3.remote-signing-enabled"] == "true" and "s3.access-key-id" not in config
    signer = f"{config['s3.signer.uri']}/{config['s3.signer.endpoint']}"
    endpoint = config["s3.endpoint"]

    def sign(method: str, key: str, bucket: str = WAREHOUSE) -> httpx.Response:
        body = {"method": method, "region": "us-east-1", "uri": f"{endpoint}/{bucket}/{key}", "headers": {}}
        return httpx.post(signer, json=body)

    assert sign("PUT", f"{namespace}/{a}/data/x.parquet").status_code == 200
    assert sign("GET", f"{namespace}/{a}/metadata/x.json").status_code == 200
    for method, key, bucket in (
        ("PUT", f"{namespace}/{ab}/data/x.parquet", WAREHOUSE),
        ("GET", f"{namespace}/{ab}/data/x.parquet", WAREHOUSE),
        ("PUT", "x.parquet", WAREHOUSE),
        ("PUT", f"{namespace}/{a}/data/x.parquet", OTHER),
        ("PUT", f"{namespace}/{a}/../{ab}/x.parquet", WAREHOUSE),
        ("GET", f"{namespace}/{a}/data/x.parquet?acl", WAREHOUSE),
        ("PUT", f"{namespace}/{a}%2F..%2F{ab}/x.parquet", WAREHOUSE),
        ("PUT", f"{namespace}/{a}/%2E%2E/{ab}/x.parquet", WAREHOUSE),
        ("PUT", f"{namespace}/{a}/data/x.parquet#{namespace}/{ab}", WAREHOUSE),
        ("DELETE", f"{namespace}/{ab}/metadata/00000.metadata.json", WAREHOUSE),
    ):
        answer = sign(method, key, bucket)
        assert answer.status_code == 403, (method, key, bucket, answer.text)
        assert answer.json()["error"]["type"] == "ForbiddenException"
    # A grant altered, or handed to another warehouse's signer, signs nothing.
    tampered = signer[:-3] + ("AAA" if not signer.endswith("AAA") else "BBB")
    body = {
        "method": "GET",
        "region": "us-east-1",
        "uri": f"{endpoint}/{WAREHOUSE}/{namespace}/{a}/x",
        "headers": {},
    }
    assert httpx.post(tampered, json=body).status_code == 403
    assert httpx.post(signer.replace(f"/v1/{WAREHOUSE}/", f"/v1/{OTHER}/"), json=body).status_code == 403


def test_a_removed_user_stops_signing_and_a_user_may_not_load_keys_it_has_no_data_right_for(
    delegating_server: Deployment, owner: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    namespace, a, _ = two_tables
    users = CatalogUsers(delegating_server.store.transactions, delegating_server.secret)
    brief = users.create("brief")
    url = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{a}"
    config = signed(brief, "GET", url, b"", **{"X-Iceberg-Access-Delegation": SIGNED}).json()["config"]
    signer = f"{config['s3.signer.uri']}/{config['s3.signer.endpoint']}"
    uri = f"{config['s3.endpoint']}/{WAREHOUSE}/{namespace}/{a}/x"
    body = {"method": "GET", "region": "us-east-1", "uri": uri, "headers": {}}
    assert httpx.post(signer, json=body).status_code == 200
    users.remove("brief")
    assert httpx.post(signer, json=body).status_code == 403
    metadata_actions = ["s3tables:GetTable", "s3tables:GetTableMetadataLocation"]
    nodata = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": metadata_actions, "Resource": ["arn:aws:s3tables:::bucket/*"]}
        ],
    }
    metadata_only = users.create("metadata-only", json.dumps(nodata))
    answer = signed(metadata_only, "GET", url, b"", **{"X-Iceberg-Access-Delegation": VENDED})
    assert answer.status_code == 403 and "GetTableData" in answer.text
    assert signed(metadata_only, "GET", url).status_code == 200  # metadata alone, as before


def test_the_credentials_endpoint_refreshes_keys_and_config_lists_it(
    delegating_server: Deployment, owner: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    namespace, a, _ = two_tables
    url = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{a}/credentials"
    answer = signed(owner, "GET", url)
    assert answer.status_code == 200, answer.text
    credentials = answer.json()["storage-credentials"]
    assert credentials[0]["prefix"] == f"s3://{WAREHOUSE}/{namespace}/{a}/"
    assert s3_with(credentials[0]["config"]).list_objects_v2(Bucket=WAREHOUSE, Prefix=f"{namespace}/{a}/")
    config = signed(owner, "GET", f"{root(delegating_server)}/v1/config?warehouse={WAREHOUSE}").json()
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials" in config["endpoints"]


def test_duckdb_creates_a_table_and_inserts_with_vended_keys(
    delegating_server: Deployment, owner: IssuedUser
) -> None:
    from tests.end_to_end.test_warehouse_engines import duck_rows, duckdb_connection

    connection = duckdb_connection()
    catalog = root(delegating_server)
    try:
        connection.execute(
            f"CREATE SECRET writers (TYPE iceberg, CLIENT_ID '{owner.access_key}', "
            f"CLIENT_SECRET '{owner.secret_key}', OAUTH2_SERVER_URI '{catalog}/v1/oauth/tokens')"
        )
        connection.execute(
            f"ATTACH '{WAREHOUSE}' AS lake (TYPE iceberg, ENDPOINT '{catalog}', SECRET writers, "
            "ACCESS_DELEGATION_MODE 'vended_credentials')"
        )
        connection.execute("CREATE SCHEMA lake.duck")
        connection.execute("CREATE TABLE lake.duck.made (id BIGINT, name VARCHAR)")
        connection.execute("INSERT INTO lake.duck.made VALUES (1, 'a'), (2, 'b')")
        assert duck_rows(connection, "SELECT id, name FROM lake.duck.made") == [[1, "a"], [2, "b"]]
    finally:
        connection.close()


# -- the writers' signer under attack: a user allowed one namespace --------------------------------

ATT = "att"


def one_namespace_policy(warehouse: str) -> dict[str, Any]:
    """Everything on the tables of namespace `att` of `warehouse`, its reads, nothing elsewhere."""
    arn = "arn:aws:s3tables:::bucket/"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3tables:*"], "Resource": [f"{arn}{warehouse}/table/{ATT}/*"]},
            {
                "Effect": "Allow",
                "Action": ["s3tables:GetTableBucket", "s3tables:GetNamespace", "s3tables:ListTables"],
                "Resource": [f"{arn}{warehouse}"],
            },
        ],
    }


@pytest.fixture(scope="module")
def attacker(delegating_server: Deployment, owner: IssuedUser) -> IssuedUser:
    """Everything on the tables of namespace `att` of the writers' warehouse, nothing elsewhere."""
    policy = one_namespace_policy(WAREHOUSE)
    writer(delegating_server, owner, VENDED).create_namespace(ATT)
    return CatalogUsers(delegating_server.store.transactions, delegating_server.secret).create(
        "attacker", json.dumps(policy)
    )


def signer_of(server: Deployment, user: IssuedUser, namespace: str, table: str) -> tuple[str, str]:
    """The signer URL of a remote-signing load of the table by `user`, and the store's endpoint."""
    url = f"{root(server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}"
    loaded = signed(user, "GET", url, b"", **{"X-Iceberg-Access-Delegation": SIGNED})
    assert loaded.status_code == 200, loaded.text
    config = loaded.json()["config"]
    return f"{config['s3.signer.uri']}/{config['s3.signer.endpoint']}", config["s3.endpoint"]


def sign_at(
    signer: str, method: str, uri: str, headers: dict[str, list[str]] | None = None
) -> httpx.Response:
    return httpx.post(
        signer, json={"method": method, "region": "us-east-1", "uri": uri, "headers": headers or {}}
    )


def sent(answer: httpx.Response, method: str, own: dict[str, str] | None = None) -> httpx.Response:
    """The signed request sent to the store as the signer answered it (its URI, its headers), with
    the client's `own` headers it had signed."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    headers = {name: ", ".join(values) for name, values in body["headers"].items()}
    return httpx.request(method, body["uri"], headers={**(own or {}), **headers})


def victim_file(server: Deployment, owner: IssuedUser) -> tuple[str, str]:
    """A data file of a table in another warehouse: (bucket, key)."""
    catalog = writer(server, owner, VENDED, OTHER)
    catalog.create_namespace_if_not_exists("victims")
    name = f"victims.t{uuid.uuid4().hex[:6]}"
    table = catalog.create_table(name, schema=ROWS)
    table.append(rows((1, "secret")))
    path = next(f.file.file_path for f in catalog.load_table(name).scan().plan_files())
    bucket, _, key = path.removeprefix("s3://").partition("/")
    return bucket, key


def test_a_copy_source_outside_the_grant_is_refused_and_one_inside_is_signed(
    delegating_server: Deployment, owner: IssuedUser, attacker: IssuedUser
) -> None:
    """A PUT into the caller's own table that copies another warehouse's file, as one object or as a
    part of a multipart upload: refused. A copy within the table itself is signed and works."""
    victim_bucket, victim_key = victim_file(delegating_server, owner)
    mine = writer(delegating_server, attacker, SIGNED).create_table(
        f"{ATT}.copier_{uuid.uuid4().hex[:6]}", schema=ROWS
    )
    mine.append(rows((7, "mine")))
    name = mine.name()[-1]
    signer, endpoint = signer_of(delegating_server, attacker, ATT, name)
    own_key = mine.location().removeprefix(f"s3://{WAREHOUSE}/")
    target = f"{endpoint}/{WAREHOUSE}/{own_key}/data/stolen.parquet"
    for source in (f"/{victim_bucket}/{victim_key}", f"{victim_bucket}/{victim_key}",
                   f"/{victim_bucket}/{quote(victim_key, safe='')}"):  # fmt: skip
        answer = sign_at(signer, "PUT", target, {"x-amz-copy-source": [source]})
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["type"] == "ForbiddenException"
    # The part-copy of a multipart upload: begun by the store for real, then the copy refused.
    begun = sent(sign_at(signer, "POST", f"{target}?uploads"), "POST")
    assert begun.status_code == 200, begun.text
    upload_id = begun.text.split("<UploadId>")[1].split("</UploadId>")[0]
    part = f"{target}?partNumber=1&uploadId={upload_id}"
    answer = sign_at(signer, "PUT", part, {"x-amz-copy-source": [f"/{victim_bucket}/{victim_key}"]})
    assert answer.status_code == 403, answer.text
    assert sent(sign_at(signer, "DELETE", f"{target}?uploadId={upload_id}"), "DELETE").status_code == 204
    seaweed = delegating_server.seaweed  # type: ignore[attr-defined]
    assert "Contents" not in seaweed.client().list_objects_v2(
        Bucket=WAREHOUSE, Prefix=f"{own_key}/data/stolen"
    )
    # Within the grant's own table, a copy is signed, and the store makes it.
    own_file = next(f.file.file_path for f in mine.scan().plan_files()).removeprefix(f"s3://{WAREHOUSE}/")
    copy = {"x-amz-copy-source": f"/{WAREHOUSE}/{own_file}"}
    copied = sent(sign_at(signer, "PUT", target, {k: [v] for k, v in copy.items()}), "PUT", copy)
    assert copied.status_code == 200, copied.text
    assert (
        seaweed.client().get_object(Bucket=WAREHOUSE, Key=f"{own_key}/data/stolen.parquet")["Body"].read()[:4]
        == b"PAR1"
    )
    refusals = [r for r in audit_records(delegating_server) if "copy" in json.dumps(r.get("signing", {}))]
    assert any(victim_key in json.dumps(r) and r["status"] == 403 for r in refusals)


def test_the_writers_signer_refuses_the_host_form_and_headers_it_does_not_sign(
    delegating_server: Deployment, owner: IssuedUser, attacker: IssuedUser
) -> None:
    """`http://<bucket>.<store>/<other bucket>/<key>`: a store without virtual hosts serves the other
    bucket. Refused, as is every x-amz header the signer does not know."""
    victim_bucket, victim_key = victim_file(delegating_server, owner)
    mine = writer(delegating_server, attacker, SIGNED).create_table(
        f"{ATT}.host_{uuid.uuid4().hex[:6]}", schema=ROWS
    )
    name = mine.name()[-1]
    signer, endpoint = signer_of(delegating_server, attacker, ATT, name)
    scheme, _, host = endpoint.partition("://")
    own = mine.location().removeprefix(f"s3://{WAREHOUSE}/")
    for uri in (
        f"{scheme}://{WAREHOUSE}.{host}/{victim_bucket}/{victim_key}",
        f"{scheme}://{WAREHOUSE}.{host}/{own}/data/x.parquet",
    ):
        for method in ("GET", "PUT", "DELETE"):
            answer = sign_at(signer, method, uri)
            assert answer.status_code == 403, (method, uri, answer.text)
            assert "path style" in answer.json()["error"]["message"]
    inside = f"{endpoint}/{WAREHOUSE}/{own}/data/x.parquet"
    unsigned = ("x-amz-acl", "x-amz-tagging", "x-amz-object-lock-mode", "x-amz-grant-full-control")
    unsigned += ("x-amz-server-side-encryption-customer-key", "x-amz-website-redirect-location")
    for header in unsigned:
        answer = sign_at(signer, "PUT", inside, {header: ["v"]})
        assert answer.status_code == 403 and header in answer.text, header
    # What is signed is the request the signer built: the answer's URI, in path style.
    good = sign_at(signer, "PUT", inside, {"Content-Type": ["application/octet-stream"], "User-Agent": ["x"]})
    assert good.status_code == 200 and good.json()["uri"] == inside
    # Signed with keys from STS scoped to the table's location (vending is on), not the server's.
    seaweed = delegating_server.seaweed  # type: ignore[attr-defined]
    assert good.json()["headers"]["x-amz-security-token"]
    assert f"Credential={seaweed.access_key}/" not in good.json()["headers"]["Authorization"][0]
    assert "content-type" in good.json()["headers"]["Authorization"][0]
    assert "user-agent" not in good.json()["headers"]["Authorization"][0]


def test_a_signing_grant_ends_when_its_table_is_renamed_away_or_dropped(
    delegating_server: Deployment, owner: IssuedUser, attacker: IssuedUser
) -> None:
    """A grant taken while the table was in the caller's namespace signs nothing once the owner
    renamed it out, or dropped it, even before the grant's hour is up; a new table under the old
    name is another table."""
    owners = writer(delegating_server, owner, VENDED)
    owners.create_namespace_if_not_exists("payroll")
    suffix = uuid.uuid4().hex[:6]
    table = owners.create_table(f"{ATT}.moving_{suffix}", schema=ROWS)
    table.append(rows((1, "salary")))
    data = next(f.file.file_path for f in table.scan().plan_files()).removeprefix(f"s3://{WAREHOUSE}/")
    signer, endpoint = signer_of(delegating_server, attacker, ATT, f"moving_{suffix}")
    delete = f"{endpoint}/{WAREHOUSE}/{data}"
    assert sign_at(signer, "GET", delete).status_code == 200
    owners.rename_table(f"{ATT}.moving_{suffix}", f"payroll.moving_{suffix}")
    for method in ("GET", "DELETE"):
        answer = sign_at(signer, method, delete)
        assert answer.status_code == 403 and "load the table again" in answer.text, answer.text
    # Renamed back, it is the grant's table again; then replaced by a new one under the name: not.
    owners.rename_table(f"payroll.moving_{suffix}", f"{ATT}.moving_{suffix}")
    assert sign_at(signer, "GET", delete).status_code == 200
    owners.drop_table(f"{ATT}.moving_{suffix}")
    assert sign_at(signer, "DELETE", delete).status_code == 403
    owners.create_table(f"{ATT}.moving_{suffix}", schema=ROWS)
    assert sign_at(signer, "DELETE", delete).status_code == 403


def test_vended_keys_after_their_table_moved_refresh_nothing_and_reach_only_its_folder(
    delegating_server: Deployment, owner: IssuedUser, attacker: IssuedUser
) -> None:
    """Keys vended while the table was in the caller's namespace: once the owner renamed it out, the
    credentials refresh is refused under either name. Keys already out cannot be revoked (STS);
    they end on their own (15 minutes), and meanwhile still reach that one folder only: not the
    table the owner made under the old name, nor the new table's neighbours."""
    owners = writer(delegating_server, owner, VENDED)
    owners.create_namespace_if_not_exists("payroll")
    suffix = uuid.uuid4().hex[:6]
    owners.create_table(f"{ATT}.keyed_{suffix}", schema=ROWS).append(rows((1, "salary")))
    config = vended_config(delegating_server, attacker, ATT, f"keyed_{suffix}")
    owners.rename_table(f"{ATT}.keyed_{suffix}", f"payroll.keyed_{suffix}")
    for namespace in (ATT, "payroll"):
        tables = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables"
        url = f"{tables}/keyed_{suffix}/credentials"
        assert signed(attacker, "GET", url).status_code in (403, 404), namespace
    replacement = owners.create_table(f"{ATT}.keyed_{suffix}", schema=ROWS)
    replacement.append(rows((2, "new")))
    new_file = next(f.file.file_path for f in replacement.scan().plan_files())
    keys = s3_with(config)
    bucket, _, key = new_file.removeprefix("s3://").partition("/")
    assert refused(lambda: keys.get_object(Bucket=bucket, Key=key))
    assert refused(lambda: keys.put_object(Bucket=bucket, Key=f"{ATT}/elsewhere/x.parquet", Body=b"x"))


def test_a_staged_creates_grant_ends_once_another_table_holds_its_location(
    delegating_server: Deployment, owner: IssuedUser, attacker: IssuedUser
) -> None:
    """A staged create's grant signs before its table exists; once committed and renamed away by
    the owner, its location is claimed by a table the caller may not touch: no signature."""
    name = f"staged_{uuid.uuid4().hex[:6]}"
    url = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{ATT}/tables"
    schema = Schema(NestedField(1, "id", LongType(), required=True))
    body = {"name": name, "schema": json.loads(schema.model_dump_json()), "stage-create": True}
    staged = signed(
        attacker, "POST", url, json.dumps(body).encode(), **{"X-Iceberg-Access-Delegation": SIGNED}
    )
    assert staged.status_code == 200, staged.text
    config = staged.json()["config"]
    signer = f"{config['s3.signer.uri']}/{config['s3.signer.endpoint']}"
    location = staged.json()["metadata"]["location"].removeprefix(f"s3://{WAREHOUSE}/")
    inside = f"{config['s3.endpoint']}/{WAREHOUSE}/{location}/data/x.parquet"
    assert sign_at(signer, "PUT", inside).status_code == 200  # no table has the name yet
    # The owner makes a table of that name at that very location: another table than the staged one.
    owners = writer(delegating_server, owner, VENDED)
    owners.create_namespace_if_not_exists("payroll")
    owners.create_table(f"{ATT}.{name}", schema=ROWS, location=f"s3://{WAREHOUSE}/{location}")
    assert sign_at(signer, "PUT", inside).status_code == 403
    # Renamed out of the caller's namespace, it still holds the location: no table has the name,
    # yet the grant signs nothing there.
    owners.rename_table(f"{ATT}.{name}", f"payroll.{name}")
    answer = sign_at(signer, "PUT", inside)
    assert answer.status_code == 403 and "load the table again" in answer.text


def test_the_store_bounds_what_a_signature_reaches_even_past_the_signers_checks(
    seaweed: SeaweedS3, owner: IssuedUser, delegating_server: Deployment
) -> None:
    """Defence in depth: were the signer's parser wrong, the keys it signs with are the table's (STS,
    a session policy of the grant's location, read-only for reads), so SeaweedFS refuses a request
    outside it that the parser let through. Here the parser is bypassed on purpose."""
    from share_store.catalog.data_access import DataAccess
    from share_store.catalog.names import TableName
    from share_store.signing.request_signing import ObjectRequest
    from share_store.signing.token_codec import TokenCodec
    from share_store.storage.s3 import S3Settings, S3Storage
    from share_store.storage.sts_vending import CredentialVendor, VendingSettings
    from share_store.storage.table_location import TableLocation

    victim_bucket, victim_key = victim_file(delegating_server, owner)
    settings = S3Settings(seaweed.endpoint, None, seaweed.region, seaweed.access_key, seaweed.secret_key)
    vendor = CredentialVendor(VendingSettings("sts", WRITER_ROLE_ARN))
    data = DataAccess(S3Storage(settings), (VENDED, SIGNED), vendor, TokenCodec(b"k" * 32, "test"))
    granted = TableLocation(f"s3://{WAREHOUSE}/att/mine", WAREHOUSE, "att/mine")
    table = TableName.of(WAREHOUSE, ("att",), "mine")

    def send(method: str, bucket: str, key: str, reads: bool) -> int:
        uri = f"{seaweed.endpoint}/{bucket}/{key}"
        request = ObjectRequest(method, bucket, key, uri, {})
        headers = data._signer(table, granted, reads).sign(request)
        flat = {name: values[0] for name, values in headers.items()}
        return httpx.request(method, uri, headers=flat, content=b"x" if method == "PUT" else None).status_code

    assert send("PUT", WAREHOUSE, "att/mine/data/ok.parquet", reads=False) == 200
    assert send("GET", WAREHOUSE, "att/mine/data/ok.parquet", reads=True) == 200
    assert send("GET", victim_bucket, victim_key, reads=True) == 403
    assert send("PUT", WAREHOUSE, "att/other/data/x.parquet", reads=False) == 403
    assert send("DELETE", victim_bucket, victim_key, reads=False) == 403
    assert send("PUT", WAREHOUSE, "att/mine/data/by-reader.parquet", reads=True) == 403  # read-only keys


def test_a_purge_with_vending_on_deletes_the_tables_files_with_keys_bounded_to_them(
    seaweed: SeaweedS3, owner: IssuedUser, delegating_server: Deployment
) -> None:
    """A drop with purge on a server whose store has STS: every file of the table goes, through
    storage whose keys are the table's (`storage.table_keys`); those keys, asked to delete or read
    another table's file, are refused by SeaweedFS itself."""
    from share_store.storage.s3 import S3Settings, S3Storage
    from share_store.storage.sts_vending import CredentialVendor, VendingSettings
    from share_store.storage.table_keys import TableKeys
    from share_store.storage.table_location import TableLocation

    catalog = writer(delegating_server, owner, VENDED)
    catalog.create_namespace_if_not_exists("purged")
    table = catalog.create_table(f"purged.t{uuid.uuid4().hex[:6]}", schema=ROWS)
    table.append(rows((1, "a")))
    prefix = table.location().removeprefix(f"s3://{WAREHOUSE}/")
    listed = seaweed.client().list_objects_v2(Bucket=WAREHOUSE, Prefix=f"{prefix}/")
    assert listed.get("KeyCount", 0) >= 3
    catalog.purge_table(table.name())
    assert seaweed.client().list_objects_v2(Bucket=WAREHOUSE, Prefix=f"{prefix}/").get("KeyCount", 0) == 0

    victim_bucket, victim_key = victim_file(delegating_server, owner)
    settings = S3Settings(seaweed.endpoint, None, seaweed.region, seaweed.access_key, seaweed.secret_key)
    keys = TableKeys(S3Storage(settings), CredentialVendor(VendingSettings("sts", WRITER_ROLE_ARN)))
    location = TableLocation(f"s3://{WAREHOUSE}/att/bounded", WAREHOUSE, "att/bounded")
    bounded = keys.storage_for(location)
    assert bounded is keys.storage_for(location)  # kept while its keys last
    bounded.write(WAREHOUSE, "att/bounded/data/x.parquet", b"x")
    assert bounded.read(WAREHOUSE, "att/bounded/data/x.parquet") == b"x"
    bounded.delete(WAREHOUSE, ["att/bounded/data/x.parquet"])
    # Another warehouse's file, and one of a folder extending the location as a string.
    seaweed.client().put_object(Bucket=WAREHOUSE, Key="att/boundedx/data/y.parquet", Body=b"y")
    for bucket, key in ((victim_bucket, victim_key), (WAREHOUSE, "att/boundedx/data/y.parquet")):
        with pytest.raises(Exception):  # noqa: B017 - the store's refusal, as our storage maps it
            bounded.read(bucket, key)
        with contextlib.suppress(Exception):  # refused outright or per key: either way, nothing goes
            bounded.delete(bucket, [key])
        assert seaweed.client().head_object(Bucket=bucket, Key=key)["ContentLength"] > 0


def test_maintenance_rewrites_and_removes_with_keys_bounded_to_the_table(
    delegating_server: Deployment, owner: IssuedUser
) -> None:
    """Compaction and unreferenced file removal on a server whose store has STS: the files are read,
    written and deleted through storage whose keys SeaweedFS bounds to the table's location; the
    rows are kept, the small files are one."""
    catalog = writer(delegating_server, owner, VENDED)
    catalog.create_namespace_if_not_exists("kept")
    name = f"t{uuid.uuid4().hex[:6]}"
    table = catalog.create_table(f"kept.{name}", schema=ROWS)
    for n in range(4):
        table.append(rows((n, f"r{n}")))
    url = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/kept/tables/{name}/maintenance/run"
    ran = signed(owner, "POST", url, b"")
    assert ran.status_code == 200, ran.text
    runs = ran.json()["runs"]
    assert runs["icebergCompaction"]["status"] == "Successful", runs
    assert runs["icebergCompaction"]["details"]["files_rewritten"] == 4, runs
    assert runs["icebergUnreferencedFileRemoval"]["status"] == "Successful", runs
    compacted = catalog.load_table(f"kept.{name}")
    assert sorted_rows(compacted) == [(n, f"r{n}") for n in range(4)]
    assert len(list(compacted.scan().plan_files())) == 1


@pytest.mark.parametrize("mode", [VENDED, SIGNED])
def test_a_load_with_keys_or_a_signing_grant_is_untagged_and_never_answers_304(
    delegating_server: Deployment, owner: IssuedUser, two_tables: tuple[str, str, str], mode: str
) -> None:
    """Keys and signing grants expire: such an answer carries no `ETag`, and a tag of the plain load
    sent with it still gets the whole answer with fresh ones (issue 52), so a 304 can never leave an
    engine holding expired credentials."""
    namespace, a, _ = two_tables
    url = f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{a}"
    plain = signed(owner, "GET", url)
    assert plain.status_code == 200 and plain.json()["config"] == {}
    tag = plain.headers["etag"]
    for match in (tag, "*"):
        delegated = signed(
            owner, "GET", url, b"", **{"X-Iceberg-Access-Delegation": mode, "If-None-Match": match}
        )
        assert delegated.status_code == 200, delegated.text
        assert "etag" not in delegated.headers and delegated.headers["cache-control"] == "no-store"
        config = delegated.json()["config"]
        assert ("s3.session-token" in config) if mode == VENDED else ("s3.signer.endpoint" in config)
    assert signed(owner, "GET", url, b"", **{"If-None-Match": tag}).status_code == 304


# -- the spec's signer (Iceberg 1.11): POST /v1/{prefix}/namespaces/{ns}/tables/{t}/sign ----------


def spec_sign(
    server: Deployment, user: IssuedUser, namespace: str, table: str, request: dict[str, Any]
) -> httpx.Response:
    """The spec's signer of `namespace.table`, called with the catalog user's own SigV4 proof."""
    url = f"{root(server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{table}/sign"
    return signed(user, "POST", url, json.dumps(request).encode())


BATCH_DELETE = "<Delete><Object><Key>x</Key></Object></Delete>"


def sign_body(method: str, uri: str, **more: Any) -> dict[str, Any]:
    return {"method": method, "region": "us-east-1", "uri": uri, "headers": {}, **more}


def test_the_spec_signer_signs_for_the_caller_inside_the_table_only(
    delegating_server: Deployment, owner: IssuedUser, reader: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    """The same decision as the grant's signer, with the caller authenticated as for any call and
    the table named by the path: inside the table, what the caller's policy allows; anything else
    refused in the spec's error model."""
    namespace, a, ab = two_tables
    config = signed(owner, "GET", f"{root(delegating_server)}/v1/config?warehouse={WAREHOUSE}").json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign" in config["endpoints"]
    _, endpoint = signer_of(delegating_server, owner, namespace, a)
    inside = f"{endpoint}/{WAREHOUSE}/{namespace}/{a}/data/spec-signed.parquet"
    put = spec_sign(delegating_server, owner, namespace, a, sign_body("PUT", inside, provider="s3"))
    assert put.headers["cache-control"] == "no-store"
    assert sent(put, "PUT").status_code == 200  # the store takes the signature
    got = spec_sign(delegating_server, owner, namespace, a, sign_body("GET", inside))  # no provider: s3
    assert sent(got, "GET").status_code == 200
    host = endpoint.split("//", 1)[1]
    for request, status in (
        (sign_body("GET", f"{endpoint}/{WAREHOUSE}/{namespace}/{ab}/data/x.parquet"), 403),  # another table
        (sign_body("GET", f"{endpoint}/{OTHER}/{namespace}/{a}/data/x.parquet"), 403),  # another bucket
        (sign_body("GET", f"http://evil.example/{WAREHOUSE}/{namespace}/{a}/x"), 403),  # a host not ours
        (sign_body("GET", f"http://{WAREHOUSE}.{host}/{namespace}/{a}/x"), 403),  # virtual host
        (sign_body("GET", f"{endpoint}/{WAREHOUSE}/{namespace}/{a}/../{ab}/x"), 403),
        (sign_body("GET", f"{endpoint}/{WAREHOUSE}?list-type=2&prefix={namespace}/"), 403),  # a listing
        # A batch delete (`POST ?delete`, its keys in the body) is not signed, inside or out.
        (sign_body("POST", f"{endpoint}/{WAREHOUSE}?delete", body=BATCH_DELETE), 403),
        (sign_body("POST", f"{endpoint}/{WAREHOUSE}/{namespace}/{a}/x?delete"), 403),
        (sign_body("GET", inside, provider="gcs"), 400),
        (sign_body("GET", inside, provider=7), 400),
        (sign_body("GET", inside, region=["us-east-1"]), 400),
        ({"method": "GET"}, 400),
    ):  # fmt: skip
        answer = spec_sign(delegating_server, owner, namespace, a, request)
        assert answer.status_code == status, (request, answer.text)
        error = answer.json()["error"]
        assert error["code"] == status and error["type"] in ("ForbiddenException", "BadRequestException")
    # A read-only user: reads signed, writes refused.
    assert spec_sign(delegating_server, reader, namespace, a, sign_body("GET", inside)).status_code == 200
    refused_put = spec_sign(delegating_server, reader, namespace, a, sign_body("PUT", inside))
    assert refused_put.status_code == 403 and refused_put.json()["error"]["type"] == "ForbiddenException"
    # No proof, or a table that is not there: refused before anything is signed.
    anonymous = httpx.post(
        f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/{namespace}/tables/{a}/sign",
        json=sign_body("GET", inside),
    )
    assert anonymous.status_code in (401, 403) and anonymous.json()["error"]["code"] == anonymous.status_code
    missing = spec_sign(delegating_server, owner, namespace, "nope", sign_body("GET", inside))
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"


def test_the_spec_signer_of_another_namespaces_table_obeys_the_callers_policy(
    delegating_server: Deployment, owner: IssuedUser, attacker: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    """A user allowed on namespace `att` only names another namespace's table in the path: refused."""
    namespace, a, _ = two_tables
    _, endpoint = signer_of(delegating_server, owner, namespace, a)
    inside = f"{endpoint}/{WAREHOUSE}/{namespace}/{a}/data/x.parquet"
    for method in ("GET", "PUT"):
        answer = spec_sign(delegating_server, attacker, namespace, a, sign_body(method, inside))
        assert answer.status_code == 403, answer.text


def test_a_nested_namespace_through_the_advertised_separator(
    delegating_server: Deployment, owner: IssuedUser
) -> None:
    """`namespace-separator` is `%1F` in /v1/config, and a nested namespace reached through it signs."""
    config = signed(owner, "GET", f"{root(delegating_server)}/v1/config?warehouse={WAREHOUSE}").json()
    assert config["overrides"]["namespace-separator"] == "%1F"
    catalog = writer(delegating_server, owner, SIGNED)
    catalog.create_namespace_if_not_exists(("outer",))
    catalog.create_namespace_if_not_exists(("outer", "inner"))
    table = catalog.create_table(("outer", "inner", f"t{uuid.uuid4().hex[:6]}"), schema=ROWS)
    table.append(rows((1, "nested")))
    name = table.name()[-1]
    loaded = signed(
        owner, "GET", f"{root(delegating_server)}/v1/{WAREHOUSE}/namespaces/outer%1Finner/tables/{name}"
    )
    assert loaded.status_code == 200, loaded.text
    data = next(f.file.file_path for f in table.scan().plan_files())
    bucket, _, key = data.removeprefix("s3://").partition("/")
    _, endpoint = signer_of(delegating_server, owner, "outer%1Finner", name)
    answer = spec_sign(
        delegating_server, owner, "outer%1Finner", name, sign_body("GET", f"{endpoint}/{bucket}/{key}")
    )
    assert sent(answer, "GET").content[:4] == b"PAR1"


def delete_body(*keys: str, extra: str = "") -> str:
    objects = "".join(f"<Object><Key>{key}</Key>{extra}</Object>" for key in keys)
    head = '<?xml version="1.0" encoding="UTF-8"?>'
    return f'{head}<Delete xmlns="{S3_XMLNS}">{objects}<Quiet>true</Quiet></Delete>'


S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


def test_a_batch_delete_is_signed_only_for_keys_inside_the_table_and_only_with_its_body(
    delegating_server: Deployment, owner: IssuedUser, reader: IssuedUser, two_tables: tuple[str, str, str]
) -> None:
    """`POST /{bucket}?delete` with the keys in its body (the Java client's DeleteObjects, its body in
    the signing request since 1.11): every key must be inside the table; the body's hash is signed,
    so the store refuses another body sent with the signature. Both signers decide alike."""
    namespace, a, ab = two_tables
    signer, endpoint = signer_of(delegating_server, owner, namespace, a)
    store = delegating_server.seaweed.client()  # type: ignore[attr-defined]
    mine = [f"{namespace}/{a}/data/batch-{n}.parquet" for n in range(2)]
    theirs = f"{namespace}/{ab}/data/keep.parquet"
    for key in [*mine, theirs]:
        store.put_object(Bucket=WAREHOUSE, Key=key, Body=b"x")
    url = f"{endpoint}/{WAREHOUSE}?delete"

    def md5(text: str) -> dict[str, list[str]]:
        return {"Content-MD5": [base64.b64encode(hashlib.md5(text.encode()).digest()).decode()],
                "Content-Type": ["application/xml"]}  # fmt: skip

    def signed_delete(body: str, via_grant: bool = False, user: IssuedUser = owner) -> httpx.Response:
        request = sign_body("POST", url, body=body, headers=md5(body))
        if via_grant:
            return httpx.post(signer, json=request)
        return spec_sign(delegating_server, user, namespace, a, request)

    for body in (
        delete_body(mine[0], theirs),  # one key outside among keys inside
        delete_body(f"{namespace}/{a}/../{ab}/data/keep.parquet"),
        delete_body(mine[0], extra="<VersionId>v1</VersionId>"),
        f'<!DOCTYPE d [<!ENTITY e "{mine[0]}">]><Delete><Object><Key>&e;</Key></Object></Delete>',
        "<Delete></Delete>",
        "not xml",
    ):
        for via_grant in (False, True):
            answer = signed_delete(body, via_grant)
            assert answer.status_code == 403, (body, via_grant, answer.text)
            assert answer.json()["error"]["type"] == "ForbiddenException"
    assert (
        spec_sign(delegating_server, owner, namespace, a, sign_body("POST", url)).status_code == 403
    )  # no body
    assert signed_delete(delete_body(*mine), user=reader).status_code == 403  # a reader deletes nothing

    body = delete_body(*mine)
    answer = signed_delete(body)
    assert answer.status_code == 200, answer.text
    signature = {name: ", ".join(values) for name, values in answer.json()["headers"].items()}
    # Another body under the same signature (the neighbour's key slipped in): the store refuses it.
    swapped = delete_body(theirs) + " " * (len(body) - len(delete_body(theirs)))
    refused_by_store = httpx.post(answer.json()["uri"], content=swapped.encode(), headers={**signature, **{
        name: values[0] for name, values in md5(swapped).items()}})  # fmt: skip
    assert refused_by_store.status_code in (400, 403), refused_by_store.text
    assert store.get_object(Bucket=WAREHOUSE, Key=theirs)["Body"].read() == b"x"
    own = {name: values[0] for name, values in md5(body).items()}
    deleted = httpx.post(answer.json()["uri"], content=body.encode(), headers={**own, **signature})
    assert deleted.status_code == 200, deleted.text
    left = store.list_objects_v2(Bucket=WAREHOUSE, Prefix=f"{namespace}/{a}/data/batch-").get("KeyCount")
    assert left == 0
    assert store.get_object(Bucket=WAREHOUSE, Key=theirs)["Body"].read() == b"x"
    # The grant's signer signs the same request alike.
    assert signed_delete(body, via_grant=True).status_code == 200
