"""The console's Tables page: the own warehouses' namespaces and tables, their share links, escaping."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from markupsafe import escape
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.types import LongType, NestedField
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

from share_store.catalog import table_pointers, warehouse_rows
from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.commits import parse_model
from share_store.catalog.names import TableName
from share_store.catalog.views import NewView
from sharing_server.console.warehouses import table_spec
from tests.conftest import ADMIN_TOKEN, Deployment, served_locally
from tests.sharing_server.console.test_routes import csrf_of, signed_in

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
V2 = {"format-version": "2"}
SNAPSHOT_MS = 1_700_000_000_000  # 2023-11-14 22:13:20 UTC
# Refused in catalog names now, but a store may hold rows made before names were checked: the
# console must still escape them (and the share spec grammar refuses them).
ODD_NAMESPACE = "a<b>&\"c'"
ODD_TABLE = "<img src=x onerror=alert(1)>"


def esc(text: str) -> str:
    """`text` as the pages' autoescape writes it."""
    return str(escape(text))


def _appended(rows: int, location: str) -> CommitTableRequest:
    """A commit adding one snapshot (its manifest list is never read here) and making it current."""
    snapshot = {
        "snapshot-id": 42, "sequence-number": 1, "timestamp-ms": SNAPSHOT_MS,
        "manifest-list": f"{location}/metadata/snap-42.avro", "schema-id": 0,
        "summary": {"operation": "append", "added-records": str(rows), "total-records": str(rows)},
    }  # fmt: skip
    body = {
        "identifier": {"namespace": ["sales", "eu"], "name": "orders"},
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 42},
        ],
    }
    return parse_model(CommitTableRequest, body, "commit")


@pytest.fixture(scope="module", autouse=True)
def warehouses(server: Deployment) -> None:
    """`whs`, with namespaces, tables (one with a snapshot, one of a name refused today) and a view;
    and `bare`, empty."""
    catalog = WarehouseCatalog(server.store.transactions, server.storage)
    catalog.create_warehouse("whs")
    catalog.create_namespace("whs", ("sales",), {})
    catalog.create_namespace("whs", ("sales", "eu"), {})
    orders = TableName.of("whs", ("sales", "eu"), "orders")
    created = catalog.create_table(orders, NewTable(SCHEMA, properties=V2))
    assert created.location is not None
    catalog.commit(orders, _appended(3, created.location.uri))
    v1 = {"format-version": "1"}
    catalog.create_table(TableName.of("whs", ("sales",), "empty"), NewTable(SCHEMA, properties=v1))
    odd = catalog.create_table(TableName.of("whs", ("sales",), "odd"), NewTable(SCHEMA, properties=V2))
    with server.store.engine.begin() as conn:  # as a store made before names were checked has them
        warehouse_rows.create_namespace(conn, "whs", (ODD_NAMESPACE,), {})
        table_pointers.insert_table(
            conn, "whs", (ODD_NAMESPACE,), ODD_TABLE, str(odd.metadata_location), "odd-row"
        )
    sql = SQLViewRepresentation(type="sql", sql="SELECT id FROM orders", dialect="spark")
    version = ViewVersion(version_id=1, schema_id=0, timestamp_ms=1_700_000_000_000, summary={},
                          representations=[sql], default_namespace=["sales", "eu"])  # fmt: skip
    catalog.create_view(TableName.of("whs", ("sales", "eu"), "recent"), NewView(SCHEMA, version))
    catalog.create_warehouse("bare")


def _row(page: httpx.Response, namespace: str, table: str) -> str:
    body = re.search(rf'<tbody data-namespace="{re.escape(esc(namespace))}">(.*?)</tbody>', page.text, re.S)
    assert body, page.text
    row = re.search(rf'<tr data-table="{re.escape(esc(table))}">(.*?)</tr>', body.group(1), re.S)
    assert row, body.group(1)
    return row.group(1)


def test_the_page_lists_warehouses_nested_namespaces_and_tables(server: Deployment) -> None:
    page = signed_in(server).get("/console/tables")
    assert page.status_code == 200
    assert '<a href="/console/tables" aria-current="page">Tables</a>' in page.text
    assert 'data-warehouse="whs"' in page.text
    namespaces = re.findall(r'<tbody data-namespace="([^"]*)">', page.text)
    assert namespaces == [esc(ODD_NAMESPACE), "sales", "sales.eu"]  # parents before their children
    orders = _row(page, "sales.eu", "orders")
    cells = [re.sub(r"<[^>]+>", "", td).strip() for td in re.findall(r"<td[^>]*>(.*?)</td>", orders, re.S)]
    assert cells[1:5] == ["Iceberg v2", "1", "2023-11-14 22:13:20 UTC", "3"]
    location = server.storage.root / "whs" / "sales" / "eu"  # type: ignore[attr-defined]
    assert "/whs/sales/eu/orders-" in cells[5] and location.is_dir()
    empty = _row(page, "sales", "empty")
    assert "Iceberg v1" in empty and "none yet" in empty and "—" in empty
    # Views are listed with their namespace, beside its tables.
    views = re.search(r'<tr class="views" data-views="sales.eu">(.*?)</tr>', page.text, re.S)
    assert views and "<code>recent</code>" in views.group(1)
    assert 'data-views="sales"' not in page.text
    # A warehouse without namespaces says how to make one.
    assert "sharing-server table namespace create bare NAMESPACE" in page.text


