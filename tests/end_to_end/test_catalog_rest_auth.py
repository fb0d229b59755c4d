"""A REST catalog in the documented grammar, with each auth type, against a real catalog: our own `/_iceberg`.

Server A keeps the tables in its own warehouse; server B shares them, reading
A's catalog as a partner's REST catalog (`[catalogs.partner]`, `backend = rest`)
with client credentials (pyiceberg's refreshing OAuth2 manager), a static token,
SigV4 from the AWS provider chain (`aws`), or nothing at all (`anonymous`, which
A refuses). Both serve files from one local storage root.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from share_store.authentication.tokens import hash_secret
from share_store.catalog.catalog import NewTable
from share_store.catalog.names import TableName
from share_store.catalog.table_source import WarehouseTables
from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.model import parse_create_args
from tests.conftest import Deployment, deploy

ADMIN_TOKEN = "dsa_rest-auth-admin-token-0123456789abcdef"
WAREHOUSE = "partnerwh"
ROWS = [(1, "a"), (2, "b"), (3, "c")]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rest-auth") / "root"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def catalog_server(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """Server A: the catalog, with a table of three rows in its own warehouse."""
    tmp = tmp_path_factory.mktemp("catalog-a")
    server = deploy(tmp, {"type": "local", "root": str(root)},
                    env={"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN)})  # fmt: skip
    warehouses = server.server.app.state.services.warehouses  # type: ignore[attr-defined]
    warehouses.create_warehouse(WAREHOUSE)
    warehouses.create_namespace(WAREHOUSE, ("sales",), {})
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    orders = TableName.of(WAREHOUSE, ("sales",), "orders")
    warehouses.create_table(orders, NewTable(schema, properties={"format-version": "2"}))
    table = WarehouseTables(warehouses, WAREHOUSE).load_table(("sales", "orders"))
    table.append(pa.table({"id": pa.array([r[0] for r in ROWS], pa.int64()), "name": [r[1] for r in ROWS]}))
    yield server
    server.server.stop()
    server.store.close()


@pytest.fixture(scope="module")
def user(catalog_server: Deployment) -> IssuedUser:
    return CatalogUsers(catalog_server.store.transactions, catalog_server.secret).create("partner-reader")


def shared_rows(catalog: dict[str, Any], root: Path, tmp: Path) -> list[tuple[Any, ...]]:
    """Server B with `[catalogs.partner]` as given: share the table and read it as a recipient."""
    server = deploy(tmp, {"type": "local", "root": str(root)}, catalogs={"partner": catalog})
    try:
        share = f"s{uuid.uuid4().hex[:6]}"
        server.store.create_share(share, parse_create_args(["sales", "orders:uniform:partner:sales:orders"]))
        frame = delta_sharing.load_as_pandas(f"{server.profile(share)}#{share}.sales.orders")
        return sorted(tuple(row) for row in frame.itertuples(index=False))
    finally:
        server.server.stop()
        server.store.close()


def rest(catalog_server: Deployment, auth: dict[str, str] | None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "catalog_url": f"{catalog_server.server.url}/_iceberg",
        "warehouse": WAREHOUSE,
        "backend": {"type": "rest"},
    }
    if auth is not None:
        block["auth"] = auth
    return block


def test_client_credentials(catalog_server: Deployment, user: IssuedUser, root: Path, tmp_path: Path) -> None:
    auth = {"type": "client_credentials", "client_id": user.access_key, "client_secret": user.secret_key,
            "token_endpoint": f"{catalog_server.server.url}/_iceberg/v1/oauth/tokens"}  # fmt: skip
    assert shared_rows(rest(catalog_server, auth), root, tmp_path) == ROWS


def test_static_token(catalog_server: Deployment, root: Path, tmp_path: Path) -> None:
    assert shared_rows(rest(catalog_server, {"type": "static", "token": ADMIN_TOKEN}), root, tmp_path) == ROWS


def test_aws_sigv4_from_the_provider_chain(
    catalog_server: Deployment, user: IssuedUser, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", user.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", user.secret_key)
    monkeypatch.setenv("AWS_REGION", "local")
    auth = {"type": "aws", "signing_name": "s3tables", "signing_region": "local"}
    assert shared_rows(rest(catalog_server, auth), root, tmp_path) == ROWS


def test_anonymous_sends_no_authorization_and_the_refusal_reaches_the_recipient_clearly(
    catalog_server: Deployment, root: Path, tmp_path: Path
) -> None:
    server = deploy(tmp_path, {"type": "local", "root": str(root)},
                    catalogs={"partner": rest(catalog_server, {"type": "anonymous"})})  # fmt: skip
    try:
        server.store.create_share("anon", parse_create_args(["sales", "orders:uniform:partner:sales:orders"]))
        answer = httpx.get(
            f"{server.endpoint}/shares/anon/schemas/sales/tables/orders/metadata",
            headers={"Authorization": f"Bearer {server.token('anon')}"},
        )
        # A catalog that cannot load is the server's configuration at fault (CatalogError: a 500 in
        # one line naming the catalog and the reason, no traceback, no credentials).
        assert answer.status_code == 500, answer.text
        message = answer.json()["message"]
        assert "the Iceberg catalog 'partner' cannot load" in message and "NotAuthorized" in message
    finally:
        server.server.stop()
        server.store.close()
    audit = (catalog_server.tmp / "audit.log").read_text()
    assert '"status": 401' in audit or '"status":401' in audit  # A saw a request without credentials
