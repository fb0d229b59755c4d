"""`S3TablesCatalog` against SeaweedFS's S3 Tables API; the tables written through its REST catalog."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import delta_sharing
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField, StringType

from share_store.errors import CatalogError, StorageUnavailable
from share_store.model import parse_create_args
from share_store.table_sources.s3tables import S3TablesCatalog
from share_store.table_sources.settings import catalog_settings
from testbed.seaweed import SeaweedS3
from tests.conftest import Deployment

NAMESPACE = "sales"
TABLE = "orders"
SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "item", StringType()))


def rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "item": [f"item-{i}" for i in ids]},
        schema=SCHEMA.as_arrow(),
    )


def s3_properties(seaweed: SeaweedS3) -> dict[str, str]:
    return {
        "s3.endpoint": seaweed.endpoint,
        "s3.access-key-id": seaweed.access_key,
        "s3.secret-access-key": seaweed.secret_key,
        "s3.region": seaweed.region,
    }


@dataclass
class Bucket:
    """A table bucket holding NAMESPACE.TABLE (two appends); a pyiceberg writer through the REST catalog."""

    arn: str
    name: str
    writer: Catalog

    def reading(self, seaweed: SeaweedS3, **changes: str) -> S3TablesCatalog:
        properties = {
            "sharing.table-bucket-arn": self.arn,
            "sharing.endpoint-url": seaweed.endpoint,
            "client.access-key-id": seaweed.access_key,
            "client.secret-access-key": seaweed.secret_key,
            **s3_properties(seaweed),
        }
        return S3TablesCatalog("s3t", **(properties | changes))

    def written(self) -> Table:
        return self.writer.load_table((NAMESPACE, TABLE))


@pytest.fixture(scope="module")
def bucket(seaweed: SeaweedS3) -> Bucket:
    name = f"s3t-{uuid.uuid4().hex[:8]}"
    api = seaweed.tables_client()
    arn = api.create_table_bucket(name=name)["arn"]
    writer = load_catalog(
        f"writer-{name}",
        uri=f"http://127.0.0.1:{seaweed.iceberg_port}",
        warehouse=f"s3://{name}",
        **{
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": seaweed.region,
            "client.region": seaweed.region,
            "client.access-key-id": seaweed.access_key,
            "client.secret-access-key": seaweed.secret_key,
            "s3.path-style-access": "true",
            **s3_properties(seaweed),
        },
    )
    # The REST catalog may see a new table bucket a moment after S3 Tables made it.
    deadline = time.monotonic() + 60
    while True:
        try:
            writer.create_namespace(NAMESPACE)
            break
        except NamespaceAlreadyExistsError:
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    table = writer.create_table((NAMESPACE, TABLE), SCHEMA, properties={"format-version": "2"})
    table.append(rows(1, 5))
    table.append(rows(6, 3))
    return Bucket(arn, name, writer)


def sorted_rows(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda row: row["id"])  # type: ignore[arg-type,return-value]


def test_lists_and_loads_what_pyiceberg_wrote(bucket: Bucket, seaweed: SeaweedS3) -> None:
    catalog = bucket.reading(seaweed)
    assert (NAMESPACE,) in catalog.list_namespaces()
    assert catalog.list_namespaces(NAMESPACE) == []
    assert catalog.list_tables(NAMESPACE) == [(NAMESPACE, TABLE)]
    assert catalog.table_exists(f"{NAMESPACE}.{TABLE}")
    assert not catalog.table_exists((NAMESPACE, "nothing"))
    written = bucket.written()
    loaded = catalog.load_table((NAMESPACE, TABLE))
    assert loaded.name() == (NAMESPACE, TABLE)
    assert loaded.metadata.format_version == 2
    assert loaded.metadata_location == written.metadata_location
    assert loaded.current_snapshot() is not None
    assert loaded.current_snapshot().snapshot_id == written.current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert len(loaded.snapshots()) == 2
    assert sorted_rows(loaded.scan().to_arrow()) == sorted_rows(written.scan().to_arrow())
    assert [row["id"] for row in sorted_rows(loaded.scan().to_arrow())] == list(range(1, 9))


def test_follows_a_new_commit(bucket: Bucket, seaweed: SeaweedS3) -> None:
    catalog = bucket.reading(seaweed)
    before = catalog.load_table((NAMESPACE, TABLE))
    bucket.written().append(rows(100, 2))
    after = catalog.load_table((NAMESPACE, TABLE))
    assert after.metadata_location != before.metadata_location
    assert after.current_snapshot().snapshot_id == bucket.written().current_snapshot().snapshot_id  # type: ignore[union-attr]
    assert {100, 101} <= {row["id"] for row in after.scan().to_arrow().to_pylist()}


def test_missing_tables_and_namespaces(bucket: Bucket, seaweed: SeaweedS3) -> None:
    catalog = bucket.reading(seaweed)
    with pytest.raises(NoSuchTableError):
        catalog.load_table((NAMESPACE, "nothing"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("nowhere", TABLE))
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("a", "b", TABLE))  # namespaces have one level
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_namespaces("nowhere")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables(("a", "b"))


def test_bad_settings_are_clear(bucket: Bucket, seaweed: SeaweedS3) -> None:
    with pytest.raises(CatalogError, match=r"sharing\.table-bucket-arn: not a table bucket ARN"):
        bucket.reading(seaweed, **{"sharing.table-bucket-arn": "arn:aws:s3:::plainbucket"})
    with pytest.raises(CatalogError, match=r"sharing\.table-bucket-arn: required"):
        S3TablesCatalog("s3t")
    missing = bucket.arn.rpartition("/")[0] + "/nosuchbucket"
    elsewhere = bucket.reading(seaweed, **{"sharing.table-bucket-arn": missing})
    with pytest.raises(NoSuchTableError):
        elsewhere.load_table((NAMESPACE, TABLE))
    with pytest.raises(CatalogError, match="has no table bucket 'nosuchbucket'"):
        elsewhere.list_namespaces()
    unreachable = bucket.reading(seaweed, **{"sharing.endpoint-url": "http://127.0.0.1:1"})
    with pytest.raises(StorageUnavailable, match=r"S3 Tables API at http://127\.0\.0\.1:1 is unreachable"):
        unreachable.list_tables(NAMESPACE)
    refused = bucket.reading(seaweed, **{"client.secret-access-key": "not-the-secret-key"})
    with pytest.raises(CatalogError) as raised:
        refused.list_namespaces()
    assert "refused the credentials" in str(raised.value)
    assert "not-the-secret-key" not in str(raised.value)
    assert seaweed.secret_key not in str(raised.value)


@pytest.fixture
def shared_catalog(
    bucket: Bucket, seaweed: SeaweedS3, s3: Deployment, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The bucket's catalog in the server's registry, as a provider writes it in the documented grammar:
    the S3 Tables API's keys from the AWS provider chain (`auth = aws`), the files' from `[storage]`."""
    name = f"s3t{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    block = {
        "backend": {"type": "s3tables"},
        "table_bucket_arn": bucket.arn,
        "endpoint_url": seaweed.endpoint,
        "auth": {"type": "aws"},
        "storage": {"s3_endpoint": seaweed.endpoint, "s3_region": seaweed.region,
                    "s3_access_key": seaweed.access_key, "s3_secret_key": seaweed.secret_key},
    }  # fmt: skip
    s3.catalogs.configs[name] = catalog_settings(name, block)
    assert isinstance(s3.catalogs.catalog(name), S3TablesCatalog)  # made by the registry itself
    yield name
    s3.catalogs._catalogs.pop(name, None)
    s3.catalogs._storages.pop(name, None)
    s3.catalogs.configs.pop(name, None)


def test_shared_through_the_server(bucket: Bucket, s3: Deployment, shared_catalog: str) -> None:
    share = f"share{shared_catalog}"
    spec = f"{TABLE}:uniform:{shared_catalog}:{NAMESPACE}:{TABLE}"
    s3.store.create_share(share, parse_create_args([NAMESPACE, spec]), history_shared=True)
    shared = delta_sharing.load_as_pandas(f"{s3.profile(share)}#{share}.{NAMESPACE}.{TABLE}")
    expected = bucket.written().scan().to_arrow()
    assert sorted(shared["id"].tolist()) == sorted(expected["id"].to_pylist())
    assert sorted(zip(shared["id"], shared["item"], strict=True)) == sorted(
        zip(expected["id"].to_pylist(), expected["item"].to_pylist(), strict=True)
    )
