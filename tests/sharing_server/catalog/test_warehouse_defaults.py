"""New tables' format version: 2 unless the create, its namespace's or its warehouse's
`table-default.*` asks for another; the warehouse's defaults set by the provider alone, through the
catalog API, the CLI (`table warehouse defaults`) and the console."""

from __future__ import annotations

import re
from typing import Any

import pytest

from share_store.catalog.users import CatalogUsers
from tests.catalog_attacks import attacker_policy
from tests.sharing_server.catalog.served import ADMIN, SCHEMA, SECRET, WH, Served, error_of


def created_version(
    catalog: Served, namespace: str, name: str, properties: dict[str, str] | None = None
) -> int:
    body: dict[str, Any] = {"name": name, "schema": SCHEMA}
    if properties is not None:
        body["properties"] = properties
    answer = catalog.call("POST", f"/{WH}/namespaces/{namespace}/tables", body)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["metadata"]["format-version"])


def test_a_table_is_v2_unless_something_asks_for_another(catalog: Served) -> None:
    assert created_version(catalog, "ns", "plain") == 2
    assert created_version(catalog, "ns", "asked", {"format-version": "3"}) == 3
    assert created_version(catalog, "ns", "old", {"format-version": "1"}) == 1


def test_the_create_wins_over_the_namespace_which_wins_over_the_warehouse(catalog: Served) -> None:
    defaults = {"updates": {"table-default.format-version": "3", "table-default.owner": "lake"}}
    changed = catalog.call("POST", f"/warehouses/{WH}/properties", defaults)
    assert changed.status_code == 200, changed.text
    assert changed.json() == {
        "updated": ["table-default.format-version", "table-default.owner"],
        "removed": [],
        "missing": None,
    }
    loaded = catalog.call("GET", f"/warehouses/{WH}").json()
    assert loaded == {"name": WH, "properties": defaults["updates"]}
    assert created_version(catalog, "ns", "from_warehouse") == 3
    table = catalog.call("GET", f"/{WH}/namespaces/ns/tables/from_warehouse").json()
    assert table["metadata"]["properties"]["owner"] == "lake"
    namespace = {"namespace": ["duck"], "properties": {"table-default.format-version": "2"}}
    assert catalog.call("POST", f"/{WH}/namespaces", namespace).status_code == 200
    assert created_version(catalog, "duck", "from_namespace") == 2
    assert created_version(catalog, "duck", "own", {"format-version": "3"}) == 3
    # Removed again: the server's default.
    removed = catalog.call(
        "POST", f"/warehouses/{WH}/properties", {"removals": ["table-default.format-version"]}
    )
    assert removed.json()["removed"] == ["table-default.format-version"]
    assert created_version(catalog, "ns", "back") == 2


def test_a_warehouse_holds_only_table_defaults(catalog: Served) -> None:
    message = error_of(
        catalog.call("POST", f"/warehouses/{WH}/properties", {"updates": {"owner": "x"}}),
        400,
        "BadRequestException",
    )
    assert "table-default" in message
    error_of(
        catalog.call("POST", "/warehouses/nope/properties", {"updates": {}}), 404, "NoSuchWarehouseException"
    )
    error_of(catalog.call("POST", f"/warehouses/{WH}/properties", b"[]"), 400, "BadRequestException")
    both = {"removals": ["table-default.a"], "updates": {"table-default.a": "1"}}
    error_of(catalog.call("POST", f"/warehouses/{WH}/properties", both), 400, "BadRequestException")


def test_only_the_provider_sets_a_warehouses_defaults(catalog: Served) -> None:
    """A catalog user, even one allowed everything on the warehouse, cannot change what every
    other user's new tables start with; it may read them."""
    for policy in (None, attacker_policy(WH)):
        user = CatalogUsers(catalog.store.transactions, SECRET).create(f"u{len(str(policy))}", policy)
        token = catalog.token_of(user)
        body = {"updates": {"table-default.format-version": "1"}}
        refused = catalog.call("POST", f"/warehouses/{WH}/properties", body, token=token)
        error_of(refused, 403, "ForbiddenException")
    assert catalog.call("GET", f"/warehouses/{WH}").json()["properties"] == {}
    full = CatalogUsers(catalog.store.transactions, SECRET).create("reader")
    assert catalog.call("GET", f"/warehouses/{WH}", token=catalog.token_of(full)).status_code == 200


def test_an_unauthenticated_change_is_refused_before_its_body_is_read(catalog: Served) -> None:
    answer = catalog.call("POST", f"/warehouses/{WH}/properties", b"{not json", token=None)
    error_of(answer, 401, "NotAuthorizedException")


@pytest.mark.parametrize("value", [None, {"a": 1}, float("inf")])
def test_a_default_that_is_no_string_is_refused(catalog: Served, value: Any) -> None:
    body = {"updates": {"table-default.format-version": value}}
    content = repr(body).replace("None", "null").replace("'", '"').replace("inf", "1e999").encode()
    answer = catalog.call("POST", f"/warehouses/{WH}/properties", content)
    error_of(answer, 400, "BadRequestException")


def test_the_console_sets_a_warehouses_format_version(catalog: Served) -> None:
    client = catalog.client
    form = client.get("/console/sign-in")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert token is not None
    signed = client.post(
        "/console/sign-in",
        data={"csrf": token.group(1), "token": ADMIN, "next": "/console/tables"},
        follow_redirects=False,
    )
    assert signed.status_code == 303, signed.text
    page = client.get("/console/tables")
    assert page.status_code == 200
    assert 'value="" selected>server default (2)' in page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    origin = {"Origin": str(client.base_url)}
    form = {"csrf": csrf.group(1), "warehouse": WH, "format_version": "3"}
    done = client.post("/console/tables/defaults", data=form, headers=origin, follow_redirects=False)
    assert done.status_code == 303
    assert catalog.call("GET", f"/warehouses/{WH}").json()["properties"] == {
        "table-default.format-version": "3"
    }
    page = client.get("/console/tables")
    assert "New tables of warehouse whs get format version 3." in page.text
    assert '<option value="3" selected>3</option>' in page.text
    assert created_version(catalog, "ns", "console_made") == 3
    form["format_version"] = "9"
    client.post("/console/tables/defaults", data=form, headers=origin, follow_redirects=False)
    assert catalog.call("GET", f"/warehouses/{WH}").json()["properties"] == {
        "table-default.format-version": "3"
    }
    form["format_version"] = ""
    client.post("/console/tables/defaults", data=form, headers=origin, follow_redirects=False)
    assert catalog.call("GET", f"/warehouses/{WH}").json()["properties"] == {}
