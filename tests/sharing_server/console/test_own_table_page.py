"""The console's page of an own warehouse's table: its current snapshot's files and size, each
maintenance kind's last run, and "Run maintenance now", on tables a pyiceberg writer made through
the server's catalog, checked against the files on disk and the catalog's maintenance API."""

from __future__ import annotations

import html
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from sqlalchemy import update

from share_store.catalog.maintenance.rows import Run
from share_store.persistence.sql_schema import warehouse_tables_table
from sharing_server.console.formatting import size, when
from sharing_server.console.maintenance_runs import detail_words, outcome
from tests.conftest import ADMIN_TOKEN, Deployment
from tests.sharing_server.console.test_routes import csrf_of, signed_in

WAREHOUSE = "whs"
APPENDS = 5
EVENTS = "/console/tables/whs/db/events"
QUIET = "/console/tables/whs/db/quiet"
BROKEN = "/console/tables/whs/db/broken"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


def _batch(start: int) -> pa.Table:
    ids = list(range(start, start + 10))
    return pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture(scope="module")
def api(server: Deployment) -> Iterator[httpx.Client]:
    """The catalog's API as the provider (the admin token)."""
    with server.catalog_api(ADMIN_TOKEN) as client:
        assert client.post("/warehouses", json={"name": WAREHOUSE}).status_code == 200
        yield client


@pytest.fixture(scope="module")
def tables(server: Deployment, api: httpx.Client) -> dict[str, Table]:
    """`db.events` (APPENDS appends of 10 rows), `db.quiet` (one append, compaction disabled) and
    `db.broken` (one append, its metadata file then lost), written by pyiceberg through the catalog."""
    catalog = load_catalog(f"c-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip
    catalog.create_namespace("db")
    made = {}
    for name, appends in (("events", APPENDS), ("quiet", 1), ("broken", 1)):
        table = catalog.create_table(f"db.{name}", schema=SCHEMA)
        for n in range(appends):
            table.append(_batch(n * 10))
        made[name] = table
    disabled = {"value": {"status": "disabled"}}
    assert (
        api.put("/whs/namespaces/db/tables/quiet/maintenance/icebergCompaction", json=disabled).status_code
        == 204
    )
    # Storage lost its metadata file: the pointer names a file that is not there (the server keeps
    # the files it read in memory, so deleting the current one would not be noticed).
    lost = made["broken"].metadata_location.rsplit("/", 1)[0] + "/00099-lost.metadata.json"
    t = warehouse_tables_table
    with server.store.engine.begin() as conn:
        conn.execute(
            update(t).where(t.c.warehouse == WAREHOUSE, t.c.name == "broken").values(metadata_location=lost)
        )
    return made


def _fact(page: httpx.Response, ident: str) -> str:
    found = re.search(rf'<dd id="{ident}">(.*?)</dd>', page.text, re.S)
    assert found, page.text
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()


def _kind(page: httpx.Response, kind: str) -> dict[str, Any]:
    """One row of the Maintenance table: its cells as text, its details as lines."""
    row = re.search(rf'<tr data-kind="{kind}">(.*?)</tr>', page.text, re.S)
    assert row, page.text
    cells = {
        name: html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))).strip()
        for name, text in re.findall(r'<td class="([a-z]+)">(.*?)</td>', row.group(1), re.S)
    }
    lines = [html.unescape(line) for line in re.findall(r"<li>(.*?)</li>", row.group(1))]
    return {**cells, "lines": lines}


def _data_files(table: Table) -> list[dict[str, Any]]:
    table.refresh()
    return [row for row in table.inspect.files().to_pylist() if row["content"] == 0]


def test_the_tables_page_links_each_table_to_its_page(server: Deployment, tables: dict[str, Table]) -> None:
    page = signed_in(server).get("/console/tables")
    assert page.status_code == 200
    for name in ("events", "quiet", "broken"):
        link = f'<a class="table-link" href="/console/tables/whs/db/{name}" aria-label="db.{name}">'
        assert link in page.text


def test_the_page_shows_the_current_snapshots_files_and_size(
    server: Deployment, tables: dict[str, Table]
) -> None:
    page = signed_in(server).get(EVENTS)
    assert page.status_code == 200, page.text
    assert '<a href="/console/tables" aria-current="page">Tables</a>' in page.text
    files = _data_files(tables["events"])
    on_disk = sum(Path(row["file_path"].removeprefix("file://")).stat().st_size for row in files)
    assert len(files) == APPENDS and sum(row["file_size_in_bytes"] for row in files) == on_disk
    assert _fact(page, "snapshots") == str(APPENDS)
    assert _fact(page, "data-files") == str(APPENDS)
    assert _fact(page, "delete-files") == "0"
    assert _fact(page, "total-size") == f"{size(on_disk)} ({on_disk:,} bytes)"
    assert _fact(page, "rows") == str(APPENDS * 10)
    current = tables["events"].current_snapshot()
    assert current is not None
    assert _fact(page, "current-snapshot") == f"{current.snapshot_id}, append, {when(current.timestamp_ms)}"
    metadata = Path(tables["events"].metadata_location.removeprefix("file://"))
    shown = _fact(page, "metadata-file")
    assert shown.startswith(f"{size(metadata.stat().st_size)} ({metadata.stat().st_size:,} bytes): ")
    assert shown.endswith(metadata.name)
    assert 'href="/console/tables/share?spec=db%3Aevents%3Auniform%3Awhs%3Adb%3Aevents"' in page.text


