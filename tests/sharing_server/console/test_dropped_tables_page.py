"""The console's Tables page lists each warehouse's tables and views dropped without purge, with when
they are purged, and brings one back with its "Undrop" button; one whose name is taken again stays
dropped, and the page says why."""

from __future__ import annotations

import re

from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.names import TableName
from tests.conftest import Deployment
from tests.sharing_server.console.test_routes import csrf_of, signed_in
from tests.sharing_server.console.test_tables_page import SCHEMA, V2

T = TableName.of("whs", ("sales", "eu"), "orders")


def _dropped_rows(page_text: str) -> list[str]:
    return re.findall(r'<tr data-dropped="[^"]+">(.*?)</tr>', page_text, re.S)


def _form_of(row: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', row))


def test_a_dropped_table_is_listed_and_undropped_from_the_page(server: Deployment) -> None:
    catalog = WarehouseCatalog(server.store.transactions, server.storage)
    catalog.create_warehouse("whs")
    catalog.create_namespace("whs", ("sales",), {})
    catalog.create_namespace("whs", ("sales", "eu"), {})
    made = catalog.create_table(T, NewTable(SCHEMA, properties=V2))
    client = signed_in(server)
    assert _dropped_rows(client.get("/console/tables").text) == []  # nothing dropped: no list

    catalog.drop_table(T)
    page = client.get("/console/tables")
    (row,) = _dropped_rows(page.text)
    assert "<code>sales.eu.orders</code>" in row and "<td>table</td>" in row
    assert "kept, with its files and its folder, for\n  7d after its drop" in page.text
    assert 'data-table="orders"' not in page.text  # no longer among the live tables

    # While a new table holds the name, the undrop is refused and said so; the old one stays dropped.
    catalog.create_table(T, NewTable(SCHEMA, properties=V2))
    form = _form_of(row)
    assert form["namespace"] == "sales.eu" and form["kind"] == "table"
    refused = client.post("/console/tables/undrop", data=form)
    assert refused.status_code == 303
    page = client.get(refused.headers["location"])
    assert "Table already exists: sales.eu.orders" in page.text and len(_dropped_rows(page.text)) == 1

    catalog.drop_table(T, purge=True)
    undone = client.post("/console/tables/undrop", data={**form, "csrf": csrf_of(page)})
    assert undone.status_code == 303 and undone.headers["location"] == "/console/tables"
    page = client.get("/console/tables")
    assert "Undropped table sales.eu.orders in warehouse whs." in page.text
    assert _dropped_rows(page.text) == [] and 'data-table="orders"' in page.text
    assert catalog.load_table(T).metadata_location == made.metadata_location
