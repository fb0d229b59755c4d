"""The own warehouses' HTTP layer (`sharing_server.catalog`) through the real app, in process:
the routes, what each answers in the Iceberg REST model, and that a caller is authenticated before
anything of its request is read, then held to its policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as AwsCredentials
from starlette.testclient import TestClient

from share_store.authentication.sign_in_throttle import PER_ADDRESS
from share_store.catalog.names import IDENTIFIER_SUPPORT, LEVEL_SEPARATOR
from share_store.catalog.users import CatalogUsers, IssuedUser
from sharing_server.catalog.scan_plans import PLAN_ENDPOINTS
from sharing_server.catalog.warehouses import ENDPOINTS
from tests.catalog_attacks import ATT, attacker_policy
from tests.sharing_server.catalog.served import (
    ADMIN,
    API,
    NESTED,
    SECRET,
    V2,
    WH,
    Served,
    create_table,
    error_of,
    set_properties,
    table_path,
)

# -- configuration and warehouses -------------------------------------------------------------------


def test_config_of_an_unknown_warehouse_is_no_such_warehouse(served: Served) -> None:
    message = error_of(served.call("GET", "/config", params={"warehouse": "nowhere"}), 404,
                       "NoSuchWarehouseException")  # fmt: skip
    assert "nowhere" in message


def test_config_names_the_warehouse_as_prefix_and_the_endpoints_served(catalog: Served) -> None:
    config = catalog.call("GET", "/config", params={"warehouse": WH})
    assert config.status_code == 200
    overrides = {"prefix": WH, "namespace-separator": "%1F"}
    endpoints = ENDPOINTS + PLAN_ENDPOINTS
    expected = {"defaults": IDENTIFIER_SUPPORT, "overrides": overrides, "endpoints": endpoints,
                "idempotency-key-lifetime": "PT30M"}  # fmt: skip
    assert config.json() == expected
    assert "POST /v1/{prefix}/transactions/commit" in config.json()["endpoints"]
    error_of(catalog.call("GET", "/config"), 400, "BadRequestException")
    error_of(catalog.call("GET", "/config", params={"warehouse": "s3://whs"}), 400, "BadRequestException")


def test_warehouses_are_created_listed_loaded_and_dropped_when_empty(served: Served) -> None:
    assert served.call("GET", "/warehouses").json() == {"warehouses": []}
    assert served.call("POST", "/warehouses", {"name": "lake"}).status_code == 200
    assert (served.root / "lake").is_dir()  # its bucket
    error_of(served.call("POST", "/warehouses", {"name": "lake"}), 409, "AlreadyExistsException")
    error_of(served.call("POST", "/warehouses", {"name": "UPPER"}), 400, "BadRequestException")
    error_of(
        served.call("POST", "/warehouses", {"name": "lake2", "adopt": "yes"}), 400, "BadRequestException"
    )
    assert served.call("GET", "/warehouses").json() == {"warehouses": [{"name": "lake"}]}
    assert served.call("GET", "/warehouses/lake").json() == {"name": "lake", "properties": {}}
    assert served.call("HEAD", "/warehouses/lake").status_code == 204
    error_of(served.call("GET", "/warehouses/gone"), 404, "NoSuchWarehouseException")
    assert served.call("POST", "/lake/namespaces", {"namespace": ["n"]}).status_code == 200
    error_of(served.call("DELETE", "/warehouses/lake"), 409, "NamespaceNotEmptyException")
    assert served.call("DELETE", "/lake/namespaces/n").status_code == 204
    assert served.call("DELETE", "/warehouses/lake").status_code == 204
    assert served.call("GET", "/warehouses").json() == {"warehouses": []}
    error_of(served.call("DELETE", "/warehouses/lake"), 404, "NoSuchWarehouseException")


# -- namespaces -------------------------------------------------------------------------------------


def test_namespaces_nest_and_keep_their_properties(catalog: Served) -> None:
    created = catalog.call("POST", f"/{WH}/namespaces", {"namespace": ["a", "c"], "properties": {"k": "v"}})
    assert created.json() == {"namespace": ["a", "c"], "properties": {"k": "v"}}
    assert catalog.call("GET", f"/{WH}/namespaces").json()["namespaces"] == [["a"], [ATT], ["ns"]]
    listed = catalog.call("GET", f"/{WH}/namespaces", params={"parent": "a"}).json()
    assert listed == {"namespaces": [["a", "b"], ["a", "c"]], "next-page-token": None}
    path = f"/{WH}/namespaces/{quote('a' + LEVEL_SEPARATOR + 'c')}"
    assert catalog.call("GET", path).json() == {"namespace": ["a", "c"], "properties": {"k": "v"}}
    assert catalog.call("HEAD", path).status_code == 204
    assert catalog.call("HEAD", f"/{WH}/namespaces/nope").status_code == 404
    error_of(catalog.call("GET", f"/{WH}/namespaces/nope"), 404, "NoSuchNamespaceException")
    error_of(catalog.call("POST", f"/{WH}/namespaces", {"namespace": ["x", "y"]}), 404,
             "NoSuchNamespaceException")  # fmt: skip
    error_of(catalog.call("DELETE", f"/{WH}/namespaces/a"), 409, "NamespaceNotEmptyException")


def test_namespace_properties_are_updated_and_removed(catalog: Served) -> None:
    properties = f"/{WH}/namespaces/ns/properties"
    first = catalog.call("POST", properties, {"updates": {"owner": "me", "x": "1"}})
    assert first.json() == {"updated": ["owner", "x"], "removed": [], "missing": None}
    second = catalog.call("POST", properties, {"removals": ["x", "never"]})
    assert second.json() == {"updated": [], "removed": ["x"], "missing": ["never"]}
    assert catalog.call("GET", f"/{WH}/namespaces/ns").json()["properties"] == {"owner": "me"}
    message = error_of(catalog.call("POST", properties, {"removals": ["owner"], "updates": {"owner": "you"}}),
                       400, "BadRequestException")  # fmt: skip
    assert "both updated and removed" in message


def test_a_null_namespace_property_is_refused_as_a_table_property_is(catalog: Served) -> None:
    error_of(create_table(catalog, "ns", "n", properties={"k": None}), 400, "BadRequestException")
    created = catalog.call("POST", f"/{WH}/namespaces", {"namespace": ["nulls"], "properties": {"k": None}})
    error_of(created, 400, "BadRequestException")


def test_a_boolean_namespace_property_is_stored_as_a_table_property_is(catalog: Served) -> None:
    table = create_table(catalog, "ns", "b", properties={**V2, "write.wap.enabled": True})
    assert table.json()["metadata"]["properties"]["write.wap.enabled"] == "true"
    flags = {"namespace": ["flags"], "properties": {"table-default.write.wap.enabled": True}}
    created = catalog.call("POST", f"/{WH}/namespaces", flags)
    assert created.status_code == 200
    assert created.json()["properties"] == {"table-default.write.wap.enabled": "true"}


# -- tables -----------------------------------------------------------------------------------------


def test_a_created_table_is_listed_and_loaded(catalog: Served) -> None:
    created = create_table(catalog, NESTED, "t2", properties={**V2, "owner": "me"})
    assert created.status_code == 200, created.text
    result = created.json()
    assert set(result) == {"metadata", "metadata-location", "config"}
    assert result["metadata"]["format-version"] == 2
    assert result["metadata"]["properties"]["owner"] == "me"
    assert result["metadata"]["location"].startswith((catalog.root / WH / "a" / "b").as_uri() + "/t2-")
    assert Path(result["metadata-location"].removeprefix("file://")).is_file()
    listed = catalog.call("GET", f"/{WH}/namespaces/{quote(NESTED)}/tables").json()
    assert listed == {"identifiers": [{"namespace": ["a", "b"], "name": "t2"}], "next-page-token": None}
    loaded = catalog.call("GET", table_path(NESTED, "t2")).json()
    assert loaded["metadata"]["table-uuid"] == result["metadata"]["table-uuid"]
    assert loaded["metadata-location"] == result["metadata-location"]
    error_of(create_table(catalog, NESTED, "t2"), 409, "AlreadyExistsException")
    error_of(create_table(catalog, "ghost", "t"), 404, "NoSuchNamespaceException")
    error_of(create_table(catalog, "ns", "a.b"), 400, "BadRequestException")


def test_a_staged_create_stores_nothing(catalog: Served) -> None:
    staged = create_table(catalog, "ns", "later", **{"stage-create": True})
    assert staged.status_code == 200
    assert "metadata-location" not in staged.json()
    assert staged.json()["metadata"]["schemas"][0]["fields"][0]["name"] == "id"
    assert catalog.call("HEAD", table_path("ns", "later")).status_code == 404


def test_head_of_a_table_says_whether_it_exists(catalog: Served) -> None:
    assert catalog.call("HEAD", table_path("ns", "t")).status_code == 204
    missing = catalog.call("HEAD", table_path("ns", "nope"))
    assert missing.status_code == 404 and missing.content == b""
    assert catalog.call("HEAD", table_path("ghost", "t")).status_code == 404
    error_of(catalog.call("GET", table_path("ns", "nope")), 404, "NoSuchTableException")


def test_load_with_snapshots_refs_keeps_only_referenced_snapshots(catalog: Served) -> None:
    location = catalog.call("GET", table_path("ns", "t")).json()["metadata"]["location"]
    updates: list[dict[str, Any]] = []
    for snapshot_id in (1, 2, 3):
        snapshot = {"snapshot-id": snapshot_id, "sequence-number": snapshot_id, "schema-id": 0,
                    "timestamp-ms": 1_700_000_000_000 + snapshot_id, "summary": {"operation": "append"},
                    "manifest-list": f"{location}/metadata/snap-{snapshot_id}.avro"}  # fmt: skip
        if snapshot_id > 1:
            snapshot["parent-snapshot-id"] = snapshot_id - 1
        updates += [{"action": "add-snapshot", "snapshot": snapshot},
                    {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                     "snapshot-id": snapshot_id}]  # fmt: skip
    updates.append({"action": "set-snapshot-ref", "ref-name": "first", "type": "tag", "snapshot-id": 1})
    committed = catalog.call("POST", table_path("ns", "t"), {"updates": updates})
    assert committed.status_code == 200, committed.text

    every = catalog.call("GET", table_path("ns", "t")).json()["metadata"]
    assert [s["snapshot-id"] for s in every["snapshots"]] == [1, 2, 3]
    for query in ({"snapshots": "all"}, {}):
        assert catalog.call("GET", table_path("ns", "t"), params=query).json()["metadata"] == every
    refs = catalog.call("GET", table_path("ns", "t"), params={"snapshots": "refs"}).json()["metadata"]
    assert [s["snapshot-id"] for s in refs["snapshots"]] == [1, 3]
    assert refs["current-snapshot-id"] == 3
    assert set(refs["refs"]) == {"main", "first"}

    message = error_of(catalog.call("GET", table_path("ns", "t"), params={"snapshots": "bad"}), 400,
                       "BadRequestException")  # fmt: skip
    assert "snapshots must be 'all' or 'refs'" in message


def test_a_commit_answers_its_new_metadata_location(catalog: Served) -> None:
    before = catalog.call("GET", table_path("ns", "t")).json()
    committed = catalog.call("POST", table_path("ns", "t"), set_properties(owner="me"))
    assert committed.status_code == 200, committed.text
    result = committed.json()
    assert set(result) == {"metadata-location", "metadata"}
    assert result["metadata-location"] != before["metadata-location"]
    assert Path(result["metadata-location"].removeprefix("file://")).is_file()
    assert result["metadata"]["properties"]["owner"] == "me"
    after = catalog.call("GET", table_path("ns", "t")).json()
    assert after["metadata-location"] == result["metadata-location"]
    assert after["metadata"]["metadata-log"][-1]["metadata-file"] == before["metadata-location"]


def test_a_commit_goes_to_the_table_the_path_names(catalog: Served) -> None:
    create_table(catalog, ATT, "other")
    body = {"identifier": {"namespace": [ATT], "name": "other"}, **set_properties(hit="yes")}
    assert catalog.call("POST", table_path("ns", "t"), body).status_code == 200
    assert catalog.call("GET", table_path("ns", "t")).json()["metadata"]["properties"]["hit"] == "yes"
    assert "hit" not in catalog.call("GET", table_path(ATT, "other")).json()["metadata"]["properties"]


def test_a_commit_whose_requirement_fails_is_a_conflict_and_a_bad_one_a_bad_request(catalog: Served) -> None:
    stale = {"requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
             **set_properties(lost="yes")}  # fmt: skip
    error_of(catalog.call("POST", table_path("ns", "t"), stale), 409, "CommitFailedException")
    error_of(catalog.call("POST", table_path("ns", "t"), b"{not json"), 400, "BadRequestException")
    error_of(catalog.call("POST", table_path("ns", "t"), {"updates": [{"action": "nope"}]}), 400,
             "BadRequestException")  # fmt: skip
    error_of(
        catalog.call("POST", table_path("ns", "ghost"), set_properties(x="1")), 404, "NoSuchTableException"
    )
    assert "lost" not in catalog.call("GET", table_path("ns", "t")).json()["metadata"]["properties"]


def test_rename_moves_the_name_not_the_files(catalog: Served) -> None:
    before = catalog.call("GET", table_path("ns", "t")).json()
    body = {
        "source": {"namespace": ["ns"], "name": "t"},
        "destination": {"namespace": ["a", "b"], "name": "u"},
    }
    renamed = catalog.call("POST", f"/{WH}/tables/rename", body)
    assert renamed.status_code == 204 and renamed.content == b""
    assert catalog.call("HEAD", table_path("ns", "t")).status_code == 404
    after = catalog.call("GET", table_path(NESTED, "u")).json()
    assert after["metadata-location"] == before["metadata-location"]
    assert after["metadata"]["location"] == before["metadata"]["location"]
    # Again: the source is gone; onto an existing table, or into no namespace, refused.
    gone = {**body, "destination": {"namespace": ["ns"], "name": "v"}}
    error_of(catalog.call("POST", f"/{WH}/tables/rename", gone), 404, "NoSuchTableException")
    create_table(catalog, "ns", "t")
    back = {
        "source": {"namespace": ["a", "b"], "name": "u"},
        "destination": {"namespace": ["ns"], "name": "t"},
    }
    error_of(catalog.call("POST", f"/{WH}/tables/rename", back), 409, "AlreadyExistsException")
    # A missing source is named before a taken destination, as the spec orders them.
    missing = {**back, "source": {"namespace": ["ns"], "name": "nope"}}
    error_of(catalog.call("POST", f"/{WH}/tables/rename", missing), 404, "NoSuchTableException")
    ghost = {**back, "destination": {"namespace": ["ghost"], "name": "u"}}
    error_of(catalog.call("POST", f"/{WH}/tables/rename", ghost), 404, "NoSuchNamespaceException")
    bad = {**back, "destination": {"namespace": ["ns"], "name": "../u"}}
    error_of(catalog.call("POST", f"/{WH}/tables/rename", bad), 400, "BadRequestException")
    assert catalog.call("HEAD", table_path(NESTED, "u")).status_code == 204


def test_drop_with_purge_requested_deletes_the_tables_files(catalog: Served) -> None:
    create_table(catalog, "ns", "kept")
    catalog.call("POST", table_path("ns", "t"), set_properties(n="1"))
    assert len(catalog.metadata_files()) == 3
    t_location = catalog.call("GET", table_path("ns", "t")).json()["metadata"]["location"]
    kept = catalog.call("GET", table_path("ns", "kept")).json()["metadata-location"]

    assert catalog.call("DELETE", table_path("ns", "t"), params={"purgeRequested": "true"}).status_code == 204
    assert catalog.call("HEAD", table_path("ns", "t")).status_code == 404
    assert [p.as_uri() for p in catalog.metadata_files()] == [kept]
    assert not any(p.as_uri().startswith(t_location) for p in catalog.metadata_files())

    # Without purgeRequested the table goes and its files stay.
    assert catalog.call("DELETE", table_path("ns", "kept")).status_code == 204
    assert [p.as_uri() for p in catalog.metadata_files()] == [kept]
    error_of(catalog.call("DELETE", table_path("ns", "kept")), 404, "NoSuchTableException")


def test_a_dropped_tables_metadata_can_be_registered_again(catalog: Served) -> None:
    location = catalog.call("GET", table_path("ns", "t")).json()["metadata-location"]
    assert catalog.call("DELETE", table_path("ns", "t")).status_code == 204
    registered = catalog.call(
        "POST", f"/{WH}/namespaces/ns/register", {"name": "back", "metadata-location": location}
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["metadata-location"] == location
    assert catalog.call("HEAD", table_path("ns", "back")).status_code == 204
    again = {"name": "back", "metadata-location": location}
    error_of(catalog.call("POST", f"/{WH}/namespaces/ns/register", again), 409, "AlreadyExistsException")
    error_of(catalog.call("POST", f"/{WH}/namespaces/ns/register", {"name": "x"}), 400, "BadRequestException")


def test_transactions_commit_every_table_or_none(catalog: Served) -> None:
    create_table(catalog, "ns", "u")
    message = error_of(catalog.call("POST", f"/{WH}/transactions/commit", {"table-changes": []}), 400,
                       "BadRequestException")  # fmt: skip
    assert "table-changes" in message

    def change(name: str, **properties: str) -> dict[str, Any]:
        return {"identifier": {"namespace": ["ns"], "name": name}, **set_properties(**properties)}

    both = {"table-changes": [change("t", batch="1"), change("u", batch="1")]}
    done = catalog.call("POST", f"/{WH}/transactions/commit", both)
    assert done.status_code == 204, done.text
    for name in ("t", "u"):
        assert catalog.call("GET", table_path("ns", name)).json()["metadata"]["properties"]["batch"] == "1"

    stale = change("u", batch="2")
    stale["requirements"] = [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]
    refused = catalog.call(
        "POST", f"/{WH}/transactions/commit", {"table-changes": [change("t", batch="2"), stale]}
    )
    error_of(refused, 409, "CommitFailedException")
    twice = {"table-changes": [change("t", batch="3"), change("t", batch="4")]}
    error_of(catalog.call("POST", f"/{WH}/transactions/commit", twice), 400, "BadRequestException")
    for name in ("t", "u"):
        assert catalog.call("GET", table_path("ns", name)).json()["metadata"]["properties"]["batch"] == "1"


def test_metrics_reports_are_accepted_and_dropped(catalog: Served) -> None:
    metadata_before = catalog.metadata_files()
    report = {"report-type": "scan-report", "table-name": "ns.t", "snapshot-id": -1, "metrics": {}}
    answered = catalog.call("POST", f"{table_path('ns', 't')}/metrics", report)
    assert answered.status_code == 204 and answered.content == b""
    assert catalog.metadata_files() == metadata_before
    error_of(catalog.call("POST", f"{table_path('ns', 't')}/metrics", b"[]"), 400, "BadRequestException")
    # A report on a table that does not exist is the spec's 404.
    error_of(catalog.call("POST", f"{table_path('ns', 'nope')}/metrics", report), 404, "NoSuchTableException")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"/{WH}/views"),
        ("PUT", f"/{WH}/namespaces/ns/views/v"),
        ("GET", f"/{WH}/namespaces/ns/views/v/plan"),
        ("POST", f"/{WH}/namespaces/ns/tables/t/plan/nothing/more"),
        ("PUT", f"/{WH}/namespaces"),
        ("GET", "/nothing/here/at/all"),
        ("GET", f"/{WH}/namespaces/a%2Fb/tables/t"),
    ],
)
def test_endpoints_not_served_are_no_such_endpoint(catalog: Served, method: str, path: str) -> None:
    message = error_of(catalog.call(method, path), 404, "NoSuchEndpointException")
    assert message.startswith(f"No such endpoint: {method} {API}")


# -- who may call -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/config?warehouse=BAD..NAME", None),
        ("GET", "/config", None),
        ("POST", "/warehouses", b"{not json"),
        ("POST", "/warehouses", {"name": "UPPER"}),
        ("GET", "/warehouses/BAD", None),
        ("DELETE", f"/warehouses/{WH}", None),
        ("GET", "/BAD/namespaces", None),
        ("POST", f"/{WH}/namespaces", b"{not json"),
        ("POST", f"/{WH}/namespaces", {"namespace": "not a list"}),
        ("GET", f"/{WH}/namespaces?parent=a.b", None),
        ("GET", f"/{WH}/namespaces/%2E%2E", None),
        ("POST", f"/{WH}/namespaces/ns/properties", b"[]"),
        ("POST", f"/{WH}/namespaces/ns/tables", b"{not json"),
        ("GET", f"/{WH}/namespaces/ns/tables/a.b", None),
        ("GET", f"/{WH}/namespaces/ns/tables/t?snapshots=bad", None),
        ("POST", f"/{WH}/namespaces/ns/tables/t", {"updates": [{"action": "nope"}]}),
        # A commit's table name is read only after its caller is known, in the same worker trip.
        ("POST", f"/{WH}/namespaces/ns/tables/a.b", {"updates": []}),
        ("POST", f"/{WH}/namespaces/ns/tables/%2E%2E", {"updates": []}),
        ("GET", f"/{WH}/namespaces/ns/tables/t%23x%3Fy", None),
        ("DELETE", f"/{WH}/namespaces/ns/tables/t?purgeRequested=true", None),
        ("POST", f"/{WH}/namespaces/ns/register", b"{}"),
        ("POST", "/BAD/tables/rename", b"{not json"),
        ("POST", f"/{WH}/transactions/commit", {"table-changes": []}),
        ("POST", f"/{WH}/namespaces/ns/tables/t/metrics", b"[]"),
    ],
)
def test_a_request_without_credentials_is_refused_before_it_is_read(
    catalog: Served, method: str, path: str, body: Any
) -> None:
    files = catalog.metadata_files()
    answer = catalog.call(method, path, body, token=None)
    message = error_of(answer, 401, "NotAuthorizedException")
    assert "Authentication required" in message
    assert catalog.metadata_files() == files
    assert catalog.call("HEAD", table_path("ns", "t")).status_code == 204


def test_head_without_credentials_is_refused_too(catalog: Served) -> None:
    assert catalog.call("HEAD", table_path("ns", "t"), token=None).status_code == 401
    assert catalog.call("HEAD", f"/{WH}/namespaces/ns", token=None).status_code == 401


def test_a_catalog_user_is_held_to_its_policy(catalog: Served) -> None:
    """Allowed everything on the tables of `att` and to read the warehouse; nothing else."""
    token = catalog.token_of(catalog.user("mallory", attacker_policy(WH)))
    assert catalog.call("GET", "/config", params={"warehouse": WH}, token=token).status_code == 200
    assert catalog.call("GET", f"/{WH}/namespaces", token=token).status_code == 200
    mine = create_table(catalog, ATT, "mine", token=token)
    assert mine.status_code == 200, mine.text
    assert (
        catalog.call("POST", table_path(ATT, "mine"), set_properties(k="v"), token=token).status_code == 200
    )
    assert catalog.call("HEAD", table_path(ATT, "mine"), token=token).status_code == 204

    def forbidden(answer: httpx.Response, action: str) -> None:
        message = error_of(answer, 403, "ForbiddenException")
        assert message.startswith("mallory is not allowed to") and action in message

    forbidden(create_table(catalog, "ns", "theirs", token=token), "s3tables:CreateTable")
    forbidden(catalog.call("GET", table_path("ns", "t"), token=token), "s3tables:GetTable")
    forbidden(catalog.call("POST", table_path("ns", "t"), set_properties(k="v"), token=token),
              "s3tables:UpdateTableMetadataLocation")  # fmt: skip
    forbidden(catalog.call("DELETE", table_path("ns", "t"), params={"purgeRequested": "true"}, token=token),
              "s3tables:DeleteTable")  # fmt: skip
    forbidden(catalog.call("POST", f"{table_path('ns', 't')}/metrics", {}, token=token), "s3tables:GetTable")
    forbidden(catalog.call("DELETE", f"/{WH}/namespaces/ns", token=token), "s3tables:DeleteNamespace")
    forbidden(
        catalog.call("POST", "/warehouses", {"name": "mine"}, token=token), "s3tables:CreateTableBucket"
    )
    out = {"source": {"namespace": [ATT], "name": "mine"}, "destination": {"namespace": ["ns"], "name": "x"}}
    forbidden(catalog.call("POST", f"/{WH}/tables/rename", out, token=token), "s3tables:CreateTable")
    steal = {"source": {"namespace": ["ns"], "name": "t"}, "destination": {"namespace": [ATT], "name": "x"}}
    forbidden(catalog.call("POST", f"/{WH}/tables/rename", steal, token=token), "s3tables:RenameTable")
    assert catalog.call("HEAD", table_path("ns", "t"), token=token).status_code == 403

    # A transaction reaching outside is refused whole: its allowed part is not committed either.
    changes = {"table-changes": [
        {"identifier": {"namespace": [ATT], "name": "mine"}, **set_properties(k="changed")},
        {"identifier": {"namespace": ["ns"], "name": "t"}, **set_properties(k="changed")},
    ]}  # fmt: skip
    forbidden(catalog.call("POST", f"/{WH}/transactions/commit", changes, token=token),
              "s3tables:UpdateTableMetadataLocation")  # fmt: skip
    assert (
        catalog.call("GET", table_path(ATT, "mine"), token=token).json()["metadata"]["properties"]["k"] == "v"
    )
    assert "k" not in catalog.call("GET", table_path("ns", "t")).json()["metadata"]["properties"]
    assert catalog.call("HEAD", table_path("ns", "t")).status_code == 204


def test_a_policy_that_denies_a_warehouse_refuses_its_config(catalog: Served) -> None:
    read_only = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3tables:GetTableBucket", "s3tables:ListTableBuckets"],
         "Resource": "arn:aws:s3tables:::bucket/other"}]})  # fmt: skip
    token = catalog.token_of(catalog.user("reader", read_only))
    error_of(catalog.call("GET", "/config", params={"warehouse": WH}, token=token), 403, "ForbiddenException")
    assert catalog.call("GET", "/warehouses", token=token).json() == {"warehouses": []}
    assert catalog.call("GET", "/warehouses").json() == {"warehouses": [{"name": WH}]}


def test_the_token_endpoint_takes_only_a_users_keys(catalog: Served) -> None:
    user = catalog.user("alice")
    wrong = catalog.client.post(
        f"{API}/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": user.access_key, "client_secret": "nope"},
    )
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    grant = catalog.client.post(
        f"{API}/oauth/tokens",
        data={"grant_type": "password", "client_id": user.access_key, "client_secret": user.secret_key},
    )
    assert grant.status_code == 400 and grant.json()["error"] == "unsupported_grant_type"
    token = catalog.token_of(user)
    assert catalog.call("GET", table_path("ns", "t"), token=token).status_code == 200
    CatalogUsers(catalog.store.transactions, SECRET).remove("alice")
    message = error_of(catalog.call("GET", table_path("ns", "t"), token=token), 401, "NotAuthorizedException")
    assert "no longer exists" in message


def sigv4(user: IssuedUser, method: str, path: str, body: bytes = b"") -> dict[str, str]:
    """The headers botocore signs for `user` (signing name s3tables), for TestClient's host."""
    request = AWSRequest(
        method=method,
        url=f"http://testserver{API}{path}",
        data=body,
        headers={"Content-Type": "application/json"},
    )
    SigV4Auth(AwsCredentials(user.access_key, user.secret_key), "s3tables", "local").add_auth(request)
    return dict(request.headers.items())


