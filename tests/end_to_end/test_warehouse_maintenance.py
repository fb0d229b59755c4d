"""Maintenance through the catalog's HTTP API, as a provider runs it, on a table a streaming writer
made of many small appends with pyiceberg, shared with a recipient.

The configuration is set and read in S3 Tables' shapes, a run is asked for, its job status read;
the recipient reads the same rows from fewer files, and the change data feed has no rows for the
compaction. A catalog user allowed one namespace can neither read nor set nor run another's.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from share_store.catalog.users import CatalogUsers
from tests.catalog_attacks import ATT, attacker_policy
from tests.conftest import ADMIN_TOKEN, Deployment
from tests.end_to_end.test_warehouse_engines import share

WAREHOUSE = "kept"
APPENDS = 30


@pytest.fixture(scope="module")
def api(server: Deployment) -> Iterator[httpx.Client]:
    with server.catalog_api(ADMIN_TOKEN) as client:
        assert client.post("/warehouses", json={"name": WAREHOUSE}).status_code == 200
        yield client


@pytest.fixture(scope="module")
def streamed(server: Deployment, api: httpx.Client) -> str:
    """`kept.db.events`: APPENDS appends of 10 rows each, as a micro-batch writer makes them."""
    catalog = load_catalog(f"m-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = catalog.create_table("db.events", schema=schema)
    for n in range(APPENDS):
        ids = list(range(n * 10, n * 10 + 10))
        table.append(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=schema))
    return share(server, WAREHOUSE, "db", "events")


TABLE = f"/{WAREHOUSE}/namespaces/db/tables/events"


def test_the_defaults_are_s3_tables_and_a_table_setting_wins(api: httpx.Client, streamed: str) -> None:
    got = api.get(f"{TABLE}/maintenance")
    assert got.status_code == 200, got.text
    compaction = got.json()["configuration"]["icebergCompaction"]
    defaults = {"targetFileSizeMB": 512, "strategy": "auto"}
    assert compaction == {"status": "enabled", "settings": {"icebergCompaction": defaults}}
    value = {"status": "enabled", "settings": {"icebergSnapshotManagement": {
        "minSnapshotsToKeep": 2, "maxSnapshotAgeHours": 1}}}  # fmt: skip
    assert api.put(f"{TABLE}/maintenance/icebergSnapshotManagement", json={"value": value}).status_code == 204
    management = api.get(f"{TABLE}/maintenance").json()["configuration"]["icebergSnapshotManagement"]
    assert management["settings"]["icebergSnapshotManagement"]["minSnapshotsToKeep"] == 2
    warehouse = api.get(f"/warehouses/{WAREHOUSE}/maintenance").json()["configuration"]
    assert warehouse["icebergUnreferencedFileRemoval"]["settings"]["icebergUnreferencedFileRemoval"] == {
        "unreferencedDays": 3, "nonCurrentDays": 10}  # fmt: skip
    assert api.get(f"{TABLE}/maintenance-job-status").json()["status"]["icebergCompaction"] == {
        "status": "Not_Yet_Run"}  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        {"value": {"status": "on"}},
        {"value": {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 8}}}},
        {"value": {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": "64"}}}},
        {"value": {"status": "enabled", "settings": {"icebergCompaction": {"other": 1}}}},
        {"status": "enabled"},
    ],
)
def test_a_bad_configuration_is_a_400_and_changes_nothing(
    api: httpx.Client, streamed: str, body: Any
) -> None:
    before = api.get(f"{TABLE}/maintenance").json()
    refused = api.put(f"{TABLE}/maintenance/icebergCompaction", json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["type"] == "BadRequestException"
    assert api.get(f"{TABLE}/maintenance").json() == before
    unknown = api.put(
        f"{TABLE}/maintenance/icebergUnreferencedFileRemoval", json={"value": {"status": "enabled"}}
    )
    assert unknown.status_code == 400  # a warehouse's kind, not a table's


def shared_files(server: Deployment, url: str) -> int:
    profile, name = url.split("#")
    share_name, schema, table = name.split(".")
    token = json.loads(open(profile).read())["bearerToken"]
    answer = httpx.post(f"{server.endpoint}/shares/{share_name}/schemas/{schema}/tables/{table}/query",
                        json={}, headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    return sum(1 for line in answer.text.splitlines() if '"file"' in line)


def test_a_run_compacts_expires_and_keeps_what_the_recipient_reads(
    server: Deployment, api: httpx.Client, streamed: str
) -> None:
    before = delta_sharing.load_as_pandas(streamed)
    version_before = delta_sharing.get_table_version(streamed)
    assert shared_files(server, streamed) == APPENDS
    ran = api.post(f"{TABLE}/maintenance/run")
    assert ran.status_code == 200, ran.text
    runs = ran.json()["runs"]
    assert runs["icebergCompaction"]["status"] == "Successful", runs
    assert runs["icebergCompaction"]["details"]["files_rewritten"] == APPENDS
    assert runs["icebergSnapshotManagement"]["status"] == "Successful", runs
    assert runs["icebergUnreferencedFileRemoval"]["status"] == "Successful", runs
    after = delta_sharing.load_as_pandas(streamed)
    assert sorted(after["id"]) == sorted(before["id"]) == list(range(APPENDS * 10))
    assert shared_files(server, streamed) == 1
    # The compaction is no change: the feed from the version before it holds no row.
    changes = delta_sharing.load_table_changes_as_pandas(
        streamed,
        starting_version=version_before + 1,
        ending_version=delta_sharing.get_table_version(streamed),
    )
    assert len(changes) == 0
    status = api.get(f"{TABLE}/maintenance-job-status").json()["status"]
    assert status["icebergCompaction"]["status"] == "Successful"
    assert "lastRunTimestamp" in status["icebergCompaction"]


def test_a_user_allowed_one_namespace_cannot_touch_another_tables_maintenance(
    server: Deployment, api: httpx.Client, streamed: str
) -> None:
    user = CatalogUsers(server.store.transactions, server.secret).create("one-ns", attacker_policy(WAREHOUSE))
    token = httpx.post(f"{server.server.url}/_iceberg/v1/oauth/tokens", data={
        "grant_type": "client_credentials", "client_id": user.access_key, "client_secret": user.secret_key,
    }).json()["access_token"]  # fmt: skip
    headers = {"Authorization": f"Bearer {token}"}
    base = f"{server.server.url}/_iceberg/v1"
    value = {"value": {"status": "disabled"}}
    for method, path, body in (
        ("GET", f"{TABLE}/maintenance", None),
        ("PUT", f"{TABLE}/maintenance/icebergCompaction", value),
        ("GET", f"{TABLE}/maintenance-job-status", None),
        ("POST", f"{TABLE}/maintenance/run", None),
        ("PUT", f"/warehouses/{WAREHOUSE}/maintenance/icebergUnreferencedFileRemoval", value),
    ):
        answer = httpx.request(method, base + path, json=body, headers=headers)
        assert answer.status_code == 403, (method, path, answer.text)
    assert api.get(f"{TABLE}/maintenance").json()["configuration"]["icebergCompaction"]["status"] == "enabled"
    assert ATT  # the attacker's own namespace, for the record


def test_a_version_expired_by_maintenance_is_refused_naming_the_retention(
    server: Deployment, api: httpx.Client
) -> None:
    catalog = load_catalog(f"x-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip
    catalog.create_namespace_if_not_exists("db")
    schema = pa.schema([pa.field("id", pa.int64())])
    # The table's own retention wins over the catalog's maintenance settings, as in Iceberg.
    table = catalog.create_table("db.brief", schema=schema, properties={
        "history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "1"})  # fmt: skip
    for n in range(3):
        table.append(pa.table({"id": [n]}, schema=schema))
    url = share(server, WAREHOUSE, "db", "brief")
    first = delta_sharing.get_table_version(url) - 2
    assert sorted(delta_sharing.load_as_pandas(url, version=first)["id"]) == [0]
    ran = api.post(f"/{WAREHOUSE}/namespaces/db/tables/brief/maintenance/run")
    assert ran.json()["runs"]["icebergSnapshotManagement"]["details"]["snapshots_expired"] >= 2, ran.text
    profile, _ = url.split("#")
    token = json.loads(open(profile).read())["bearerToken"]
    refused = httpx.post(f"{server.endpoint}/shares/{WAREHOUSE}_brief/schemas/db/tables/brief/query",
                         json={"version": first}, headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert "has expired" in message and "history.expire.max-snapshot-age-ms" in message, message
    assert "The earliest version available is" in message
    assert sorted(delta_sharing.load_as_pandas(url)["id"]) == [0, 1, 2]


def test_version_0_of_a_table_shared_while_empty_stays_readable_until_its_history_expires(
    server: Deployment, api: httpx.Client
) -> None:
    catalog = load_catalog(f"x-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip
    catalog.create_namespace_if_not_exists("db")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("db.born_empty", schema=schema, properties={
        "history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "1"})  # fmt: skip
    url = share(server, WAREHOUSE, "db", "born_empty")
    assert delta_sharing.get_table_version(url) == 0
    assert len(delta_sharing.load_as_pandas(url)) == 0
    for n in range(2):
        table.append(pa.table({"id": [n]}, schema=schema))
    # Nothing expired yet: version 0 (the table before its first snapshot) is still served, empty.
    assert delta_sharing.get_table_version(url) == 2
    assert len(delta_sharing.load_as_pandas(url, version=0)) == 0
    assert sorted(delta_sharing.load_as_pandas(url, version=1)["id"]) == [0]
    changes = delta_sharing.load_table_changes_as_pandas(url, starting_version=0, ending_version=2)
    assert sorted(changes["id"]) == [0, 1]
    ran = api.post(f"/{WAREHOUSE}/namespaces/db/tables/born_empty/maintenance/run")
    assert ran.json()["runs"]["icebergSnapshotManagement"]["details"]["snapshots_expired"] >= 1, ran.text
    profile, _ = url.split("#")
    token = json.loads(open(profile).read())["bearerToken"]
    query = f"{server.endpoint}/shares/{WAREHOUSE}_born_empty/schemas/db/tables/born_empty/query"
    refused = httpx.post(query, json={"version": 0}, headers={"Authorization": f"Bearer {token}"})
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert "before its first snapshot, which has expired" in message, message
    assert "history.expire.max-snapshot-age-ms" in message and "The earliest version available is " in message