def test_before_any_run_each_kind_is_not_yet_run_or_disabled(
    server: Deployment, tables: dict[str, Table]
) -> None:
    client = signed_in(server)
    events = client.get(EVENTS)
    for kind in ("icebergCompaction", "icebergSnapshotManagement", "icebergUnreferencedFileRemoval"):
        row = _kind(events, kind)
        assert (
            row["status"] == "Not yet run" and row["started"] == "—" and row["settings"].startswith("enabled")
        )
    assert _kind(events, "icebergCompaction")["settings"] == "enabled: files near 512 MB, strategy auto"
    quiet = _kind(client.get(QUIET), "icebergCompaction")
    assert (quiet["settings"], quiet["status"]) == ("disabled", "Disabled")


def test_run_maintenance_now_compacts_and_the_page_shows_the_runs(
    server: Deployment, api: httpx.Client, tables: dict[str, Table]
) -> None:
    client = signed_in(server)
    page = client.get(EVENTS)
    assert f'<form method="post" action="{EVENTS}/maintenance" id="run-maintenance">' in page.text
    ran = client.post(f"{EVENTS}/maintenance", data={"csrf": csrf_of(page), "back": EVENTS})
    assert ran.status_code == 303 and ran.headers["location"] == EVENTS
    after = client.get(EVENTS)
    flash = re.search(r'<p class="flash ok" role="status">(.*?)</p>', after.text, re.S)
    assert flash, after.text
    assert html.unescape(flash.group(1)) == (
        "Maintenance ran on whs.db.events: compaction successful; snapshot expiry successful; "
        "unreferenced file removal successful."
    )
    # What the catalog's API says of the same runs, and the table as pyiceberg reads it now.
    status = api.get("/whs/namespaces/db/tables/events/maintenance-job-status").json()["status"]
    (written,) = _data_files(tables["events"])
    compaction = _kind(after, "icebergCompaction")
    assert compaction["status"] == "Successful"
    assert compaction["started"] == when(
        datetime.fromisoformat(status["icebergCompaction"]["lastRunTimestamp"])
    )
    rewritten = status["icebergCompaction"]["details"]["bytes_rewritten"]
    assert compaction["lines"][:4] == [
        f"{APPENDS} data file(s) rewritten",
        "1 data file(s) written",
        f"{size(rewritten)} rewritten",
        f"{size(written['file_size_in_bytes'])} written",
    ]
    assert compaction["lines"][-1].startswith("took ")
    expiry = _kind(after, "icebergSnapshotManagement")
    assert expiry["status"] == "Successful" and expiry["lines"][:2] == [
        "0 snapshot(s) expired",  # all younger than the default 120 h
        "0 branch(es) and tag(s) removed",
    ]
    removal = _kind(after, "icebergUnreferencedFileRemoval")
    assert removal["status"] == "Successful" and "0 file(s) deleted" in removal["lines"]
    # The compaction's `replace` snapshot is current: one data file, the same rows.
    assert _fact(after, "snapshots") == str(APPENDS + 1)
    assert _fact(after, "data-files") == "1"
    assert _fact(after, "total-size").endswith(f"({written['file_size_in_bytes']:,} bytes)")
    assert _fact(after, "rows") == str(APPENDS * 10)
    assert ", replace, " in _fact(after, "current-snapshot")
    # A second run has nothing to compact, and says so.
    again = client.post(f"{EVENTS}/maintenance", data={"csrf": csrf_of(after), "back": EVENTS})
    assert again.status_code == 303
    second = client.get(EVENTS)
    assert "compaction successful (nothing to compact)" in second.text
    assert '<p class="message">nothing to compact</p>' in second.text