def test_a_sigv4_signed_request_is_its_users_and_a_changed_one_is_forbidden(catalog: Served) -> None:
    user = catalog.user("signer")
    headers = sigv4(user, "GET", f"/config?warehouse={WH}")
    config = catalog.client.get(f"{API}/config?warehouse={WH}", headers=headers)
    assert config.status_code == 200, config.text
    assert config.json()["overrides"] == {"prefix": WH, "namespace-separator": "%1F"}

    body = json.dumps({"namespace": ["signed"]}).encode()
    headers = sigv4(user, "POST", f"/{WH}/namespaces", body)
    changed = body.replace(b"signed", b"forged")
    message = error_of(catalog.client.post(f"{API}/{WH}/namespaces", content=changed, headers=headers), 403,
                       "ForbiddenException")  # fmt: skip
    assert "signature does not match" in message
    assert catalog.call("HEAD", f"/{WH}/namespaces/forged").status_code == 404
    created = catalog.client.post(f"{API}/{WH}/namespaces", content=body, headers=headers)
    assert created.status_code == 200, created.text
    assert created.json() == {"namespace": ["signed"], "properties": {}}


def test_wrong_admin_tokens_are_throttled_per_address(served: Served) -> None:
    for attempt in range(PER_ADDRESS):
        error_of(
            served.call("GET", "/warehouses", token=f"dsa_wrong-{attempt}"), 401, "NotAuthorizedException"
        )
    throttled = served.call("GET", "/warehouses")  # the right token, from the address that failed
    error_of(throttled, 429, "TooManyRequestsException")
    assert 1 <= int(throttled.headers["retry-after"]) <= 60
    # Another client address, on the same app (its lifespan is the fixture's client's).
    elsewhere = TestClient(served.client.app, client=("127.0.4.9", 40000))
    answer = elsewhere.get(f"{API}/warehouses", headers={"Authorization": f"Bearer {ADMIN}"})
    assert answer.status_code == 200 and answer.json() == {"warehouses": []}


def test_writers_delegation_is_off_by_default_and_says_how_to_turn_it_on(catalog: Served) -> None:
    """A load that asks for keys gets none (engines use keys of their own), the credentials
    endpoint and the signer refuse with the setting, and /v1/config does not list them."""
    asked = {"X-Iceberg-Access-Delegation": "vended-credentials,remote-signing"}
    loaded = catalog.call("GET", table_path("ns", "t"), headers=asked).json()
    assert loaded["config"] == {} and "storage-credentials" not in loaded
    refused = catalog.call("GET", table_path("ns", "t") + "/credentials")
    message = error_of(refused, 400, "BadRequestException")
    assert "[warehouses] access_delegation" in message
    signing = {"method": "GET", "uri": "http://s3/whs/x", "headers": {}}
    message = error_of(catalog.call("POST", f"/{WH}/s3-sign/anything", signing, token=None), 400,
                       "BadRequestException")  # fmt: skip
    assert "[warehouses] access_delegation" in message
    config = catalog.call("GET", f"/config?warehouse={WH}").json()
    assert not any(endpoint.endswith("/credentials") for endpoint in config["endpoints"])
