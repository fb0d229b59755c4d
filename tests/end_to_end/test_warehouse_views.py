"""Views of the own warehouses end to end: pyiceberg 0.12's view API (`create_view`, `list_views`,
`load_view`, `view_exists`, `drop_view`) against a served catalog, with the admin token and with a
catalog user whose policy allows one namespace; a view replaced as an engine replaces one (its REST
commit); and Spark 3.5's CREATE VIEW, SELECT, CREATE OR REPLACE VIEW and DROP VIEW."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import (
    ForbiddenError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ViewAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

from share_store.catalog.users import CatalogUsers
from tests.catalog_attacks import ATT, attacker_policy
from tests.conftest import ADMIN_TOKEN, SPARK_ICEBERG_PYTHON, Deployment

SPARK_VIEWS_JOB = Path(__file__).resolve().parents[1] / "warehouse_spark_views_job.py"
WAREHOUSE = "views"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType(), required=False)
)


@pytest.fixture(scope="module", autouse=True)
def warehouse(server: Deployment) -> None:
    """The warehouse the views here are made in."""
    with server.catalog_api(ADMIN_TOKEN) as api:
        assert api.post("/warehouses", json={"name": WAREHOUSE}).status_code == 200


def catalog_of(server: Deployment, token: str) -> Catalog:
    return load_catalog(
        f"views-{uuid.uuid4().hex[:6]}",
        **{"type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": token},
    )


def version(sql: str, namespace: str) -> ViewVersion:
    return ViewVersion.model_validate(
        {
            "version-id": 1,
            "schema-id": 0,
            "summary": {"engine-name": "pyiceberg"},
            "representations": [SQLViewRepresentation(type="sql", sql=sql, dialect="spark")],
            "default-namespace": [namespace],
        }
    )


def test_pyiceberg_creates_lists_loads_and_drops_views(server: Deployment) -> None:
    catalog = catalog_of(server, ADMIN_TOKEN)
    namespace = f"ns_{uuid.uuid4().hex[:6]}"
    catalog.create_namespace(namespace)
    catalog.create_table((namespace, "t"), SCHEMA)
    view = catalog.create_view((namespace, "v"), SCHEMA, version(f"SELECT * FROM {namespace}.t", namespace))
    assert view.current_version().version_id == 1
    assert view.sql_for("spark").sql == f"SELECT * FROM {namespace}.t"  # type: ignore[union-attr]
    assert view.location().startswith(f"file://{server.tmp}/storage/{WAREHOUSE}/{namespace}/v-")
    assert catalog.list_views(namespace) == [(namespace, "v")]
    assert catalog.list_tables(namespace) == [(namespace, "t")]
    assert catalog.view_exists((namespace, "v")) and not catalog.view_exists((namespace, "t"))
    assert not catalog.table_exists((namespace, "v"))
    loaded = catalog.load_view((namespace, "v"))
    assert loaded.metadata == view.metadata and loaded.schema() == view.schema()
    with pytest.raises(ViewAlreadyExistsError):
        catalog.create_view((namespace, "v"), SCHEMA, version("SELECT 1", namespace))
    with pytest.raises(ViewAlreadyExistsError):  # a table holds the name
        catalog.create_view((namespace, "t"), SCHEMA, version("SELECT 1", namespace))
    with pytest.raises(TableAlreadyExistsError):  # a view holds the name
        catalog.create_table((namespace, "v"), SCHEMA)
    with pytest.raises(NoSuchViewError):
        catalog.load_view((namespace, "t"))

    # An engine's CREATE OR REPLACE VIEW: a commit adding a version and making it current.
    api = f"{server.server.url}/_iceberg/v1/{WAREHOUSE}/namespaces/{namespace}/views/v"
    replace = {
        "requirements": [{"type": "assert-view-uuid", "uuid": view.metadata.view_uuid}],
        "updates": [
            {"action": "add-schema", "schema": SCHEMA.model_dump(by_alias=True)},
            {"action": "add-view-version", "view-version": {
                **version("SELECT id FROM t", namespace).model_dump(by_alias=True), "schema-id": -1}},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }  # fmt: skip
    answer = httpx.post(api, json=replace, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == 200, answer.text
    replaced = catalog.load_view((namespace, "v"))
    assert replaced.current_version().version_id == 2
    assert replaced.sql_for("spark").sql == "SELECT id FROM t"  # type: ignore[union-attr]
    assert [entry.version_id for entry in replaced.history()] == [1, 2]

    catalog.drop_view((namespace, "v"))
    assert not catalog.view_exists((namespace, "v"))
    with pytest.raises(NoSuchViewError):
        catalog.drop_view((namespace, "v"))
    assert catalog.list_views(namespace) == []


def test_a_catalog_user_makes_views_in_its_namespace_only(server: Deployment) -> None:
    admin = catalog_of(server, ADMIN_TOKEN)
    for namespace in (ATT, "other"):
        if not admin.namespace_exists(namespace):
            admin.create_namespace(namespace)
    admin.create_view(("other", "theirs"), SCHEMA, version("SELECT 1", "other"))
    user = CatalogUsers(server.store.transactions, server.secret).create(
        f"viewer-{uuid.uuid4().hex[:6]}", attacker_policy(WAREHOUSE)
    )
    answer = httpx.post(
        f"{server.server.url}/_iceberg/v1/oauth/tokens",
        data={
            "grant_type": "client_credentials",
            "client_id": user.access_key,
            "client_secret": user.secret_key,
        },
    )
    catalog = catalog_of(server, answer.json()["access_token"])
    catalog.create_view((ATT, "mine"), SCHEMA, version("SELECT 1", ATT))
    assert catalog.list_views(ATT) == [(ATT, "mine")]
    assert catalog.load_view((ATT, "mine")).current_version().version_id == 1
    with pytest.raises(ForbiddenError):
        catalog.create_view(("other", "mine"), SCHEMA, version("SELECT 1", "other"))
    with pytest.raises(ForbiddenError):
        catalog.load_view(("other", "theirs"))
    with pytest.raises(ForbiddenError):
        catalog.drop_view(("other", "theirs"))
    catalog.drop_view((ATT, "mine"))
    assert admin.view_exists(("other", "theirs"))


def test_spark_creates_selects_replaces_and_drops_a_view(
    server: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Spark 3.5's Iceberg SQL for views, through the catalog's REST view endpoints."""
    if not SPARK_ICEBERG_PYTHON.exists():
        pytest.skip("the Spark 3.5 + Iceberg environment is missing: run `make spark-iceberg`")
    user = CatalogUsers(server.store.transactions, server.secret).create(f"spark-{uuid.uuid4().hex[:6]}")
    work = tmp_path_factory.mktemp("spark-views")
    root = server.server.url
    config = {
        "uri": f"{root}/_iceberg",
        "warehouse": WAREHOUSE,
        "credential": f"{user.access_key}:{user.secret_key}",
        "oauth2_server_uri": f"{root}/_iceberg/v1/oauth/tokens",
    }
    (work / "config.json").write_text(json.dumps(config))
    done = subprocess.run(
        [str(SPARK_ICEBERG_PYTHON), str(SPARK_VIEWS_JOB), str(work / "config.json")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("@@VIEWS "))
    found = json.loads(line.removeprefix("@@VIEWS "))
    assert found["created"] == [[2], [3]]
    assert found["replaced"] == [[1, "a"], [2, "b"]]
    assert found["shown"] == ["v"] and found["tables"] == ["t"]
    assert found["after_drop"] == []
    admin = catalog_of(server, ADMIN_TOKEN)
    assert not admin.view_exists(("vdb", "v")) and admin.table_exists(("vdb", "t"))
