"""The protocol's table endpoints over real HTTP: version, metadata, query; errors, headers.

The share they read is conftest.py's; request parsing and line encoding on their own are
unit-tested in test_requests.py, test_capabilities.py and test_encoding.py.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.conftest import Deployment, audit_record
from tests.sharing_server.delta_sharing.conftest import error, lines

# -- version / metadata -------------------------------------------------------------------


def test_table_version(api: httpx.Client) -> None:
    response = api.get("/shares/proto/schemas/default/tables/t_simple/version")
    assert response.status_code == 200 and response.content == b""
    assert response.headers["delta-table-version"] == "4"
    head = api.head("/shares/proto/schemas/default/tables/t_simple")
    assert head.status_code == 200 and head.headers["delta-table-version"] == "4"
    assert api.head("/shares/proto/schemas/default/tables/nope").status_code == 404


def test_table_version_starting_timestamp(local: Deployment, api: httpx.Client) -> None:
    from share_store.tables.commit_times import format_ms

    table = local.store.get_table("proto", "default", "t_simple")
    reader = local.server.app.state.services.readers.reader(table)
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