def test_a_run_without_the_session_or_its_csrf_token_is_refused(
    server: Deployment, api: httpx.Client, tables: dict[str, Table]
) -> None:
    url = f"{QUIET}/maintenance"
    before = api.get("/whs/namespaces/db/tables/quiet/maintenance-job-status").json()
    assert httpx.post(server.server.url + url, data={"back": QUIET}).status_code == 403  # no session
    client = signed_in(server)
    csrf = csrf_of(client.get(QUIET))
    assert client.post(url, data={"back": QUIET}).status_code == 403
    assert client.post(url, data={"csrf": "forged", "back": QUIET}).status_code == 403
    foreign = client.post(url, data={"csrf": csrf}, headers={"Origin": "http://evil.example"})
    assert foreign.status_code == 403 and "came from http://evil.example" in foreign.text
    assert api.get("/whs/namespaces/db/tables/quiet/maintenance-job-status").json() == before
    assert before["status"]["icebergSnapshotManagement"] == {"status": "Not_Yet_Run"}
    # Signed out, the page itself sends to the sign-in page.
    page = httpx.get(server.server.url + QUIET)
    assert page.status_code == 303 and page.headers["location"] == f"/console/sign-in?next={quote(QUIET)}"
    # With the session and its token, the run goes through; the disabled kind does not run.
    assert client.post(url, data={"csrf": csrf, "back": QUIET}).status_code == 303
    after = client.get(QUIET)
    assert _kind(after, "icebergCompaction")["status"] == "Disabled"
    assert _kind(after, "icebergSnapshotManagement")["status"] == "Successful"


def test_an_unreadable_table_is_a_message_and_its_runs_fail_by_name(
    server: Deployment, tables: dict[str, Table]
) -> None:
    client = signed_in(server)
    listing = client.get("/console/tables")
    assert listing.status_code == 200 and 'href="/console/tables/whs/db/broken"' in listing.text
    lost = "00099-lost.metadata.json cannot be read from storage"
    page = client.get(BROKEN)
    assert page.status_code == 200
    problem = re.search(r'<p class="warning" id="problem">(.*?)</p>', page.text, re.S)
    assert problem and problem.group(1).startswith("This table's metadata cannot be read: ")
    assert lost in problem.group(1)
    # Its maintenance is still shown (it is kept in the store, not in the table's files).
    assert 'id="facts"' not in page.text and _kind(page, "icebergCompaction")["status"] == "Not yet run"
    ran = client.post(f"{BROKEN}/maintenance", data={"csrf": csrf_of(page), "back": BROKEN})
    assert ran.status_code == 303 and ran.headers["location"] == BROKEN
    after = client.get(BROKEN)
    assert after.status_code == 200
    flash = re.search(r'<p class="flash error" role="alert">(.*?)</p>', after.text, re.S)
    assert flash and html.unescape(flash.group(1)) == (
        "Maintenance ran on whs.db.broken: compaction failed; snapshot expiry failed; "
        "unreferenced file removal failed. Why is in the Maintenance table."
    )
    for kind in ("icebergCompaction", "icebergSnapshotManagement", "icebergUnreferencedFileRemoval"):
        row = _kind(after, kind)
        assert row["status"] == "Failed" and lost in row["details"], row


def test_a_table_that_is_not_there_or_a_refused_name_is_a_page_saying_so(
    server: Deployment, tables: dict[str, Table]
) -> None:
    client = signed_in(server)
    missing = client.get("/console/tables/whs/db/nothing")
    assert missing.status_code == 404 and "db.nothing" in missing.text
    for path in ("/console/tables/whs/db..x/t", "/console/tables/whs/db/%3Cb%3E"):
        refused = client.get(path)
        assert refused.status_code == 400, path
        assert "<b>" not in refused.text
    posted = client.post("/console/tables/whs/db/nothing/maintenance", data={
        "csrf": csrf_of(client.get(EVENTS)), "back": "/console/tables/whs/db/nothing",
    })  # fmt: skip
    assert posted.status_code == 303  # back with the error as a message
    assert "db.nothing" in client.get(posted.headers["location"]).text


def test_run_details_and_outcomes_in_words() -> None:
    details = {
        "seconds": 0.25,
        "bytes_deleted": 2048,
        "deleted": 3,
        "marked": 1,
        "unmarked": 0,
        "extra_thing": 7,
    }
    assert detail_words(details) == [
        "1 file(s) marked unreferenced", "0 file(s) referenced again", "3 file(s) deleted", "2.0 KB deleted",
        "took 0.25 s", "7 extra thing",
    ]  # fmt: skip
    assert detail_words({"snapshot_id": None, "files_rewritten": 0}) == ["0 data file(s) rewritten"]
    now = datetime.now()
    failed = Run("icebergCompaction", "Failed", now, now, "boom", {})
    fine = Run("icebergSnapshotManagement", "Successful", now, now, None, {})
    assert outcome("w.t", {"icebergCompaction": failed, "icebergSnapshotManagement": fine}) == (
        "error",
        "Maintenance ran on w.t: compaction failed; snapshot expiry successful. "
        "Why is in the Maintenance table.",
    )
    assert outcome("w.t", {})[0] == "info"
