"""An AWS Glue Data Catalog (moto's server on loopback) whose tables' files are in SeaweedFS, shared.

pyiceberg's `GlueCatalog` writes a table into moto's Glue and its files into SeaweedFS;
a sharing server on SeaweedFS storage shares it as `ns:t:uniform:glue:ns:t`. Once with
the keys in the catalog block, once with none there: the AWS provider chain (the
server's environment) then signs for Glue and for the files alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import delta_sharing
import httpx
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.rest import RestCatalog

from share_store.model import parse_create_args
from testbed.seaweed import SeaweedS3
from tests.conftest import Deployment, deploy
from tests.end_to_end.test_iceberg_s3 import CUSTOMER, customers
from tests.glue_server import GlueServer, start_glue

BUCKET = "gluewarehouse"


@pytest.fixture(scope="module")
def glue() -> Iterator[GlueServer]:
    server = start_glue()
    try:
        yield server
    finally:
        server.stop()


def s3_properties(seaweed: SeaweedS3, with_keys: bool = True) -> dict[str, str]:
    props = {"s3.endpoint": seaweed.endpoint, "s3.region": seaweed.region}
    if with_keys:
        props |= {"s3.access-key-id": seaweed.access_key, "s3.secret-access-key": seaweed.secret_key}
    return props


def catalog_properties(glue: GlueServer, seaweed: SeaweedS3, with_keys: bool = True) -> dict[str, str]:
    return (
        glue.catalog_properties(with_keys)
        | s3_properties(seaweed, with_keys)
        | {"warehouse": f"s3://{BUCKET}/glue"}
    )


@pytest.fixture(scope="module")
def written(glue: GlueServer, seaweed: SeaweedS3) -> list[dict[str, Any]]:
    """`ns.t` in Glue, format version 2, appended twice; its rows as pyiceberg reads them."""
    seaweed.client().create_bucket(Bucket=BUCKET)
    catalog = load_catalog("writer", **catalog_properties(glue, seaweed))
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", CUSTOMER, properties={"format-version": "2"})
    table.append(customers(1, 5).cast(table.schema().as_arrow()))
    table.append(customers(6, 3).cast(table.schema().as_arrow()))
    table = catalog.load_table("ns.t")
    assert table.format_version == 2 and len(table.metadata.snapshots) == 2
    return rows(table.scan().to_arrow().to_pylist())


def rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: r["custkey"])


def serve(tmp: Any, seaweed: SeaweedS3, catalog: dict[str, str]) -> Deployment:
    deployment = deploy(tmp, seaweed.storage_config(path_style="true"), catalogs={"glue": catalog})
    deployment.store.create_share("g", parse_create_args(["ns", "t:uniform:glue:ns:t"]))
    return deployment


@pytest.fixture(scope="module")
def with_keys(
    tmp_path_factory: pytest.TempPathFactory, glue: GlueServer, seaweed: SeaweedS3, written: list
) -> Iterator[Deployment]:
    deployment = serve(tmp_path_factory.mktemp("glue-keys"), seaweed, catalog_properties(glue, seaweed))
    yield deployment
    deployment.server.stop()
    deployment.store.close()


@contextmanager
def on_provider_chain(
    tmp: Any, glue: GlueServer, seaweed: SeaweedS3, storage: dict[str, str]
) -> Iterator[Deployment]:
    """No keys in the catalog block: the in-process server's environment has them (moto takes any)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            patch.delenv(name, raising=False)
        patch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
        patch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
        patch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance metadata lookups off loopback
        # Written in the documented grammar, as the example: `auth = aws`, no keys anywhere.
        block = {
            "backend": {"type": "glue", "region": seaweed.region, "warehouse": f"s3://{BUCKET}/glue",
                        "endpoint": glue.endpoint},
            "auth": {"type": "aws"},
            "storage": {"s3_endpoint": seaweed.endpoint, "s3_region": seaweed.region},
        }  # fmt: skip
        deployment = deploy(tmp, storage, catalogs={"glue": block})  # type: ignore[dict-item]
        deployment.store.create_share("g", parse_create_args(["ns", "t:uniform:glue:ns:t"]))
        props = deployment.catalogs.configs["glue"]
        assert props["type"] == "glue" and not any("access-key" in key or "secret" in key for key in props)
        try:
            yield deployment
        finally:
            deployment.server.stop()
            deployment.store.close()


@pytest.fixture(scope="module")
def provider_chain(
    tmp_path_factory: pytest.TempPathFactory, glue: GlueServer, seaweed: SeaweedS3, written: list
) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("glue-chain")
    with on_provider_chain(tmp, glue, seaweed, seaweed.storage_config(path_style="true")) as deployment:
        yield deployment


def bearer(deployment: Deployment, share: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {deployment.token(share)}"}


def test_a_glue_table_is_shared_with_its_rows(with_keys: Deployment, written: list) -> None:
    profile = with_keys.profile("g")
    for use_delta_format in (False, True):
        shared = delta_sharing.load_as_pandas(f"{profile}#g.ns.t", use_delta_format=use_delta_format)
        assert rows(shared.to_dict("records")) == written
    first = delta_sharing.load_as_pandas(f"{profile}#g.ns.t", version=0)
    assert sorted(first["custkey"]) == [1, 2, 3, 4, 5]


def test_a_glue_table_through_the_iceberg_rest_catalog(with_keys: Deployment, written: list) -> None:
    uri = with_keys.endpoint.removesuffix("/delta-sharing") + "/iceberg"
    recipient = RestCatalog("g", uri=uri, token=with_keys.token("g"))
    assert recipient.list_tables("ns") == [("ns", "t")]
    table = recipient.load_table("ns.t")
    assert table.io.properties.get("s3.access-key-id") is None  # no storage keys handed out
    assert rows(table.scan().to_arrow().to_pylist()) == written


def test_a_glue_catalog_on_the_aws_provider_chain(
    provider_chain: Deployment, seaweed: SeaweedS3, written: list
) -> None:
    """The issue's case: once refused as "data files outside the configured object storage"."""
    headers = bearer(provider_chain, "g")
    listed = httpx.get(f"{provider_chain.endpoint}/shares/g/schemas/ns/tables", headers=headers)
    assert listed.status_code == 200, listed.text
    assert [item["name"] for item in listed.json()["items"]] == ["t"]
    response = httpx.post(
        f"{provider_chain.endpoint}/shares/g/schemas/ns/tables/t/query", json={}, headers=headers
    )
    assert response.status_code == 200, response.text
    files = [line for line in response.text.splitlines()[2:] if line]
    assert len(files) == 2
    assert all(f"{seaweed.endpoint}/{BUCKET}/glue/" in line for line in files)
    shared = delta_sharing.load_as_pandas(f"{provider_chain.profile('g')}#g.ns.t")
    assert rows(shared.to_dict("records")) == written


def test_a_glue_catalog_on_the_provider_chain_beside_local_storage(
    tmp_path_factory: pytest.TempPathFactory, glue: GlueServer, seaweed: SeaweedS3, written: list
) -> None:
    """The server's own storage is a local folder: the Glue table's files are signed with the chain."""
    tmp = tmp_path_factory.mktemp("glue-local")
    with on_provider_chain(tmp, glue, seaweed, {}) as deployment:
        assert deployment.config.storage.get("type", "local") == "local"
        shared = delta_sharing.load_as_pandas(f"{deployment.profile('g')}#g.ns.t")
        assert rows(shared.to_dict("records")) == written
