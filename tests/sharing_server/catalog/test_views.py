"""Views of the own warehouses through the real app, in process: every view endpoint, its answers and
refusals in the Iceberg REST error model, the name space views share with tables, compare-and-swap,
locations the catalog decides, and a catalog user held to its policy (the table actions on the
view's ARN)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from share_store.catalog import views as views_module
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.names import TableName
from share_store.catalog.view_commits import ViewCommit
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.catalog.views import VIEW_ENDPOINTS
from tests.catalog_attacks import ATT, attacker_policy
from tests.sharing_server.catalog.served import (
    NESTED,
    SCHEMA,
    SECRET,
    WH,
    Served,
    create_table,
    error_of,
    table_path,
)

VERSION = {
    "version-id": 1,
    "schema-id": 0,
    "timestamp-ms": 1_700_000_000_000,
    "summary": {"engine-name": "tests"},
    "representations": [{"type": "sql", "sql": "SELECT id, name FROM ns.t", "dialect": "spark"}],
    "default-namespace": ["ns"],
}
WIDER = {**SCHEMA, "fields": [*SCHEMA["fields"], {"id": 3, "name": "n", "type": "int", "required": False}]}


def create_view(served: Served, namespace: str, name: str, token: str | None = None, **more: Any) -> Any:
    body = {"name": name, "schema": SCHEMA, "view-version": VERSION, **more}
    path = f"/{WH}/namespaces/{quote(namespace, safe='')}/views"
    return served.call("POST", path, body, **({"token": token} if token else {}))


def view_path(namespace: str, name: str) -> str:
    return f"/{WH}/namespaces/{quote(namespace, safe='')}/views/{quote(name, safe='')}"


def made(served: Served, namespace: str, name: str) -> dict[str, Any]:
    answer = create_view(served, namespace, name)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def new_version(sql: str, schema_id: int = -1) -> dict[str, Any]:
    representations = [{"type": "sql", "sql": sql, "dialect": "spark"}]
    return {**VERSION, "schema-id": schema_id, "representations": representations}


def replacing(uuid: str, sql: str) -> dict[str, Any]:
    """What an engine's CREATE OR REPLACE VIEW sends: a new schema and version, made current."""
    return {
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
        "updates": [
            {"action": "add-schema", "schema": WIDER},
            {"action": "add-view-version", "view-version": new_version(sql)},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }


# -- the endpoints ---------------------------------------------------------------------------------


def test_config_lists_the_view_endpoints(catalog: Served) -> None:
    endpoints = catalog.call("GET", "/config", params={"warehouse": WH}).json()["endpoints"]
    assert set(VIEW_ENDPOINTS) <= set(endpoints)
    assert "POST /v1/{prefix}/views/rename" in endpoints


def test_a_view_is_created_listed_loaded_and_dropped(catalog: Served) -> None:
    created = made(catalog, "ns", "v")
    location, metadata = created["metadata-location"], created["metadata"]
    assert created["config"] == {}
    folder = f"file://{catalog.root}/{WH}/ns/v-"
    assert metadata["location"].startswith(folder)
    assert location.startswith(metadata["location"] + "/metadata/00000-")
    assert Path(location.removeprefix("file://")).is_file()
    assert metadata["format-version"] == 1
    assert metadata["current-version-id"] == 1
    assert [v["version-id"] for v in metadata["versions"]] == [1]
    assert metadata["versions"][0]["representations"] == VERSION["representations"]
    assert metadata["version-log"] == [{"timestamp-ms": VERSION["timestamp-ms"], "version-id": 1}]
    assert [s["schema-id"] for s in metadata["schemas"]] == [0]

    listed = catalog.call("GET", f"/{WH}/namespaces/ns/views").json()
    assert listed == {"identifiers": [{"namespace": ["ns"], "name": "v"}], "next-page-token": None}
    tables = catalog.call("GET", f"/{WH}/namespaces/ns/tables").json()["identifiers"]
    assert tables == [{"namespace": ["ns"], "name": "t"}]  # a view is no table
    loaded = catalog.call("GET", view_path("ns", "v"))
    assert loaded.status_code == 200 and loaded.json() == created
    assert catalog.call("HEAD", view_path("ns", "v")).status_code == 204

    assert catalog.call("DELETE", view_path("ns", "v")).status_code == 204
    assert catalog.call("HEAD", view_path("ns", "v")).status_code == 404
    error_of(catalog.call("GET", view_path("ns", "v")), 404, "NoSuchViewException")
    error_of(catalog.call("DELETE", view_path("ns", "v")), 404, "NoSuchViewException")
    assert catalog.call("GET", f"/{WH}/namespaces/ns/views").json()["identifiers"] == []
    assert Path(location.removeprefix("file://")).is_file()  # a drop forgets; files stay


def test_views_in_nested_namespaces_and_refused_names(catalog: Served) -> None:
    made(catalog, NESTED, "deep")
    listed = catalog.call("GET", f"/{WH}/namespaces/{quote(NESTED)}/views").json()["identifiers"]
    assert listed == [{"namespace": ["a", "b"], "name": "deep"}]
    assert "/a/b/deep-" in catalog.call("GET", view_path(NESTED, "deep")).json()["metadata"]["location"]
    error_of(create_view(catalog, "ns", "bad.name"), 400, "BadRequestException")
    error_of(create_view(catalog, "ns", "../up"), 400, "BadRequestException")
    error_of(create_view(catalog, "nowhere", "v"), 404, "NoSuchNamespaceException")
    error_of(catalog.call("GET", f"/{WH}/namespaces/nowhere/views"), 404, "NoSuchNamespaceException")
    error_of(catalog.call("POST", f"/{WH}/namespaces/ns/views", b"{"), 400, "BadRequestException")
    error_of(catalog.call("POST", f"/{WH}/namespaces/ns/views", {"name": "v"}), 400, "BadRequestException")
    two = {**VERSION, "representations": VERSION["representations"] * 2}  # one dialect twice
    error_of(create_view(catalog, "ns", "v", **{"view-version": two}), 400, "BadRequestException")
    error_of(catalog.call("GET", f"/{WH}/namespaces/ns/views/a%2Fb"), 404, "NoSuchEndpointException")
    error_of(catalog.call("PUT", view_path("ns", "v")), 404, "NoSuchEndpointException")


def test_views_and_tables_share_one_name_space(catalog: Served) -> None:
    assert "Table already exists" in error_of(create_view(catalog, "ns", "t"), 409, "AlreadyExistsException")
    made(catalog, "ns", "v")
    taken = error_of(create_table(catalog, "ns", "v"), 409, "AlreadyExistsException")
    assert "View already exists" in taken
    error_of(catalog.call("GET", table_path("ns", "v")), 404, "NoSuchTableException")
    assert catalog.call("HEAD", table_path("ns", "v")).status_code == 404
    error_of(catalog.call("GET", view_path("ns", "t")), 404, "NoSuchViewException")
    error_of(catalog.call("DELETE", view_path("ns", "t")), 404, "NoSuchViewException")
    error_of(catalog.call("DELETE", table_path("ns", "v")), 404, "NoSuchTableException")
    rename_table = {
        "source": {"namespace": ["ns"], "name": "t"},
        "destination": {"namespace": ["ns"], "name": "v"},
    }
    error_of(catalog.call("POST", f"/{WH}/tables/rename", rename_table), 409, "AlreadyExistsException")
    rename_view = {
        "source": {"namespace": ["ns"], "name": "v"},
        "destination": {"namespace": ["ns"], "name": "t"},
    }
    error_of(catalog.call("POST", f"/{WH}/views/rename", rename_view), 409, "AlreadyExistsException")
    # A namespace holding only a view is not empty.
    made(catalog, NESTED, "only")
    message = error_of(catalog.call("DELETE", f"/{WH}/namespaces/{quote(NESTED)}"), 409,
                       "NamespaceNotEmptyException")  # fmt: skip
    assert "view only" in message
    assert catalog.call("DELETE", view_path(NESTED, "only")).status_code == 204
    assert catalog.call("DELETE", f"/{WH}/namespaces/{quote(NESTED)}").status_code == 204


def test_a_replace_adds_a_version_and_makes_it_current(catalog: Served) -> None:
    created = made(catalog, "ns", "v")
    uuid = created["metadata"]["view-uuid"]
    body = replacing(uuid, "SELECT id, name, 1 AS n FROM ns.t")
    body["updates"] += [
        {"action": "set-properties", "updates": {"comment": "wider", "keep": "yes"}},
        {"action": "remove-properties", "removals": ["keep"]},
        {"action": "set-location", "location": created["metadata"]["location"]},
        {"action": "assign-uuid", "uuid": uuid},
        {"action": "upgrade-format-version", "format-version": 1},
    ]
    replaced = catalog.call("POST", view_path("ns", "v"), body)
    assert replaced.status_code == 200, replaced.text
    answer = replaced.json()
    metadata = answer["metadata"]
    assert answer["metadata-location"].startswith(metadata["location"] + "/metadata/00001-")
    assert metadata["view-uuid"] == uuid and metadata["location"] == created["metadata"]["location"]
    assert [s["schema-id"] for s in metadata["schemas"]] == [0, 1]
    assert metadata["current-version-id"] == 2
    current = next(v for v in metadata["versions"] if v["version-id"] == 2)
    assert current["schema-id"] == 1 and current["representations"][0]["sql"].endswith("1 AS n FROM ns.t")
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2]
    assert metadata["properties"] == {"comment": "wider"}
    assert catalog.call("GET", view_path("ns", "v")).json() == answer

    # The first version again: its id is reused, made current, and logged.
    back = {
        "requirements": [],
        "updates": [
            {"action": "add-view-version", "view-version": {**VERSION, "schema-id": 0, "version-id": 9}},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    again = catalog.call("POST", view_path("ns", "v"), back).json()["metadata"]
    assert [v["version-id"] for v in again["versions"]] == [1, 2]
    assert again["current-version-id"] == 1
    assert [e["version-id"] for e in again["version-log"]] == [1, 2, 1]


def test_version_history_keeps_the_newest_versions(catalog: Served) -> None:
    uuid = made(catalog, "ns", "v")["metadata"]["view-uuid"]
    keep = {"updates": [{"action": "set-properties", "updates": {"version.history.num-entries": "2"}}]}
    assert catalog.call("POST", view_path("ns", "v"), keep).status_code == 200
    for n in range(3):
        answer = catalog.call("POST", view_path("ns", "v"), replacing(uuid, f"SELECT {n}"))
        assert answer.status_code == 200, answer.text
    metadata = answer.json()["metadata"]
    assert [v["version-id"] for v in metadata["versions"]] == [3, 4]
    assert metadata["current-version-id"] == 4
    assert {e["version-id"] for e in metadata["version-log"]} <= {3, 4}


@pytest.mark.parametrize(
    ("update", "status", "kind"),
    [
        ({"action": "set-current-view-version", "view-version-id": 7}, 400, "BadRequestException"),
        ({"action": "set-current-view-version", "view-version-id": -1}, 400, "BadRequestException"),
        (
            {"action": "add-view-version", "view-version": new_version("SELECT 1", 5)},
            400,
            "BadRequestException",
        ),
        ({"action": "add-view-version", "view-version": {"schema-id": 0}}, 400, "BadRequestException"),
        ({"action": "upgrade-format-version", "format-version": 2}, 400, "BadRequestException"),
        (
            {"action": "assign-uuid", "uuid": "00000000-0000-0000-0000-000000000000"},
            400,
            "BadRequestException",
        ),
        ({"action": "add-snapshot", "snapshot": {}}, 400, "BadRequestException"),
        ({"action": "set-properties", "updates": {"x": None}}, 400, "BadRequestException"),
        ({"action": "remove-properties", "removals": "x"}, 400, "BadRequestException"),
        ({"action": "add-schema", "schema": {"type": "struct", "fields": "x"}}, 400, "BadRequestException"),
    ],
)
def test_a_replace_that_cannot_apply_is_refused_and_writes_nothing(
    catalog: Served, update: dict[str, Any], status: int, kind: str
) -> None:
    made(catalog, "ns", "v")
    before = catalog.metadata_files()
    error_of(catalog.call("POST", view_path("ns", "v"), {"updates": [update]}), status, kind)
    assert catalog.metadata_files() == before


def test_replace_refusals_in_the_error_model(catalog: Served) -> None:
    made(catalog, "ns", "v")
    before = catalog.metadata_files()
    wrong = replacing("00000000-0000-0000-0000-000000000000", "SELECT 2")
    error_of(catalog.call("POST", view_path("ns", "v"), wrong), 409, "CommitFailedException")
    error_of(catalog.call("POST", view_path("ns", "gone"), {"updates": []}), 404, "NoSuchViewException")
    error_of(catalog.call("POST", view_path("ns", "t"), {"updates": []}), 404, "NoSuchViewException")
    unknown = {"requirements": [{"type": "assert-table-uuid", "uuid": "x"}], "updates": []}
    error_of(catalog.call("POST", view_path("ns", "v"), unknown), 400, "BadRequestException")
    error_of(catalog.call("POST", view_path("ns", "v"), b"[]"), 400, "BadRequestException")
    error_of(catalog.call("POST", view_path("ns", "v"), {"updates": {}}), 400, "BadRequestException")
    assert catalog.metadata_files() == before


def test_a_replace_that_loses_the_race_is_a_commit_conflict(
    catalog: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another commit swaps the pointer between the loser's read and its swap: the loser is a 409, its
    file is taken back, and the winner's metadata stays current."""
    uuid = made(catalog, "ns", "v")["metadata"]["view-uuid"]
    storage = LocalStorage(catalog.root, UrlSigner(SECRET, "http://localhost"))
    other = WarehouseCatalog(catalog.store.transactions, storage)
    applied = views_module.updated_view
    raced: list[str] = []

    def racing(base: Any, commit: ViewCommit) -> Any:
        if not raced:
            raced.append("once")
            won = other.replace_view(
                TableName.of(WH, ("ns",), "v"), ViewCommit.of(replacing(uuid, "SELECT 'won'"))
            )
            raced.append(won.metadata_location)
        return applied(base, commit)

    monkeypatch.setattr(views_module, "updated_view", racing)
    before = set(catalog.metadata_files())
    message = error_of(catalog.call("POST", view_path("ns", "v"), replacing(uuid, "SELECT 'lost'")), 409,
                       "CommitFailedException")  # fmt: skip
    assert "changed by another commit" in message
    current = catalog.call("GET", view_path("ns", "v")).json()
    assert current["metadata-location"] == raced[1]
    assert {str(p) for p in set(catalog.metadata_files()) - before} == {raced[1].removeprefix("file://")}
    sqls = [v["representations"][0]["sql"] for v in current["metadata"]["versions"]]
    assert "SELECT 'won'" in sqls and "SELECT 'lost'" not in sqls


def test_rename_moves_a_view_within_its_warehouse(catalog: Served) -> None:
    created = made(catalog, "ns", "v")

    def rename(source: tuple[list[str], str], target: tuple[list[str], str]) -> Any:
        body = {"source": {"namespace": source[0], "name": source[1]},
                "destination": {"namespace": target[0], "name": target[1]}}  # fmt: skip
        return catalog.call("POST", f"/{WH}/views/rename", body)

    assert rename((["ns"], "v"), (["a", "b"], "w")).status_code == 204
    assert catalog.call("HEAD", view_path("ns", "v")).status_code == 404
    moved = catalog.call("GET", view_path(NESTED, "w")).json()
    assert moved["metadata-location"] == created["metadata-location"]  # its files stay
    error_of(rename((["ns"], "v"), (["ns"], "x")), 404, "NoSuchViewException")
    error_of(rename((["ns"], "t"), (["ns"], "x")), 404, "NoSuchViewException")  # a table is no view
    error_of(rename((["a", "b"], "w"), (["nowhere"], "x")), 404, "NoSuchNamespaceException")
    error_of(rename((["a", "b"], "w"), (["ns"], "t")), 409, "AlreadyExistsException")
    error_of(rename((["a", "b"], "w"), (["ns"], "bad.name")), 400, "BadRequestException")
    error_of(catalog.call("POST", f"/{WH}/views/rename", {"source": "v"}), 400, "BadRequestException")


def test_register_view_adopts_a_metadata_file_in_the_namespace(catalog: Served) -> None:
    created = made(catalog, "ns", "v")
    location = created["metadata-location"]
    register = f"/{WH}/namespaces/ns/register-view"
    # The file is inside a live view's location: no second view may claim it.
    error_of(catalog.call("POST", register, {"name": "w", "metadata-location": location}), 400,
             "BadRequestException")  # fmt: skip
    assert catalog.call("DELETE", view_path("ns", "v")).status_code == 204
    error_of(catalog.call("POST", register, {"name": "t", "metadata-location": location}), 409,
             "AlreadyExistsException")  # fmt: skip
    # In another namespace's folder than the view's own: refused.
    into_a = {"name": "w", "metadata-location": location}
    elsewhere = catalog.call("POST", f"/{WH}/namespaces/a/register-view", into_a)
    error_of(elsewhere, 400, "BadRequestException")
    registered = catalog.call("POST", register, {"name": "w", "metadata-location": location})
    assert registered.status_code == 200, registered.text
    assert registered.json()["metadata"] == created["metadata"]
    assert catalog.call("GET", view_path("ns", "w")).json()["metadata-location"] == location
    table_metadata = catalog.call("GET", table_path("ns", "t")).json()["metadata-location"]
    error_of(catalog.call("POST", register, {"name": "x", "metadata-location": table_metadata}), 400,
             "BadRequestException")  # fmt: skip
    missing = created["metadata"]["location"].replace("/v-", "/gone-") + "/metadata/00000-x.metadata.json"
    error_of(catalog.call("POST", register, {"name": "x", "metadata-location": missing}), 400,
             "BadRequestException")  # fmt: skip
    error_of(catalog.call("POST", register, {"name": "x", "metadata-location": "file:///etc/passwd"}), 400,
             "BadRequestException")  # fmt: skip
    error_of(catalog.call("POST", register, {"name": "x"}), 400, "BadRequestException")


def test_a_location_outside_the_namespace_is_refused(catalog: Served) -> None:
    root = f"file://{catalog.root}"
    table = catalog.call("GET", table_path("ns", "t")).json()["metadata"]["location"]
    for hostile in (
        "file:///tmp/elsewhere",
        f"{root}/{WH}/a/v",  # another namespace's folder
        f"{root}/other/ns/v",  # another bucket
        f"{root}/{WH}/ns/../a/v",
        table,  # a table's own location
        f"{table}/inner",
        f"s3://{WH}/ns/v",
    ):
        before = catalog.metadata_files()
        error_of(create_view(catalog, "ns", "v", location=hostile), 400, "BadRequestException")
        assert catalog.metadata_files() == before, hostile
    asked = f"{root}/{WH}/ns/my-view"
    created = create_view(catalog, "ns", "v", location=asked)
    assert created.status_code == 200, created.text
    assert created.json()["metadata"]["location"] == asked
    error_of(create_view(catalog, "ns", "w", location=f"{asked}/inner"), 400, "BadRequestException")
    uuid = created.json()["metadata"]["view-uuid"]
    for hostile in (f"{root}/{WH}/a/v", f"{root}/{WH}/ns/other", "file:///tmp/x"):
        move = {"requirements": [{"type": "assert-view-uuid", "uuid": uuid}],
                "updates": [{"action": "set-location", "location": hostile}]}  # fmt: skip
        error_of(catalog.call("POST", view_path("ns", "v"), move), 400, "BadRequestException")
    stay = {"updates": [{"action": "set-location", "location": asked}]}
    assert catalog.call("POST", view_path("ns", "v"), stay).json()["metadata"]["location"] == asked


def test_a_catalog_user_is_held_to_its_policy_for_views(catalog: Served) -> None:
    made(catalog, "ns", "victim")
    token = catalog.token_of(catalog.user("mallory", attacker_policy(WH)))
    mine = create_view(catalog, ATT, "mine", token=token)
    assert mine.status_code == 200, mine.text
    uuid = mine.json()["metadata"]["view-uuid"]
    assert catalog.call("GET", view_path(ATT, "mine"), token=token).status_code == 200
    assert catalog.call("HEAD", view_path(ATT, "mine"), token=token).status_code == 204
    listed = catalog.call("GET", f"/{WH}/namespaces/{ATT}/views", token=token).json()["identifiers"]
    assert listed == [{"namespace": [ATT], "name": "mine"}]
    replaced = catalog.call("POST", view_path(ATT, "mine"), replacing(uuid, "SELECT 1"), token=token)
    assert replaced.status_code == 200, replaced.text

    victim = catalog.call("GET", view_path("ns", "victim")).json()
    forbidden = "ForbiddenException"
    error_of(create_view(catalog, "ns", "v", token=token), 403, forbidden)
    error_of(catalog.call("GET", view_path("ns", "victim"), token=token), 403, forbidden)
    assert catalog.call("HEAD", view_path("ns", "victim"), token=token).status_code == 403
    error_of(catalog.call("POST", view_path("ns", "victim"), replacing(victim["metadata"]["view-uuid"], "X"),
                          token=token), 403, forbidden)  # fmt: skip
    error_of(catalog.call("DELETE", view_path("ns", "victim"), token=token), 403, forbidden)
    out = {"source": {"namespace": [ATT], "name": "mine"}, "destination": {"namespace": ["ns"], "name": "m"}}
    error_of(catalog.call("POST", f"/{WH}/views/rename", out, token=token), 403, forbidden)
    steal = {
        "source": {"namespace": ["ns"], "name": "victim"},
        "destination": {"namespace": [ATT], "name": "m"},
    }
    error_of(catalog.call("POST", f"/{WH}/views/rename", steal, token=token), 403, forbidden)
    register = {"name": "copy", "metadata-location": victim["metadata-location"]}
    error_of(
        catalog.call("POST", f"/{WH}/namespaces/ns/register-view", register, token=token), 403, forbidden
    )
    # Allowed to register in its own namespace, but not another namespace's file.
    error_of(catalog.call("POST", f"/{WH}/namespaces/{ATT}/register-view", register, token=token), 400,
             "BadRequestException")  # fmt: skip
    # Nor a view of its own whose files are in another namespace's folder.
    inside_ns = f"file://{catalog.root}/{WH}/ns/mine"
    error_of(
        create_view(catalog, ATT, "elsewhere", token=token, location=inside_ns), 400, "BadRequestException"
    )
    assert catalog.call("GET", view_path("ns", "victim")).json() == victim
    assert catalog.call("DELETE", view_path(ATT, "mine"), token=token).status_code == 204
    unknown = catalog.call("GET", view_path(ATT, "mine"), token=None)
    assert unknown.status_code == 401


def test_the_error_model_holds_for_every_view_endpoint_without_credentials(catalog: Served) -> None:
    made(catalog, "ns", "v")
    for method, path in (
        ("GET", f"/{WH}/namespaces/ns/views"),
        ("POST", f"/{WH}/namespaces/ns/views"),
        ("GET", view_path("ns", "v")),
        ("POST", view_path("ns", "v")),
        ("DELETE", view_path("ns", "v")),
        ("POST", f"/{WH}/views/rename"),
        ("POST", f"/{WH}/namespaces/ns/register-view"),
    ):
        error_of(catalog.call(method, path, {}, token=None), 401, "NotAuthorizedException")
    assert catalog.call("HEAD", view_path("ns", "v")).status_code == 204


def test_a_stale_replace_asking_to_move_the_view_is_a_conflict_first(catalog: Served) -> None:
    """As for tables: a commit decided on another view (its uuid) is a 409, whatever location it asks."""
    made(catalog, "ns", "v")
    stale = replacing("00000000-0000-0000-0000-000000000000", "SELECT 1")
    stale["updates"].append({"action": "set-location", "location": "file:///elsewhere/v"})
    message = error_of(catalog.call("POST", view_path("ns", "v"), stale), 409, "CommitFailedException")
    assert "view uuid changed" in message
