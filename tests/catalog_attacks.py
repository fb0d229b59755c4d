"""Helpers for hostile tests of the writable catalog (`/_iceberg`): callers, victims, their files.

A `Caller` sends raw SigV4-signed requests as one catalog user, the way an
attacker who does not use a well-behaved client would; `catalog` gives the same
user an honest pyiceberg client. A `Victim` is a table with known rows whose
every file is recorded when it is made, so that `assert_intact` can tell
whether anything an attack did reached it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pyarrow as pa
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from share_store.catalog.users import IssuedUser
from share_store.storage.file_uris import file_location, file_uri
from share_store.storage.local import LocalStorage
from tests.conftest import Deployment

ROWS = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
V2 = {"format-version": "2"}
#: The Iceberg REST error model's types the tests expect.
BAD_REQUEST = "BadRequestException"
FORBIDDEN = "ForbiddenException"

Row = tuple[Any, ...]

#: The namespace the attacker is allowed, and the ARNs its policy names.
ATT = "att"
ARN = "arn:aws:s3tables:::bucket/"
WAREHOUSE_READS = [
    "s3tables:GetTableBucket",
    "s3tables:ListNamespaces",
    "s3tables:GetNamespace",
    "s3tables:ListTables",
]


def policy(*statements: tuple[list[str] | str, list[str] | str]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": actions, "Resource": resources}
                for actions, resources in statements
            ],
        }
    )


def attacker_policy(warehouse: str) -> str:
    """Everything on the tables of one namespace; namespace operations on its warehouse."""
    return policy(
        ("s3tables:*", f"{ARN}{warehouse}/table/{ATT}/*"),
        ([*WAREHOUSE_READS, "s3tables:CreateNamespace"], f"{ARN}{warehouse}"),
    )


def rand() -> str:
    return uuid.uuid4().hex[:8]


def rows_table(rows: list[tuple[int, str]]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "name": [r[1] for r in rows]}, schema=ROWS)


def rows_of(table: Table) -> list[Row]:
    frame = table.scan().to_pandas()
    return sorted(tuple(row) for row in frame.itertuples(index=False))


# -- callers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """One catalog user, calling `/_iceberg/v1` with SigV4-signed requests (signing name s3tables)."""

    deployment: Deployment
    user: IssuedUser

    @property
    def root(self) -> str:
        return f"{self.deployment.server.url}/_iceberg/v1"

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        data = b"" if body is None else json.dumps(body).encode()
        url = f"{self.root}{path}"
        request = AWSRequest(method=method, url=url, data=data, headers={"Content-Type": "application/json"})
        credentials = Credentials(self.user.access_key, self.user.secret_key)
        SigV4Auth(credentials, "s3tables", "local").add_auth(request)
        return httpx.request(method, url, content=data, headers=dict(request.headers), timeout=60)

    def catalog(self, warehouse: str) -> Catalog:
        """pyiceberg as AIStor documents it; on S3 it writes data with the store's own keys."""
        props = {
            "uri": f"{self.deployment.server.url}/_iceberg",
            "warehouse": warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "local",
            "client.region": "local",
            "client.access-key-id": self.user.access_key,
            "client.secret-access-key": self.user.secret_key,
        }
        seaweed = getattr(self.deployment, "seaweed", None)
        if seaweed is not None and not isinstance(self.deployment.storage, LocalStorage):
            props |= {
                "s3.endpoint": seaweed.endpoint,
                "s3.path-style-access": "true",
                "s3.access-key-id": seaweed.access_key,
                "s3.secret-access-key": seaweed.secret_key,
                "s3.region": seaweed.region,
            }
        return load_catalog(f"hostile-{rand()}", **props)


def table_path(warehouse: str, namespace: str, table: str) -> str:
    return f"/{warehouse}/namespaces/{quote(namespace, safe='')}/tables/{quote(table, safe='')}"


def commit(
    caller: Caller,
    warehouse: str,
    namespace: str,
    table: str,
    updates: list[dict[str, Any]],
    requirements: list[dict[str, Any]] | None = None,
) -> httpx.Response:
    body = {"requirements": requirements or [], "updates": updates}
    return caller.call("POST", table_path(warehouse, namespace, table), body)


#: ROWS as the REST API's create request spells a schema.
ROWS_SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "name", "type": "string", "required": False},
    ],
}


def create_body(name: str, location: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "schema": ROWS_SCHEMA, "properties": V2}
    if location is not None:
        body["location"] = location
    return body


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The Iceberg REST error model's `error` object of a refusal (asserted to be there)."""
    try:
        body = response.json()
    except ValueError:
        raise AssertionError(
            f"not the Iceberg error model: {response.status_code} {response.text[:300]}"
        ) from None
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), response.text[:300]
    error = body["error"]
    assert {"message", "type", "code"} <= set(error), error
    return error  # type: ignore[no-any-return]


