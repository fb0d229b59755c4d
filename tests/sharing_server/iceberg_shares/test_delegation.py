"""How a recipient's engine is told to read a table's files (`delegation.py`), over HTTP on a real
SeaweedFS: this server's signer, or, with credential vending on and asked for, keys from the
store's STS cut to the table, never outliving the token, audited by key id and counted.

What the engines then read with them is tests/end_to_end/test_iceberg_vended.py's."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from share_store.model import TableSpec
from testbed.seaweed import READER_ROLE_ARN, SeaweedS3, upload_tree
from tests.conftest import TESTDATA_BUCKET, Deployment, audit_lines, deploy

DELTA_BUCKET = "delegationdelta"
DELTA_TABLES = {"parted": "delta-0.8.0-partitioned", "dv": "table-with-dv-small"}


@pytest.fixture(scope="module")
def vending_server(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3, testdata: Path
) -> Iterator[Deployment]:
    """Share `vended` of the Delta tables `parted` and `dv` on SeaweedFS, with credential vending on
    (SeaweedFS's STS assumes the reader role)."""
    client = seaweed.client()
    client.create_bucket(Bucket=DELTA_BUCKET)
    for directory in DELTA_TABLES.values():
        upload_tree(client, testdata / directory, DELTA_BUCKET, directory)
    env = {
        "SHARING_ICEBERG_CREDENTIAL_VENDING": "sts",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": READER_ROLE_ARN,
    }
    deployment = deploy(tmp_path_factory.mktemp("delegation"), seaweed.storage_config(), env=env)
    specs = [TableSpec.parse(f"db:{name}:delta:{DELTA_BUCKET}:{path}") for name, path in DELTA_TABLES.items()]
    deployment.store.create_share("vended", specs)
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def catalog_uri(server: Deployment) -> str:
    return server.endpoint.removesuffix("/delta-sharing") + "/iceberg"


def test_without_vending_a_client_asking_for_keys_is_pointed_at_this_servers_signer(
    s3: Deployment, testdata: Path
) -> None:
    share = f"signed{uuid.uuid4().hex[:8]}"
    prefix = f"{share}/{DELTA_TABLES['parted']}"
    upload_tree(s3.seaweed.client(), testdata / DELTA_TABLES["parted"], TESTDATA_BUCKET, prefix)  # type: ignore[attr-defined]
    s3.store.create_share(share, [TableSpec.parse(f"db:parted:delta:{TESTDATA_BUCKET}:{prefix}")])
    headers = {
        "Authorization": f"Bearer {s3.token(share)}",
        "X-Iceberg-Access-Delegation": "vended-credentials,remote-signing",
    }
    answer = httpx.get(f"{catalog_uri(s3)}/v1/namespaces/db/tables/parted", headers=headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    config = body["config"]
    assert config["s3.signer.uri"] == catalog_uri(s3) and config["s3.remote-signing-enabled"] == "true"
    assert config["s3.signer.endpoint"] == "v1/aws/s3/sign"
    assert "storage-credentials" not in body and "s3.access-key-id" not in config
    assert s3.seaweed.secret_key not in answer.text  # type: ignore[attr-defined]


def test_a_client_asking_for_keys_gets_them_for_each_prefix(vending_server: Deployment) -> None:
    headers = {
        "Authorization": f"Bearer {vending_server.token('vended')}",
        "X-Iceberg-Access-Delegation": "vended-credentials",
    }
    answer = httpx.get(f"{catalog_uri(vending_server)}/v1/namespaces/db/tables/parted", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["cache-control"] == "no-store"
    body = answer.json()
    prefixes = sorted(item["prefix"] for item in body["storage-credentials"])
    assert f"s3://{DELTA_BUCKET}/{DELTA_TABLES['parted']}/" in prefixes
    assert body["config"]["s3.access-key-id"] and "s3.signer.uri" not in body["config"]
    keys = {item["config"]["s3.access-key-id"] for item in body["storage-credentials"]}
    assert keys == {body["config"]["s3.access-key-id"]}  # the same keys, once per prefix


def test_a_client_asking_for_signing_only_is_signed_for_with_vending_on(vending_server: Deployment) -> None:
    headers = {
        "Authorization": f"Bearer {vending_server.token('vended')}",
        "X-Iceberg-Access-Delegation": "remote-signing",
    }
    answer = httpx.get(f"{catalog_uri(vending_server)}/v1/namespaces/db/tables/dv", headers=headers)
    assert answer.status_code == 200, answer.text
    assert "storage-credentials" not in answer.json() and "s3.signer" in answer.json()["config"]


def test_keys_never_outlive_the_token_and_a_short_token_is_refused(vending_server: Deployment) -> None:
    token = vending_server.token("vended", expires=timedelta(seconds=1200))
    headers = {"Authorization": f"Bearer {token}", "X-Iceberg-Access-Delegation": "vended-credentials"}
    url = f"{catalog_uri(vending_server)}/v1/namespaces/db/tables/parted"
    answer = httpx.get(url, headers=headers)
    assert answer.status_code == 200, answer.text
    expires_ms = int(answer.json()["config"]["s3.session-token-expires-at-ms"])
    assert expires_ms / 1000 <= time.time() + 1200
    short = vending_server.token("vended", expires=timedelta(seconds=600))
    refused = httpx.get(url, headers=headers | {"Authorization": f"Bearer {short}"})
    assert refused.status_code == 403
    assert "sooner than the shortest keys STS vends" in refused.json()["error"]["message"]
    # Remote signing still serves that token.
    signed = httpx.get(url, headers={"Authorization": f"Bearer {short}"})
    assert signed.status_code == 200 and "s3.signer" in signed.json()["config"]


def test_the_credentials_endpoint_answers_fresh_keys_and_audits_them(vending_server: Deployment) -> None:
    token = vending_server.token("vended")
    url = f"{catalog_uri(vending_server)}/v1/namespaces/db/tables/dv/credentials"
    answer = httpx.get(url, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    credentials = answer.json()["storage-credentials"]
    prefixes = sorted(item["prefix"] for item in credentials)
    assert f"s3://{DELTA_BUCKET}/{DELTA_TABLES['dv']}/" in prefixes
    assert all(item["config"]["s3.session-token"] for item in credentials)
    config = httpx.get(
        f"{catalog_uri(vending_server)}/v1/config", headers={"Authorization": f"Bearer {token}"}
    ).json()
    assert any(endpoint.endswith("/credentials") for endpoint in config["endpoints"])
    record = audit_lines(vending_server, lambda r: bool(r.get("vended")) and r.get("table") == "dv")[-1]
    assert record["vended"]["expires"] > time.time() and record["vended"]["scope"]
    assert record["vended"]["key"].endswith("…") and token not in json.dumps(record)
    metrics = httpx.get(vending_server.endpoint.removesuffix("/delta-sharing") + "/metrics").text
    assert 'sharing_iceberg_vended_credentials_total{outcome="vended"}' in metrics
    assert 'sharing_iceberg_vended_credentials_total{outcome="refused"}' in metrics
