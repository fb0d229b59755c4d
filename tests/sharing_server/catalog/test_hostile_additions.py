"""A hostile catalog user allowed one namespace, against what the catalog gained lately: views,
namespace table defaults and the warehouse's own. Each attempt names a place outside the user's
own tables ('#', '?', '..', '%2F', another namespace's or warehouse's path, another table's
metadata); none may write, point at or purge anything there, and the user's own purge afterwards
deletes only its own table's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.catalog_attacks import ATT, attacker_policy
from tests.sharing_server.catalog.served import (
    WH,
    Served,
    create_table,
    error_of,
    set_properties,
    table_path,
)
from tests.sharing_server.catalog.test_views import create_view, view_path


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def others(root: Path) -> dict[str, bytes]:
    """Every file outside the attacker's namespace folder."""
    return {key: data for key, data in files(root).items() if not key.startswith(f"{WH}/{ATT}/")}


@pytest.fixture
def mallory(catalog: Served) -> str:
    return catalog.token_of(catalog.user("mallory", attacker_policy(WH)))


def purge_own(catalog: Served, token: str, name: str) -> None:
    """The attacker's own table, made and purged: only files under its location go."""
    made = create_table(catalog, ATT, name, token=token)
    assert made.status_code == 200, made.text
    dropped = catalog.call("DELETE", table_path(ATT, name) + "?purgeRequested=true", token=token)
    assert dropped.status_code == 204, dropped.text


def hostile_locations(catalog: Served) -> list[str]:
    root = f"file://{catalog.root}"
    table = catalog.call("GET", table_path("ns", "t")).json()["metadata"]["location"]
    return [
        f"{root}/{WH}/{ATT}/v#frag",
        f"{root}/{WH}/{ATT}/v?x=1",
        f"{root}/{WH}/{ATT}/..%2Fns%2Fv",
        f"{root}/{WH}/{ATT}/%2E%2E/ns/v",
        f"{root}/{WH}/{ATT}/../ns/v",
        f"{root}/{WH}/ns/v",  # another namespace's folder
        f"{root}/other/{ATT}/v",  # another warehouse
        table,  # another table's location
        f"{table}/inner",
    ]


def test_a_view_cannot_be_placed_or_moved_outside_the_callers_namespace(
    catalog: Served, mallory: str
) -> None:
    before = others(catalog.root)
    for hostile in hostile_locations(catalog):
        answer = create_view(catalog, ATT, "v", token=mallory, location=hostile)
        assert answer.status_code in (400, 403), (hostile, answer.text)
        assert others(catalog.root) == before, hostile
    made = create_view(catalog, ATT, "v", token=mallory)
    assert made.status_code == 200, made.text
    uuid = made.json()["metadata"]["view-uuid"]
    for hostile in hostile_locations(catalog):
        move = {"requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
                "updates": [{"action": "set-location", "location": hostile}]}  # fmt: skip
        answer = catalog.call("POST", view_path(ATT, "v"), move, token=mallory)
        assert answer.status_code in (400, 403), (hostile, answer.text)
    assert others(catalog.root) == before
    purge_own(catalog, mallory, "after_views")
    assert others(catalog.root) == before


def test_another_tables_metadata_cannot_be_registered_as_a_view(catalog: Served, mallory: str) -> None:
    before = others(catalog.root)
    loaded = catalog.call("GET", table_path("ns", "t")).json()
    victim = loaded["metadata-location"]
    for path in (victim, victim.replace(f"/{WH}/ns/", f"/{WH}/{ATT}/../ns/"), victim + "#x"):
        body = {"name": "stolen", "metadata-location": path}
        answer = catalog.call("POST", f"/{WH}/namespaces/{ATT}/register-view", body, token=mallory)
        assert answer.status_code in (400, 403, 404), (path, answer.text)
    assert catalog.call("HEAD", view_path(ATT, "stolen"), token=mallory).status_code == 404
    purge_own(catalog, mallory, "after_register")
    assert others(catalog.root) == before
    assert catalog.call("GET", table_path("ns", "t")).json()["metadata-location"] == victim


@pytest.mark.parametrize("key", ["write.data.path", "write.metadata.path", "write.object-storage.path"])
def test_a_namespace_default_cannot_send_new_tables_writes_outside(
    catalog: Served, mallory: str, key: str
) -> None:
    """The caller may not set its namespace's `table-default.*` (403); one the provider set is a
    table property like any other: a path outside the new table is refused when the table is made,
    as a create's own would be."""
    before = others(catalog.root)
    for hostile in hostile_locations(catalog):
        change = {"updates": {f"table-default.{key}": hostile}}
        properties = f"/{WH}/namespaces/{ATT}/properties"
        error_of(catalog.call("POST", properties, change, token=mallory), 403, "ForbiddenException")
        assert catalog.call("POST", properties, change).status_code == 200  # the provider's mistake
        refused = create_table(catalog, ATT, "defaulted", token=mallory)
        assert refused.status_code == 400, (hostile, refused.text)
    clear = {"removals": [f"table-default.{key}"]}
    assert catalog.call("POST", f"/{WH}/namespaces/{ATT}/properties", clear).status_code == 200
    purge_own(catalog, mallory, "after_defaults")
    assert others(catalog.root) == before


def test_an_existing_tables_write_path_and_location_stay_and_purge_stays_inside(
    catalog: Served, mallory: str
) -> None:
    before = others(catalog.root)
    made = create_table(catalog, ATT, "mine", token=mallory)
    assert made.status_code == 200, made.text
    for hostile in hostile_locations(catalog):
        for change in (
            set_properties(**{"write.data.path": hostile}),
            {"updates": [{"action": "set-location", "location": hostile}]},
        ):
            answer = catalog.call("POST", table_path(ATT, "mine"), change, token=mallory)
            assert answer.status_code in (400, 403, 409), (hostile, answer.text)
    dropped = catalog.call("DELETE", table_path(ATT, "mine") + "?purgeRequested=true", token=mallory)
    assert dropped.status_code == 204
    assert others(catalog.root) == before


def test_a_warehouse_default_is_the_providers_alone(catalog: Served, mallory: str) -> None:
    change: dict[str, Any] = {"updates": {"table-default.write.data.path": f"file://{catalog.root}/{WH}/ns"}}
    error_of(
        catalog.call("POST", f"/warehouses/{WH}/properties", change, token=mallory), 403, "ForbiddenException"
    )
    assert catalog.call("GET", f"/warehouses/{WH}").json()["properties"] == {}
