"""The two writable Iceberg REST catalogs `bench.warehouse_catalog` compares, on one SeaweedFS S3.

- ours: AIStor Tables (`/_iceberg`) of a `sharing-server serve` process whose storage is
  the SeaweedFS S3; a catalog user made in its share store, a warehouse made through the
  API (its bucket in the same S3);
- the anchor: SeaweedFS's own Iceberg REST catalog, which `weed mini` serves on its
  `-s3.port.iceberg` next to S3; its warehouse is an S3 Tables "table bucket", made first
  through SeaweedFS's S3 Tables API (`CreateTableBucket`) on the S3 port.

Both are reached by pyiceberg with SigV4 (signing name `s3tables`) and write their data and
metadata files with the S3 keys of the same SeaweedFS. Each side's `connect()` makes a new
client, so that concurrent writers do not share one.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError

from bench.servers import Server
from share_store.catalog.users import CatalogUsers
from sharing_server.config import load_config
from sharing_server.startup import open_services
from testbed.seaweed import SeaweedS3

#: Our warehouse (and the bucket it makes); SeaweedFS's table bucket.
WAREHOUSE = "benchwh"
TABLE_BUCKET = "benchtables"
NAMESPACE = "bench"


@dataclass(frozen=True)
class Side:
    """One catalog under test: its label in the rows, and how to get a new pyiceberg client of it."""

    label: str
    connect: Callable[..., Catalog]


def s3_properties(seaweed: SeaweedS3) -> dict[str, str]:
    """pyiceberg's FileIO settings for the shared SeaweedFS S3: both sides write through these."""
    return {
        "s3.endpoint": seaweed.endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": seaweed.access_key,
        "s3.secret-access-key": seaweed.secret_key,
        "s3.region": seaweed.region,
    }


def sigv4_properties(access_key: str, secret_key: str, region: str) -> dict[str, str]:
    return {
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": region,
        "client.region": region,
        "client.access-key-id": access_key,
        "client.secret-access-key": secret_key,
    }


def signed_post(url: str, body: dict[str, str], access_key: str, secret_key: str) -> httpx.Response:
    """A SigV4-signed (s3tables) JSON POST, as `mc` or pyiceberg would send it."""
    data = json.dumps(body).encode()
    request = AWSRequest(method="POST", url=url, data=data, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(access_key, secret_key), "s3tables", "local").add_auth(request)
    return httpx.post(url, content=data, headers=dict(request.headers), timeout=60)


@contextmanager
def our_side(
    seaweed: SeaweedS3,
    env: dict[str, str] | None = None,
    name: str = "run-warehouse",
    warehouse: str = WAREHOUSE,
) -> Iterator[tuple[Side, int]]:
    """Our server on the SeaweedFS S3, a warehouse and a namespace in it, while the block runs; its pid.
    `Side.connect(**more)` takes more pyiceberg properties; `s3_keys=False` gives it no S3 keys.
    Two servers on one SeaweedFS need a `warehouse` each (a warehouse is a bucket)."""
    server = Server(name, seaweed.storage_config(path_style="true"), env=env)
    # The user is made in the server's own share store and sealed with its key, as the
    # admin would make one; the server process reads both when it starts.
    services = open_services(load_config(server.config))
    try:
        user = CatalogUsers(services.store.transactions, services.secret).create("bench")
    finally:
        services.close()
    with server:
        root = f"http://127.0.0.1:{server.port}/_iceberg"
        made = signed_post(f"{root}/v1/warehouses", {"name": warehouse}, user.access_key, user.secret_key)
        if made.status_code != 200:
            raise RuntimeError(f"our warehouse was not made: {made.status_code} {made.text[:300]}")
        properties = {
            "uri": root,
            "warehouse": warehouse,
            **sigv4_properties(user.access_key, user.secret_key, "local"),
            **s3_properties(seaweed),
        }

        def connect(s3_keys: bool = True, **more: str) -> Catalog:
            chosen = (
                properties if s3_keys else {k: v for k, v in properties.items() if not k.startswith("s3.")}
            )
            return load_catalog(f"ours-{uuid.uuid4().hex[:6]}", **{**chosen, **more})

        connect().create_namespace(NAMESPACE)
        assert server.process is not None
        yield Side("ours", connect), server.process.pid


def seaweed_side(seaweed: SeaweedS3, timeout: float = 60.0) -> Side:
    """SeaweedFS's own catalog: its table bucket made, then a namespace once the catalog sees it.

    Raises (with the reason) when the catalog cannot be set up; the caller then keeps
    our figures alone.
    """
    port = seaweed.iceberg_port
    tables = seaweed.tables_client()
    try:
        tables.create_table_bucket(name=TABLE_BUCKET)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in ("BucketAlreadyExists", "ConflictException"):
            raise
    properties = {
        "uri": f"http://127.0.0.1:{port}",
        "warehouse": f"s3://{TABLE_BUCKET}",
        **sigv4_properties(seaweed.access_key, seaweed.secret_key, seaweed.region),
        **s3_properties(seaweed),
    }

    def connect() -> Catalog:
        return load_catalog(f"seaweed-{uuid.uuid4().hex[:6]}", **properties)

    # The catalog may see a new table bucket a moment after S3 Tables made it.
    deadline = time.monotonic() + timeout
    while True:
        try:
            connect().create_namespace(NAMESPACE)
            break
        except NamespaceAlreadyExistsError:  # made by an attempt that seemed to fail
            break
        except Exception:  # any refusal until the deadline, then the last one
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    return Side("SeaweedFS", connect)