def assert_refused(response: httpx.Response, statuses: set[int] | int, *types: str, what: str = "") -> None:
    """A 4xx in the Iceberg REST error model, with one of `statuses` and (if given) one of `types`."""
    wanted = {statuses} if isinstance(statuses, int) else statuses
    assert response.status_code in wanted, (
        f"{what + ': ' if what else ''}expected {sorted(wanted)}, got {response.status_code}: "
        f"{response.text[:400]}"
    )
    error = error_of(response)
    assert error["code"] == response.status_code, error
    if types:
        assert error["type"] in types, error


# -- storage --------------------------------------------------------------------------


def uri(deployment: Deployment, bucket: str, key: str = "") -> str:
    """The absolute URI the catalog names `bucket/key` by (a bucket's root when `key` is empty)."""
    if not key:
        return file_uri(deployment.storage, bucket, "x")[: -len("/x")]
    return file_uri(deployment.storage, bucket, key)


def split(deployment: Deployment, location: str) -> tuple[str, str]:
    return file_location(deployment.storage, location)


def keys_under(deployment: Deployment, bucket: str, prefix: str) -> set[str]:
    """Every object key under `prefix` of `bucket`, at any depth."""
    storage = deployment.storage
    if isinstance(storage, LocalStorage):
        base = Path(storage.root) / bucket
        start = base / prefix if prefix else base
        if start.is_file():
            return {prefix}
        if not start.exists():
            return set()
        return {p.relative_to(base).as_posix() for p in start.rglob("*") if p.is_file()}
    client = deployment.seaweed.client()  # type: ignore[attr-defined]
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.update(item["Key"] for item in page.get("Contents", []))
    return keys


def contents(deployment: Deployment, bucket: str, prefix: str) -> dict[str, bytes]:
    return {
        key: deployment.storage.read(bucket, key) for key in sorted(keys_under(deployment, bucket, prefix))
    }


def copy_tree(deployment: Deployment, source: Path, bucket: str, prefix: str) -> None:
    for path in sorted(source.rglob("*")):
        if path.is_file():
            deployment.storage.write(
                bucket, f"{prefix}/{path.relative_to(source).as_posix()}", path.read_bytes()
            )


def table_prefix(deployment: Deployment, location: str) -> tuple[str, str]:
    """Bucket and key prefix (ending with '/') of everything under a table location."""
    bucket, key = split(deployment, location.rstrip("/") + "/x")
    return bucket, key[:-1]


# -- victims --------------------------------------------------------------------------


@dataclass(frozen=True)
class Victim:
    """A table an attacker must not reach, as it was when made: its files' bytes and its rows."""

    warehouse: str
    namespace: str
    name: str
    location: str
    metadata_location: str
    manifest_list: str
    data_files: tuple[str, ...]
    bucket: str
    prefix: str
    files: dict[str, bytes]
    rows: tuple[Row, ...]
    schema: str

    @property
    def identifier(self) -> str:
        return f"{self.namespace}.{self.name}"


def make_victim(deployment: Deployment, admin: Caller, warehouse: str, namespace: str) -> Victim:
    """A v2 table with two appends (three rows) in a new namespace, made with pyiceberg."""
    catalog = admin.catalog(warehouse)
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.kept", schema=ROWS, properties=V2)
    table.append(rows_table([(1, "a"), (2, "b")]))
    table.append(rows_table([(3, "c")]))
    table = catalog.load_table(f"{namespace}.kept")
    snapshot = table.current_snapshot()
    assert snapshot is not None
    bucket, prefix = table_prefix(deployment, table.location())
    return Victim(
        warehouse=warehouse,
        namespace=namespace,
        name="kept",
        location=table.location(),
        metadata_location=table.metadata_location,
        manifest_list=snapshot.manifest_list,
        data_files=tuple(sorted(task.file.file_path for task in table.scan().plan_files())),
        bucket=bucket,
        prefix=prefix,
        files=contents(deployment, bucket, prefix),
        rows=tuple(rows_of(table)),
        schema=table.schema().model_dump_json(),
    )


def assert_intact(deployment: Deployment, admin: Caller, victim: Victim) -> None:
    """Every file the victim had is there with the same bytes; it loads with its schema and rows."""
    now = contents(deployment, victim.bucket, victim.prefix)
    missing = sorted(set(victim.files) - set(now))
    changed = sorted(key for key in victim.files if key in now and now[key] != victim.files[key])
    assert not missing and not changed, (
        f"victim {victim.warehouse}.{victim.identifier}: files deleted {missing}, overwritten {changed}"
    )
    table = admin.catalog(victim.warehouse).load_table(victim.identifier)
    assert table.metadata_location == victim.metadata_location
    assert table.schema().model_dump_json() == victim.schema
    assert tuple(rows_of(table)) == victim.rows
