"""Directory access (Delta Sharing 2026-02) on a live server over SeaweedFS with its STS.

A table shared whole, with its history, on S3 with `[iceberg] credential_vending = "sts"` is
listed with `accessModes: ["url", "dir"]` and its `location`; `POST .../temporary-table-credentials`
vends keys whose session policy SeaweedFS enforces: boto3 lists and reads the table's folder and
`deltalake` reads the table at `location` with them, as an engine with its own Delta reader does,
and they reach no sibling table, no other bucket, and write or delete nothing. A restricted table,
one without history and one on a local disk are `url` only, their credentials refused with why.
OpenSharing's `GET .../tables/{t}` names the table's `format`; the real `delta_sharing` client
still lists and reads with the new fields.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import delta_sharing
import httpx
import pandas as pd
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from deltalake import DeltaTable

from share_store.authentication.tokens import hash_secret
from sharing_server.cli import main
from testbed.seaweed import READER_ROLE_ARN, SeaweedS3, upload_tree
from tests.conftest import ADMIN_TOKEN, TESTDATA_BUCKET, Deployment, audit_lines, deploy
from tests.end_to_end.test_client_local import canonical

BUCKET = "dirtables"
OTHER_BUCKET = "dirother"
#: The table, a sibling whose path starts with the table's, and a table beside them.
TABLE_PATH = "tables/simple"
SIBLING_PATH = "tables/simple2"
PARTED_PATH = "tables/parted"
DURATION = 3600


@pytest.fixture(scope="module")
def deployment(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3, testdata: Path
) -> Iterator[Deployment]:
    client = seaweed.client()
    for bucket in (BUCKET, OTHER_BUCKET):
        client.create_bucket(Bucket=bucket)
    upload_tree(client, testdata / "simple_table", BUCKET, TABLE_PATH)
    upload_tree(client, testdata / "simple_table", BUCKET, SIBLING_PATH)
    upload_tree(client, testdata / "delta-0.8.0-partitioned", BUCKET, PARTED_PATH)
    upload_tree(client, testdata / "simple_table", OTHER_BUCKET, TABLE_PATH)
    env = {
        "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
        "SHARING_ICEBERG_CREDENTIAL_VENDING": "sts",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": READER_ROLE_ARN,
        "SHARING_ICEBERG_CREDENTIAL_DURATION": str(DURATION),
    }
    result = deploy(
        tmp_path_factory.mktemp("directory-access"), seaweed.storage_config(path_style="true"), env=env
    )
    result.share_tables(
        "dirs", {"simple": TABLE_PATH, "simple2": SIBLING_PATH, "parted": PARTED_PATH}, BUCKET
    )
    result.share_tables("latest", {"simple": TABLE_PATH}, BUCKET, history=False)
    result.share_tables("cut", {"simple": TABLE_PATH}, BUCKET)
    assert cli(result, "share", "restrict", "cut", "default/simple", "--where", "id > 1") == 0
    yield result
    result.server.stop()
    result.store.close()


def cli(deployment: Deployment, *args: str) -> int:
    return main(["--server", deployment.server.url, "--admin-token", ADMIN_TOKEN, *args])


def api(deployment: Deployment, share: str, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token or deployment.token(share)}"}
    return httpx.Client(base_url=deployment.endpoint, headers=headers, timeout=60)


def credentials_path(share: str, table: str, schema: str = "default") -> str:
    return f"/shares/{share}/schemas/{schema}/tables/{table}/temporary-table-credentials"


def vend(
    deployment: Deployment, share: str, table: str, token: str | None = None, **body: Any
) -> httpx.Response:
    with api(deployment, share, token) as client:
        return client.post(credentials_path(share, table), json=body or None)


def keys_of(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return answer.json()["credentials"]


def store_client(credentials: dict[str, Any], endpoint: str) -> Any:
    keys = credentials["awsTempCredentials"]
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=keys["accessKeyId"],
        aws_secret_access_key=keys["secretAccessKey"],
        aws_session_token=keys["sessionToken"],
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def denied(call: Any) -> bool:
    try:
        call()
    except ClientError as error:
        return error.response["Error"]["Code"] in ("AccessDenied", "403")
    return False


def a_parquet_key(seaweed: SeaweedS3, bucket: str, prefix: str) -> str:
    listed = seaweed.client().list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"]
    return next(item["Key"] for item in listed if item["Key"].endswith(".parquet"))


# -- the listing: accessModes, location, format --------------------------------------------


def test_a_whole_table_with_history_on_s3_is_listed_for_url_and_dir_access(deployment: Deployment) -> None:
    with api(deployment, "dirs") as client:
        items = {item["name"]: item for item in client.get("/shares/dirs/all-tables").json()["items"]}
        by_schema = client.get("/shares/dirs/schemas/default/tables").json()["items"]
    simple = items["simple"]
    assert simple["accessModes"] == ["url", "dir"]
    assert simple["location"] == f"s3://{BUCKET}/{TABLE_PATH}"
    assert simple["auxiliaryLocations"] == []
    assert simple["format"] == "delta"
    assert {item["name"]: item for item in by_schema}["simple"] == simple


@pytest.mark.parametrize(("share", "why"), [("latest", "its history is not shared"), ("cut", "restricted")])
def test_a_table_without_history_or_restricted_is_listed_for_url_access_only(
    deployment: Deployment, share: str, why: str
) -> None:
    with api(deployment, share) as client:
        (item,) = client.get(f"/shares/{share}/all-tables").json()["items"]
        got = client.get(f"/shares/{share}/schemas/default/tables/simple")
    assert item["accessModes"] == ["url"] and "location" not in item
    assert got.status_code == 200 and got.json()["table"]["accessModes"] == ["url"]
    refused = vend(deployment, share, "simple")
    assert refused.status_code == 403, refused.text
    assert refused.json()["errorCode"] == "PERMISSION_DENIED"
    assert refused.json()["message"].startswith(
        f"table {share}.default.simple is shared for URL access only: "
    )
    assert why in refused.json()["message"]
    # Not even a location under the table: the refusal comes before the location is looked at.
    under = vend(deployment, share, "simple", location=f"s3://{BUCKET}/{TABLE_PATH}/_delta_log")
    assert under.status_code == 403


def test_get_table_names_its_format_and_access_modes(deployment: Deployment) -> None:
    with api(deployment, "dirs") as client:
        got = client.get("/shares/DIRS/schemas/Default/tables/simple")
        missing = client.get("/shares/dirs/schemas/default/tables/nope")
    assert got.status_code == 200, got.text
    table = got.json()["table"]
    assert table["name"] == "simple" and table["share"] == "DIRS" and table["schema"] == "Default"
    assert table["format"] == "delta" and table["accessModes"] == ["url", "dir"]
    assert table["location"] == f"s3://{BUCKET}/{TABLE_PATH}"
    assert missing.status_code == 404 and missing.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"


def test_the_python_client_lists_and_reads_with_the_new_fields(deployment: Deployment) -> None:
    profile = deployment.profile("dirs")
    tables = delta_sharing.SharingClient(profile).list_all_tables()
    assert sorted(table.name for table in tables) == ["parted", "simple", "simple2"]
    frame = delta_sharing.load_as_pandas(f"{profile}#dirs.default.simple")
    assert len(frame) > 0


# -- the keys: what they read --------------------------------------------------------------


def test_vended_keys_list_and_read_the_tables_folder(deployment: Deployment, seaweed: SeaweedS3) -> None:
    credentials = keys_of(vend(deployment, "dirs", "simple"))
    assert credentials["location"] == f"s3://{BUCKET}/{TABLE_PATH}"
    store = store_client(credentials, seaweed.endpoint)
    listed = store.list_objects_v2(Bucket=BUCKET, Prefix=f"{TABLE_PATH}/")["Contents"]
    assert any(item["Key"].startswith(f"{TABLE_PATH}/_delta_log/") for item in listed)
    key = a_parquet_key(seaweed, BUCKET, TABLE_PATH)
    assert store.get_object(Bucket=BUCKET, Key=key)["Body"].read()[:4] == b"PAR1"


def test_deltalake_reads_the_table_at_its_location_with_the_vended_keys(
    deployment: Deployment, seaweed: SeaweedS3
) -> None:
    """An engine with its own Delta reader, reading the folder: every version, as shared by URL."""
    credentials = keys_of(vend(deployment, "dirs", "simple"))
    keys = credentials["awsTempCredentials"]
    options = {
        "AWS_ACCESS_KEY_ID": keys["accessKeyId"],
        "AWS_SECRET_ACCESS_KEY": keys["secretAccessKey"],
        "AWS_SESSION_TOKEN": keys["sessionToken"],
        "AWS_ENDPOINT_URL": seaweed.endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }
    profile = deployment.profile("dirs")
    latest = DeltaTable(credentials["location"], storage_options=options)
    for version in range(latest.version() + 1):
        direct = DeltaTable(credentials["location"], version=version, storage_options=options).to_pandas()
        shared = delta_sharing.load_as_pandas(f"{profile}#dirs.default.simple", version=version)
        pd.testing.assert_frame_equal(canonical(direct), canonical(shared))


def test_vended_keys_reach_no_sibling_no_other_bucket_and_write_nothing(
    deployment: Deployment, seaweed: SeaweedS3
) -> None:
    store = store_client(keys_of(vend(deployment, "dirs", "simple")), seaweed.endpoint)
    inside = a_parquet_key(seaweed, BUCKET, TABLE_PATH)
    sibling = a_parquet_key(seaweed, BUCKET, SIBLING_PATH)
    beside = a_parquet_key(seaweed, BUCKET, PARTED_PATH)
    elsewhere = a_parquet_key(seaweed, OTHER_BUCKET, TABLE_PATH)
    assert denied(lambda: store.get_object(Bucket=BUCKET, Key=sibling))  # `simple2` starts like `simple`
    assert denied(lambda: store.list_objects_v2(Bucket=BUCKET, Prefix=f"{SIBLING_PATH}/"))
    assert denied(lambda: store.list_objects_v2(Bucket=BUCKET, Prefix=TABLE_PATH))  # would list simple2
    assert denied(lambda: store.get_object(Bucket=BUCKET, Key=beside))
    assert denied(lambda: store.list_objects_v2(Bucket=BUCKET))
    assert denied(lambda: store.list_objects_v2(Bucket=BUCKET, Prefix="tables/"))
    assert denied(lambda: store.get_object(Bucket=OTHER_BUCKET, Key=elsewhere))  # same key, other bucket
    assert denied(lambda: store.list_objects_v2(Bucket=OTHER_BUCKET, Prefix=f"{TABLE_PATH}/"))
    assert denied(lambda: store.get_object(Bucket=TESTDATA_BUCKET, Key=inside))
    assert denied(lambda: store.put_object(Bucket=BUCKET, Key=f"{TABLE_PATH}/x.parquet", Body=b"x"))
    assert denied(lambda: store.put_object(Bucket=BUCKET, Key=f"{TABLE_PATH}/_delta_log/x.json", Body=b"{}"))
    assert denied(lambda: store.delete_object(Bucket=BUCKET, Key=inside))
    # A multi-object delete answers 200 with each key's error in its body.
    batch = store.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": inside}]})
    assert not batch.get("Deleted") and [error["Code"] for error in batch["Errors"]] == ["AccessDenied"]
    assert denied(lambda: store.create_bucket(Bucket="dirnew"))
    assert seaweed.client().get_object(Bucket=BUCKET, Key=inside)["Body"].read()[:4] == b"PAR1"  # still there


def test_keys_asked_for_a_folder_under_the_table_read_that_folder_only(
    deployment: Deployment, seaweed: SeaweedS3
) -> None:
    location = f"s3://{BUCKET}/{TABLE_PATH}/_delta_log"
    credentials = keys_of(vend(deployment, "dirs", "simple", location=location))
    assert credentials["location"] == location
    store = store_client(credentials, seaweed.endpoint)
    assert store.list_objects_v2(Bucket=BUCKET, Prefix=f"{TABLE_PATH}/_delta_log/")["Contents"]
    assert denied(lambda: store.get_object(Bucket=BUCKET, Key=a_parquet_key(seaweed, BUCKET, TABLE_PATH)))


@pytest.mark.parametrize(
    "location",
    [
        f"s3://{BUCKET}/{SIBLING_PATH}",
        f"s3://{BUCKET}/{TABLE_PATH}2",
        f"s3://{BUCKET}/tables",
        f"s3://{BUCKET}",
        f"s3://{OTHER_BUCKET}/{TABLE_PATH}",
        f"s3://{BUCKET}/{TABLE_PATH}/",
        f"s3://{BUCKET}/{TABLE_PATH}/../simple2",
        f"s3://{BUCKET}/{TABLE_PATH}/%2e%2e/simple2",
        f"s3://{BUCKET}/{TABLE_PATH}%2F..%2Fsimple2",
        f"s3://{BUCKET}/{TABLE_PATH}/*",
        f"s3a://{BUCKET}/{TABLE_PATH}",
        f"S3://{BUCKET}/{TABLE_PATH}",
        f"{BUCKET}/{TABLE_PATH}",
        "",
    ],
)
def test_a_hostile_location_is_refused_400(deployment: Deployment, location: str) -> None:
    answer = vend(deployment, "dirs", "simple", location=location)
    assert answer.status_code == 400, answer.text
    assert answer.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert f"s3://{BUCKET}/{TABLE_PATH}" in answer.json()["message"]


@pytest.mark.parametrize(
    "body",
    [b"{", b"[]", b'"s3://x"', b'{"location": 7}', b'{"location": ["s3://x"]}', b"\xff\xfe", b"null"],
)
def test_a_bad_body_is_refused_400_malformed(deployment: Deployment, body: bytes) -> None:
    with api(deployment, "dirs") as client:
        answer = client.post(credentials_path("dirs", "simple"), content=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["errorCode"] == "MALFORMED_REQUEST"


def test_no_body_an_empty_object_or_a_null_location_vend_the_tables_folder(deployment: Deployment) -> None:
    token = deployment.token("dirs")
    with api(deployment, "dirs", token) as client:
        for body in (b"", b"{}", b'{"location": null}'):
            answer = client.post(credentials_path("dirs", "simple"), content=body)
            assert keys_of(answer)["location"] == f"s3://{BUCKET}/{TABLE_PATH}"
            assert answer.headers["cache-control"] == "no-store"


# -- lifetime, refusals, the audit ------------------------------------------------------------


def test_keys_never_outlive_the_token_nor_the_providers_duration(deployment: Deployment) -> None:
    now_ms = time.time() * 1000
    long_lived = keys_of(vend(deployment, "dirs", "simple"))
    assert now_ms < long_lived["expirationTime"] <= now_ms + (DURATION + 60) * 1000
    token = deployment.token("dirs", expires=timedelta(minutes=20))
    token_ends_ms = now_ms + 20 * 60 * 1000
    short = keys_of(vend(deployment, "dirs", "simple", token))
    assert now_ms < short["expirationTime"] <= token_ends_ms + 1000
    too_short = deployment.token("dirs", expires=timedelta(minutes=5))
    refused = vend(deployment, "dirs", "simple", too_short)
    assert refused.status_code == 403 and "expires" in refused.json()["message"]


def test_unknown_table_and_no_token_are_refused_as_other_table_routes_are(deployment: Deployment) -> None:
    assert vend(deployment, "dirs", "nope").status_code == 404
    no_token = httpx.post(deployment.endpoint + credentials_path("dirs", "simple"))
    assert no_token.status_code == 401 and no_token.json()["errorCode"] == "UNAUTHENTICATED"
    other_share = vend(deployment, "dirs", "simple", deployment.token("latest"))
    assert other_share.status_code in (403, 404)


def test_vending_is_audited_with_its_scope_and_never_the_secret(deployment: Deployment) -> None:
    credentials = keys_of(vend(deployment, "dirs", "simple"))
    records = audit_lines(
        deployment, lambda r: r.get("route") == "temporary_table_credentials" and r.get("status") == 200
    )
    assert records, "no audit line"
    record = records[-1]
    assert record["share"] == "dirs" and record["schema"] == "default" and record["table"] == "simple"
    assert record["token_id"]
    assert record["vended"]["scope"] == [f"{BUCKET}/{TABLE_PATH}/*"]
    assert record["vended"]["location"] == credentials["location"]
    text = str(record)
    keys = credentials["awsTempCredentials"]
    assert keys["secretAccessKey"] not in text and keys["sessionToken"] not in text
    refused = vend(deployment, "latest", "simple")
    assert refused.status_code == 403
    assert audit_lines(
        deployment,
        lambda r: (
            r.get("route") == "temporary_table_credentials" and r.get("error_code") == "PERMISSION_DENIED"
        ),
    )


# -- a local disk -------------------------------------------------------------------------------


def test_a_table_on_a_local_disk_is_url_only(local: Deployment) -> None:
    local.share_tables("dirlocal", {"simple": "simple_table"})
    with api(local, "dirlocal") as client:
        (item,) = client.get("/shares/dirlocal/all-tables").json()["items"]
        refused = client.post(credentials_path("dirlocal", "simple"))
    assert item["accessModes"] == ["url"] and item["format"] == "delta" and "location" not in item
    assert refused.status_code == 400 and refused.json()["errorCode"] == "UNSUPPORTED_OPERATION"
    assert "its storage has no temporary credentials (STS)" in refused.json()["message"]
