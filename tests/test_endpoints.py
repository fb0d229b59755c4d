"""The protocol's endpoints over real HTTP: listings, pagination, errors, auth, headers, signed URLs.

Request parsing and line encoding on their own are unit-tested in test_protocol.py
and test_encoding.py.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from sqlalchemy import event

from share_store.model import TableSpec
from tests.conftest import Deployment, audit_record

TABLES = {
    "t_part": "delta-0.8.0-partitioned",
    "t_simple": "simple_table",
    "t_checkpoint": "simple_table_with_checkpoint",
    "t_dv": "table-with-dv-small",
    "t_cdf": "cdf-table",
}


@pytest.fixture(scope="module")
def api(local: Deployment) -> httpx.Client:
    local.share_tables("proto", TABLES)
    local.store.update_share("proto", add=[TableSpec.parse("other:t_other:delta:testdata:simple_table")])
    local.share_tables("nohistory", {"t": "simple_table"}, history=False)
    local.share_tables("elsewhere", {"secret_table": "simple_table"})
    token = local.token("proto")
    client = httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    yield client
    client.close()


def lines(response: httpx.Response) -> list[dict]:
    return [json.loads(line) for line in response.text.splitlines()]


def error(response: httpx.Response, status: int, code: str, message: str = "") -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["errorCode"] == code
    assert message in body["message"]


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


# -- version / metadata -------------------------------------------------------------------


def test_table_version(api: httpx.Client) -> None:
    response = api.get("/shares/proto/schemas/default/tables/t_simple/version")
    assert response.status_code == 200 and response.content == b""
    assert response.headers["delta-table-version"] == "4"
    head = api.head("/shares/proto/schemas/default/tables/t_simple")
    assert head.status_code == 200 and head.headers["delta-table-version"] == "4"
    assert api.head("/shares/proto/schemas/default/tables/nope").status_code == 404


def test_table_version_starting_timestamp(local: Deployment, api: httpx.Client) -> None:
    from share_store.tables.commits import format_ms

    table = local.store.get_table("proto", "default", "t_simple")
    reader = local.server.app.state.readers.reader(table)
    commits = reader.commits(reader.listing())
    path = "/shares/proto/schemas/default/tables/t_simple/version"
    for commit in commits:
        response = api.get(path, params={"startingTimestamp": format_ms(commit.timestamp)})
        assert response.headers["delta-table-version"] == str(commit.version)
    early = api.get(path, params={"startingTimestamp": "2000-01-01T00:00:00Z"})
    assert early.headers["delta-table-version"] == "0"
    error(
        api.get(path, params={"startingTimestamp": "2999-01-01T00:00:00Z"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "is after the latest available version",
    )
    error(
        api.get(path, params={"startingTimestamp": "abc"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Invalid startingTimestamp: abc",
    )


def test_metadata(api: httpx.Client) -> None:
    response = api.get("/shares/proto/schemas/default/tables/t_part/metadata")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    assert response.headers["delta-table-version"] == "0"
    assert response.headers["delta-sharing-capabilities"] == "responseformat=parquet"
    protocol, metadata = lines(response)
    assert protocol == {"protocol": {"minReaderVersion": 1}}
    meta = metadata["metaData"]
    assert meta["format"] == {"provider": "parquet"}
    assert meta["partitionColumns"] == ["year", "month", "day"]
    assert meta["numFiles"] == 6 and meta["size"] > 0
    assert "version" not in meta
    assert json.loads(meta["schemaString"])["type"] == "struct"


def test_metadata_time_travel_and_errors(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_simple/metadata"
    assert api.get(path, params={"version": 2}).headers["delta-table-version"] == "2"
    error(
        api.get(path, params={"version": 2, "timestamp": "2020-01-01T00:00:00Z"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Please only provide one of: version,timestamp",
    )
    error(api.get(path, params={"version": -1}), 400, "INVALID_PARAMETER_VALUE", "version cannot be negative")
    error(api.get(path, params={"version": 99}), 400, "INVALID_PARAMETER_VALUE", "does not exist")
    error(
        api.get(path, params={"timestamp": "2000-01-01T00:00:00Z"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Please use a timestamp greater than or equal to",
    )


def test_history_not_shared(local: Deployment) -> None:
    client = httpx.Client(
        base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token('nohistory')}"}
    )
    base = "/shares/nohistory/schemas/default/tables/t"
    message = "Reading table by version or timestamp is not supported because history sharing is not enabled"
    error(client.get(base + "/metadata", params={"version": 1}), 400, "INVALID_PARAMETER_VALUE", message)
    error(client.post(base + "/query", json={"version": 1}), 400, "INVALID_PARAMETER_VALUE", message)
    error(
        client.get(base + "/version", params={"startingTimestamp": "2020-01-01T00:00:00Z"}),
        400,
        "INVALID_PARAMETER_VALUE",
        message,
    )
    assert client.post(base + "/query", json={}).status_code == 200


def test_response_format_negotiation(api: httpx.Client) -> None:
    def fmt(table: str, header: str | None) -> httpx.Response:
        headers = {"delta-sharing-capabilities": header} if header else {}
        return api.get(f"/shares/proto/schemas/default/tables/{table}/metadata", headers=headers)

    def chosen(response: httpx.Response) -> str:
        assert response.status_code == 200, response.text
        return response.headers["delta-sharing-capabilities"]

    assert chosen(fmt("t_simple", None)) == "responseformat=parquet"
    assert chosen(fmt("t_simple", "responseformat=delta")) == "responseformat=delta"
    # The Python client's auto-resolution lists delta first: it reads delta faster ([server]
    # prefer_delta_format, on by default). Delta Lake's connector lists parquet first.
    assert chosen(fmt("t_simple", "responseformat=delta,parquet")) == "responseformat=delta"
    assert chosen(fmt("t_simple", "responseFormat=Parquet,Delta")) == "responseformat=parquet"
    dv = "responseformat=delta,parquet;readerfeatures=deletionvectors"
    assert chosen(fmt("t_dv", dv)) == "responseformat=delta"
    error(fmt("t_dv", "responseformat=delta"), 400, "UNSUPPORTED_OPERATION", "deletionVectors")
    error(fmt("t_simple", "responseformat=orc"), 400, "INVALID_PARAMETER_VALUE", "Unsupported responseformat")


def test_deletion_vector_table_refused_in_parquet(api: httpx.Client) -> None:
    error(
        api.post("/shares/proto/schemas/default/tables/t_dv/query", json={}),
        400,
        "UNSUPPORTED_OPERATION",
        "Unsupported Delta Table Properties",
    )


# -- query ---------------------------------------------------------------------------------


def test_query_lines(api: httpx.Client) -> None:
    response = api.post("/shares/proto/schemas/default/tables/t_part/query", json={})
    assert response.status_code == 200
    assert response.headers["delta-table-version"] == "0"
    assert response.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    actions = lines(response)
    assert list(actions[0]) == ["protocol"] and list(actions[1]) == ["metaData"]
    files = [a["file"] for a in actions[2:]]
    assert len(files) == 6 and all(list(a) == ["file"] for a in actions[2:])
    for file in files:
        assert len(file["id"]) == 32 and file["size"] > 0
        assert set(file["partitionValues"]) == {"year", "month", "day"}
        assert file["expirationTimestamp"] > time.time() * 1000 + 3500 * 1000
        assert "X-Amz-Signature=" in file["url"]
        assert "version" not in file
    # metadata is byte-identical between /metadata and /query
    meta = api.get("/shares/proto/schemas/default/tables/t_part/metadata").text.splitlines()
    assert response.text.splitlines()[:2] == meta


def test_query_ids_stable_and_fileidhash(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_part/query"
    first = [a["file"]["id"] for a in lines(api.post(path, json={}))[2:]]
    second = [a["file"]["id"] for a in lines(api.post(path, json={}))[2:]]
    assert first == second
    hashed = api.post(path, json={}, headers={"fileidhash": "Delta"})
    assert hashed.headers["fileidhash"] == "delta"
    assert all(len(a["file"]["id"]) == 64 for a in lines(hashed)[2:])
    error(
        api.post(path, json={}, headers={"fileidhash": "md5"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Unsupported fileidhash",
    )


def test_query_time_travel_sets_version(api: httpx.Client) -> None:
    response = api.post("/shares/proto/schemas/default/tables/t_simple/query", json={"version": "1"})
    assert response.headers["delta-table-version"] == "1"
    assert all(a["file"]["version"] == 1 for a in lines(response)[2:])


def test_query_json_predicates_on_partitions_and_stats(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_cdf/query"
    everything = lines(api.post(path, json={}))[2:]
    stats = [json.loads(a["file"]["stats"]) for a in everything]
    assert all("numRecords" in s and "minValues" in s for s in stats)
    column = next(iter(stats[0]["minValues"]))
    smallest = min(s["minValues"][column] for s in stats)
    hint = {
        "op": "lessThanOrEqual",
        "children": [
            {"op": "column", "name": column, "valueType": "int"},
            {"op": "literal", "value": str(smallest), "valueType": "int"},
        ],
    }
    pruned = lines(api.post(path, json={"jsonPredicateHints": json.dumps(hint)}))[2:]
    assert 0 < len(pruned) < len(everything)
    assert all(json.loads(a["file"]["stats"])["minValues"][column] <= smallest for a in pruned)
    birthday = everything[0]["file"]["partitionValues"]["birthday"]
    on_partition = {
        "op": "and",
        "children": [
            hint | {"op": "greaterThanOrEqual"},
            {
                "op": "equal",
                "children": [
                    {"op": "column", "name": "birthday", "valueType": "date"},
                    {"op": "literal", "value": birthday, "valueType": "date"},
                ],
            },
        ],
    }
    by_day = lines(api.post(path, json={"jsonPredicateHints": json.dumps(on_partition)}))[2:]
    expected = [a for a in everything if a["file"]["partitionValues"]["birthday"] == birthday]
    assert sorted(a["file"]["id"] for a in by_day) == sorted(a["file"]["id"] for a in expected)
    # A broken hint filters nothing.
    broken = lines(api.post(path, json={"jsonPredicateHints": "{not json"}))[2:]
    assert len(broken) == len(everything)


def test_query_limit_hint(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_cdf/query"
    assert len(lines(api.post(path, json={"limitHint": 2}))[2:]) == 2
    assert len(lines(api.post(path, json={"limitHint": 0}))[2:]) == 0
    # Files without stats cannot be counted: all are listed.
    no_stats = "/shares/proto/schemas/default/tables/t_checkpoint/query"
    assert len(lines(api.post(no_stats, json={"limitHint": 1}))[2:]) == 11
    # SQL predicateHints are accepted (and, being best effort, not evaluated).
    assert len(lines(api.post(path, json={"predicateHints": ["id > 1"]}))[2:]) == 9


def test_query_pagination_pins_version(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_checkpoint/query"
    everything = [a["file"]["id"] for a in lines(api.post(path, json={}))[2:]]
    seen, token, pages = [], None, 0
    while True:
        body = {"maxFiles": 4} | ({"pageToken": token} if token else {})
        response = api.post(path, json=body)
        actions = lines(response)
        assert response.headers["delta-table-version"] == "10"
        assert "endStreamAction" in actions[-1]
        seen += [a["file"]["id"] for a in actions[2:-1]]
        pages += 1
        token = actions[-1]["endStreamAction"].get("nextPageToken")
        if not token:
            break
    assert pages == 3 and seen == everything


def test_a_page_signs_and_counts_its_own_files_only(api: httpx.Client, local: Deployment) -> None:
    # The audit's file bytes are those of the files a response encoded (and signed): a later
    # page that skipped its predecessors' lines after making them counted theirs too, and the
    # file after its own, made to learn whether another page follows.
    path = "/shares/proto/schemas/default/tables/t_checkpoint/query"
    token, pages = None, 0
    while True:
        response = api.post(path, json={"maxFiles": 4} | ({"pageToken": token} if token else {}))
        actions = lines(response)
        files = [action["file"] for action in actions[2:-1]]
        record = audit_record(local, response.headers["x-request-id"])
        assert record["files"] == len(files) and record["file_bytes"] == sum(f["size"] for f in files) > 0
        pages += 1
        token = actions[-1]["endStreamAction"].get("nextPageToken")
        if not token:
            break
    assert pages == 3
    first = lines(api.post(path, json={"maxFiles": 4}))[-1]["endStreamAction"]["nextPageToken"]
    error(
        api.post(path, json={"maxFiles": 4, "pageToken": first, "limitHint": 2}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Query parameter mismatch",
    )
    other = "/shares/proto/schemas/default/tables/t_part/query"
    error(
        api.post(other, json={"maxFiles": 4, "pageToken": first}),
        400,
        "INVALID_PARAMETER_VALUE",
        "does not match the table being queried",
    )
    error(
        api.post(path, json={"maxFiles": 4, "pageToken": "garbage"}),
        400,
        "INVALID_PARAMETER_VALUE",
        "Error decoding the page token",
    )


def test_refresh_token_returns_same_files(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_part/query"
    first = lines(api.post(path, json={"includeRefreshToken": True}))
    end = first[-1]["endStreamAction"]
    assert end["refreshToken"] and end["minUrlExpirationTimestamp"] > 0
    time.sleep(1.1)  # new URLs carry a later expiry
    again = lines(api.post(path, json={"includeRefreshToken": True, "refreshToken": end["refreshToken"]}))
    ids = lambda actions: sorted(a["file"]["id"] for a in actions[2:-1])  # noqa: E731
    urls = lambda actions: sorted(a["file"]["url"] for a in actions[2:-1])  # noqa: E731
    assert ids(first) == ids(again) and urls(first) != urls(again)
    error(
        api.post(path, json={"refreshToken": end["refreshToken"], "version": 0}),
        400,
        "INVALID_PARAMETER_VALUE",
        "refreshToken cannot be used when querying a specific version",
    )


def test_end_stream_action_only_when_asked(api: httpx.Client) -> None:
    path = "/shares/proto/schemas/default/tables/t_part/query"
    assert all("endStreamAction" not in a for a in lines(api.post(path, json={})))
    response = api.post(
        path,
        json={},
        headers={"delta-sharing-capabilities": "responseformat=parquet;includeendstreamaction=true"},
    )
    assert (
        response.headers["delta-sharing-capabilities"] == "responseformat=parquet;includeendstreamaction=true"
    )
    assert "endStreamAction" in lines(response)[-1]


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (b"", "MALFORMED_REQUEST", "No content to map"),
        (b"{bad", "MALFORMED_REQUEST", "Invalid JSON"),
        (b"[]", "MALFORMED_REQUEST", "Expected a JSON object"),
        (b'{"version":"x3"}', "MALFORMED_REQUEST", "Not a numeric value: x3"),
        (
            b'{"version":1,"timestamp":"2020-01-01T00:00:00Z"}',
            "INVALID_PARAMETER_VALUE",
            "Please only provide one of",
        ),
        (b'{"version":-1}', "INVALID_PARAMETER_VALUE", "table version cannot be negative"),
        (b'{"maxFiles":0}', "INVALID_PARAMETER_VALUE", "maxFiles must be positive"),
        (b'{"maxFiles":3000000000}', "MALFORMED_REQUEST", "Not an int32 value"),
        (
            b'{"predicateHints":"a = 1"}',
            "MALFORMED_REQUEST",
            "Expected an array for repeated field predicateHints",
        ),
        (
            b'{"includeRefreshToken":true,"version":1}',
            "INVALID_PARAMETER_VALUE",
            "includeRefreshToken cannot be used",
        ),
        (b'{"timestamp":"not-a-time"}', "INVALID_PARAMETER_VALUE", "Invalid startingTimestamp"),
        (b'{"version":99}', "INVALID_PARAMETER_VALUE", "Cannot load table version 99"),
    ],
)
def test_query_validation(api: httpx.Client, body: bytes, code: str, message: str) -> None:
    response = api.post(
        "/shares/proto/schemas/default/tables/t_simple/query",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    error(response, 400, code, message)


# -- signed file URLs -------------------------------------------------------------------------


def _a_file_url(api: httpx.Client) -> str:
    return lines(api.post("/shares/proto/schemas/default/tables/t_part/query", json={}))[2]["file"]["url"]


def _with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | changes
    return urlunsplit(parts._replace(query=urlencode(query)))


def test_signed_url_get_head_and_range(api: httpx.Client) -> None:
    url = _a_file_url(api)
    full = httpx.get(url)
    assert full.status_code == 200 and full.content[:4] == b"PAR1"
    head = httpx.head(url)
    assert head.status_code == 200 and int(head.headers["content-length"]) == len(full.content)
    part = httpx.get(url, headers={"Range": "bytes=4-11"})
    assert part.status_code == 206 and part.content == full.content[4:12]
    assert part.headers["content-length"] == "8"
    tail = httpx.get(url, headers={"Range": f"bytes=4-{len(full.content) - 1}"})
    assert tail.status_code == 206 and tail.content == full.content[4:]


def test_signed_url_tampering_expiry_and_traversal(api: httpx.Client) -> None:
    url = _a_file_url(api)
    parts = urlsplit(url)
    assert httpx.get(url.replace(".parquet", ".orc")).status_code == 403
    signature = dict(parse_qsl(parts.query))["X-Amz-Signature"]
    assert httpx.get(_with_query(url, **{"X-Amz-Signature": "0" * len(signature)})).status_code == 403
    assert (
        httpx.get(_with_query(url, **{"X-Sharing-Expires": str(int(time.time()) + 99999)})).status_code == 403
    )
    assert httpx.get(_with_query(url, **{"X-Sharing-Expires": "1"})).status_code == 403
    assert httpx.get(urlunsplit(parts._replace(query=""))).status_code == 403
    bucket_root = parts.path.split("/files/")[0] + "/files/"
    for sneaky in [
        "testdata/../../data-dir/store.db",
        "testdata/%2e%2e/%2e%2e/data-dir/server.key",
        "..%2Fdata-dir%2Fserver.key",
    ]:
        response = httpx.get(urlunsplit(parts._replace(path=bucket_root + sneaky)))
        assert response.status_code in (403, 404)
        assert b"PAR1" not in response.content


def test_expired_local_url(local: Deployment) -> None:
    from share_store.storage.local import LocalStorage

    storage = local.storage
    assert isinstance(storage, LocalStorage)
    # Expiry is whole seconds (int(now) + lifetime): 2 s leaves at least 1 s to fetch it.
    url, _ = LocalStorage(storage.root, storage.signer, url_lifetime=2).presign(
        "testdata", "simple_table/_delta_log/00000000000000000000.json", time.time()
    )
    assert httpx.get(url).status_code == 200
    time.sleep(3.1)
    assert httpx.get(url).status_code == 403


def test_security_headers(api: httpx.Client) -> None:
    response = api.get("/shares")
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


def test_page_tokens_have_one_spelling() -> None:
    from share_store.signing.token_codec import TokenCodec

    codec = TokenCodec(b"k" * 32, "test")
    token = codec.encode({"o": 1})
    assert codec.decode(token) == {"o": 1}
    body, mac = token.split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for replacement in alphabet:
        variant = f"{body}.{mac[:-1]}{replacement}"
        if variant != token:
            with pytest.raises(ValueError):
                codec.decode(variant)
