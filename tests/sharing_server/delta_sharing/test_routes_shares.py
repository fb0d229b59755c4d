"""The protocol's listing endpoints over real HTTP: shares, schemas, tables, pagination, auth.

The share they read is conftest.py's; request parsing on its own is unit-tested in
test_requests.py and test_capabilities.py.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import httpx
from sqlalchemy import event

from tests.conftest import Deployment, audit_record
from tests.sharing_server.delta_sharing.conftest import TABLES, error

# -- listings ---------------------------------------------------------------------------


def test_list_shares_sees_only_the_tokens_share(api: httpx.Client) -> None:
    response = api.get("/shares")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert "\n" not in response.text.strip()
    body = response.json()
    assert [item["name"] for item in body["items"]] == ["proto"]
    assert "nextPageToken" not in body


def test_get_share_and_case_insensitive_names(api: httpx.Client) -> None:
    assert api.get("/shares/PROTO").json()["share"]["name"] == "proto"
    response = api.get("/shares/pRoTo/schemas/DEFAULT/tables/T_SIMPLE/metadata")
    assert response.status_code == 200


def test_list_schemas_and_tables(api: httpx.Client) -> None:
    assert api.get("/shares/proto/schemas").json()["items"] == [
        {"name": "default", "share": "proto"},
        {"name": "other", "share": "proto"},
    ]
    items = api.get("/shares/proto/schemas/default/tables").json()["items"]
    assert [i["name"] for i in items] == sorted(TABLES)
    assert all(i["schema"] == "default" and i["share"] == "proto" and len(i["id"]) == 36 for i in items)
    again = api.get("/shares/proto/schemas/default/tables").json()["items"]
    assert [i["id"] for i in again] == [i["id"] for i in items]  # ids are stable


def test_all_tables_pagination(api: httpx.Client) -> None:
    seen, token, pages = [], None, 0
    while True:
        params = {"maxResults": 2} | ({"pageToken": token} if token else {})
        body = api.get("/shares/proto/all-tables", params=params).json()
        seen += [(i["schema"], i["name"]) for i in body.get("items", [])]
        pages += 1
        token = body.get("nextPageToken")
        if not token:
            break
    assert pages == 3
    assert seen == [("default", n) for n in sorted(TABLES)] + [("other", "t_other")]


def test_max_results_zero_and_bounds(api: httpx.Client) -> None:
    body = api.get("/shares/proto/all-tables", params={"maxResults": 0}).json()
    assert "items" not in body and body["nextPageToken"]
    error(
        api.get("/shares", params={"maxResults": 501}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Acceptable values of 'maxResults' are 0 to 500",
    )
    error(api.get("/shares", params={"maxResults": "x"}), 400, "INVALID_PARAMETER_VALUE", "expected a number")


def test_page_token_is_bound_to_its_listing(api: httpx.Client) -> None:
    token = api.get("/shares/proto/all-tables", params={"maxResults": 1}).json()["nextPageToken"]
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    error(
        api.get("/shares/proto/schemas", params={"pageToken": token}),
        400,
        "INVALID_PARAMETER_VALUE",
        "invalid 'nextPageToken'",
    )
    error(
        api.get("/shares/proto/all-tables", params={"pageToken": token[:-2] + "xx"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "invalid 'nextPageToken'",
    )


def test_unknown_names(api: httpx.Client) -> None:
    error(api.get("/shares/nope"), 404, "RESOURCE_DOES_NOT_EXIST", "share 'nope' not found")
    error(
        api.get("/shares/proto/schemas/nope/tables"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
        "schema 'nope' not found",
    )
    error(
        api.get("/shares/proto/schemas/default/tables/nope/metadata"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
        "does not exist",
    )
    error(api.get("/no/such/route"), 404, "RESOURCE_DOES_NOT_EXIST")


# -- auth ------------------------------------------------------------------------------------


def test_auth_matrix(local: Deployment, api: httpx.Client) -> None:
    url = f"{local.endpoint}/shares"
    error(httpx.get(url), 401, "UNAUTHENTICATED", "Missing bearer token")
    error(httpx.get(url, headers={"Authorization": "Bearer dss_wrong"}), 401, "UNAUTHENTICATED")
    error(httpx.get(url, headers={"Authorization": "Basic abc"}), 401, "UNAUTHENTICATED")
    expired = local.token("proto", expires=timedelta(seconds=1))
    time.sleep(1.1)
    error(httpx.get(url, headers={"Authorization": f"Bearer {expired}"}), 401, "UNAUTHENTICATED", "expired")
    revoked = local.token("proto")
    newest = max(local.store.list_tokens("proto"), key=lambda t: t.created_at)
    local.store.revoke_token("proto", newest.id)
    error(httpx.get(url, headers={"Authorization": f"Bearer {revoked}"}), 401, "UNAUTHENTICATED", "revoked")
    assert httpx.get(url).headers.get("www-authenticate") == "Bearer"


def test_other_shares_are_invisible(api: httpx.Client) -> None:
    error(api.get("/shares/elsewhere"), 404, "RESOURCE_DOES_NOT_EXIST", "share 'elsewhere' not found")
    error(
        api.get("/shares/elsewhere/schemas/default/tables/secret_table/metadata"),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )
    error(
        api.post("/shares/elsewhere/schemas/default/tables/secret_table/query", json={}),
        404,
        "RESOURCE_DOES_NOT_EXIST",
    )


def test_authorized_requests_run_one_store_query_listings_two(local: Deployment, api: httpx.Client) -> None:
    # Token, share and table come from one SELECT joining them, not one query per check.
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        # The activity recorder's thread writes earlier requests in the background: not this one's.
        if threading.current_thread().name != "activity":
            statements.append(statement)

    table = "/shares/proto/schemas/default/tables/t_simple"
    # Listings read the authorized share and then its tables: two.
    requests = [
        ("GET", table + "/version", 200, 1),
        ("GET", table + "/metadata", 200, 1),
        ("POST", table + "/query", 200, 1),
        ("GET", "/shares/proto", 200, 1),
        ("GET", "/shares/proto/schemas/default/tables/nope/metadata", 404, 1),
        ("GET", "/shares/elsewhere/schemas/default/tables/secret_table/metadata", 404, 1),
        ("GET", "/shares/proto/schemas", 200, 2),
        ("GET", "/shares/proto/schemas/default/tables", 200, 2),
        ("GET", "/shares/proto/all-tables", 200, 2),
    ]
    event.listen(local.store.engine, "before_cursor_execute", count)
    try:
        for method, path, status, expected in requests:
            statements.clear()
            response = api.request(method, path, json={} if method == "POST" else None)
            assert response.status_code == status, response.text
            assert len(statements) == expected, (path, statements)
    finally:
        event.remove(local.store.engine, "before_cursor_execute", count)


def test_a_404_for_another_share_is_audited_with_the_token(local: Deployment, api: httpx.Client) -> None:
    response = api.get("/shares/elsewhere/schemas/default/tables/secret_table/metadata")
    record = audit_record(local, response.headers["x-request-id"])
    assert record["status"] == 404 and record["share"] == "proto" and record["token_id"]
    assert "table" not in record


def pages(api: httpx.Client, path: str, size: int, headers: dict[str, str]) -> list[str]:
    """Every item of a list read `size` at a time, by name (schema-qualified for tables)."""
    found: list[str] = []
    token = None
    while True:
        params = {"maxResults": size} | ({"pageToken": token} if token else {})
        body = api.get(path, params=params, headers=headers).json()
        items = body.get("items", [])
        assert len(items) <= size
        found += [f"{i['schema']}.{i['name']}" if "schema" in i else i["name"] for i in items]
        token = body.get("nextPageToken")
        if not token:
            return found


def test_keyset_pages_read_from_the_store_equal_the_whole_lists(api: httpx.Client, local: Deployment) -> None:
    from share_store.model import parse_create_args

    specs = ["Beta", "zeta:delta:bkt:p/z", "Alpha:delta:bkt:p/a", "gamma", "mid:delta:bkt:p/m"]
    local.store.create_share("keyset", parse_create_args(specs))
    local.store.update_share("keyset", parse_create_args(["alpha", "Omega:delta:bkt:p/o"]))
    headers = {"Authorization": f"Bearer {local.token('keyset')}"}
    whole_tables = [f"{t.schema}.{t.name}" for t in local.store.list_tables("keyset")]
    assert whole_tables == ["alpha.Omega", "Beta.Alpha", "Beta.zeta", "gamma.mid"]  # by lower-cased keys
    for size in (1, 2, 3, 5, 500):
        assert pages(api, "/shares/keyset/all-tables", size, headers) == whole_tables
        assert pages(api, "/shares/keyset/schemas", size, headers) == ["alpha", "Beta", "gamma"]
        # The schema as the URL spells it, as the reference server echoes it.
        assert pages(api, "/shares/keyset/schemas/beta/tables", size, headers) == ["beta.Alpha", "beta.zeta"]
    # A table added before the cursor is not shown again later, nor one skipped: keyset, not offsets.
    first = api.get("/shares/keyset/all-tables", params={"maxResults": 2}, headers=headers).json()
    local.store.update_share("keyset", parse_create_args(["aaa", "first:delta:bkt:p/f"]))
    following = {"maxResults": 10, "pageToken": first["nextPageToken"]}
    rest = api.get("/shares/keyset/all-tables", params=following, headers=headers).json()
    assert [f"{i['schema']}.{i['name']}" for i in rest["items"]] == whole_tables[2:]


def test_a_recipient_token_pages_its_granted_shares(api: httpx.Client, local: Deployment) -> None:
    local.store.create_recipient("pager")
    names = [f"granted-{n}" for n in range(7)]
    for name in names:
        local.store.create_share(name, [])
        local.store.grant_share("pager", name)
    _, secret = local.store.create_recipient_token("pager", None)
    headers = {"Authorization": f"Bearer {secret}"}
    for size in (1, 3, 7, 100):
        assert pages(api, "/shares", size, headers) == names