def test_the_share_link_carries_the_spec_into_a_shares_add_form(server: Deployment) -> None:
    client = signed_in(server)
    server.store.create_share("linked")
    orders = _row(client.get("/console/tables"), "sales.eu", "orders")
    match = re.search(r'<a class="share-link" href="([^"]+)"[^>]*>Share…</a>', orders)
    assert match
    href = html.unescape(match.group(1))
    spec = "eu:orders:uniform:whs:sales.eu:orders"
    parts = urlsplit(href)
    assert parts.path == "/console/tables/share" and parse_qs(parts.query) == {"spec": [spec]}
    chooser = client.get(href)
    assert chooser.status_code == 200 and f'<code id="spec">{spec}</code>' in chooser.text
    add = f"/console/shares/linked?spec={quote(spec)}#add-table"
    assert f'href="{esc(add)}"' in chooser.text
    # The share's own form opens filled in, and adding through it shares the table.
    share_page = client.get(add.split("#")[0])
    assert f'aria-describedby="spec-help" spellcheck="false">{spec}</textarea>' in share_page.text
    added = client.post("/console/shares/linked/tables", data={"csrf": csrf_of(share_page), "spec": spec})
    assert added.status_code == 303
    (table,) = server.store.list_tables("linked")
    assert (table.schema, table.name, table.bucket, table.path) == ("eu", "orders", "whs", "sales.eu/orders")
    # "A new share" opens the create form with the table as `share create` takes it.
    new = re.search(r'<a href="([^"]+)" id="new-share">', chooser.text)
    assert new
    create = client.get(html.unescape(new.group(1)).split("#")[0])
    assert ">eu\norders:uniform:whs:sales.eu:orders</textarea>" in create.text


def test_names_with_html_are_escaped_and_offered_no_spec(server: Deployment) -> None:
    page = signed_in(server).get("/console/tables")
    assert ODD_TABLE not in page.text and ODD_NAMESPACE not in page.text
    assert esc(ODD_TABLE) in page.text and esc(ODD_NAMESPACE) in page.text
    odd = _row(page, ODD_NAMESPACE, ODD_TABLE)
    assert "Share…" not in odd and "no spec for this name" in odd
    assert 'class="table-link"' not in odd  # no page for a name the catalog refuses now
    assert (
        '<a class="table-link" href="/console/tables/whs/sales.eu/orders" aria-label="sales.eu.orders">'
        in page.text
    )
    assert table_spec("whs", ("sales.eu",), "t") is None  # a dot would name another namespace
    assert table_spec("whs", ("sales", "eu"), "t") == "eu:t:uniform:whs:sales.eu:t"


def _fact(page: httpx.Response, ident: str) -> str:
    found = re.search(rf'<dd id="{ident}">(.*?)</dd>', page.text, re.S)
    assert found, page.text
    return re.sub(r"<[^>]+>", "", found.group(1)).strip()


def test_a_tables_own_page_says_what_its_snapshot_summary_leaves_out(server: Deployment) -> None:
    client = signed_in(server)
    # `orders`' one snapshot was committed with `total-records` only in its summary.
    orders = client.get("/console/tables/whs/sales.eu/orders")
    assert orders.status_code == 200
    assert _fact(orders, "rows") == "3" and _fact(orders, "snapshots") == "1"
    assert _fact(orders, "data-files") == _fact(orders, "delete-files") == _fact(orders, "total-size") == "—"
    # `empty` has no snapshot at all.
    empty = client.get("/console/tables/whs/sales/empty")
    assert empty.status_code == 200
    assert (
        _fact(empty, "current-snapshot") == "none yet: no data written" and _fact(empty, "snapshots") == "0"
    )
    assert 'id="data-files"' not in empty.text and 'data-kind="icebergCompaction"' in empty.text


def test_a_bad_spec_is_a_message(server: Deployment) -> None:
    client = signed_in(server)
    answer = client.get("/console/tables/share", params={"spec": "<b>:x"})
    assert answer.status_code == 400 and "<b>" not in answer.text and "&lt;b&gt;" in answer.text


def test_signed_out_tables_pages_redirect_to_sign_in(server: Deployment) -> None:
    for path in ("/console/tables", "/console/tables/share?spec=a:b:uniform:whs:sales:t"):
        answer = httpx.get(server.server.url + path)
        assert answer.status_code == 303, path
        assert answer.headers["location"] == f"/console/sign-in?next={quote(urlsplit(path).path)}"


def test_no_warehouses_explains_how_to_create_one(tmp_path: Path) -> None:
    with served_locally(tmp_path, ADMIN_TOKEN) as empty:
        page = signed_in(empty).get("/console/tables")
        assert page.status_code == 200 and 'id="no-warehouses"' in page.text
        assert "sharing-server table warehouse create NAME" in page.text
        assert "POST /_iceberg/v1/warehouses" in page.text
