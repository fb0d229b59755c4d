"""Async queries (protocol 2026-07): `asyncquery=true`, an idempotency key, `pending`, then polls.

The budget is 0 s here, so every submission answers `pending` and the lines
come from polls, as they do for a big table's first read. The client is ours,
written from the protocol text (the JVM connector's jars cannot be had here):
it submits, polls `…/queries/{queryId}` until the lines come, and pages
through them with `maxFiles`/`pageToken`; what it gets is compared with the
synchronous answer. The Python client, which sends none of it, sees no change.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from sqlalchemy import func, select

from share_store.persistence.async_queries import AsyncQueryStore, digest
from share_store.persistence.sql_schema import async_queries_table
from tests.conftest import TESTDATA_BUCKET, Deployment

ASYNC = "responseformat=parquet;asyncquery=true"
TABLE = "/shares/jobs/schemas/s/tables/orders"


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    return {"SHARING_LIMITS_ASYNC_QUERY_BUDGET": "0"}


@pytest.fixture(scope="module")
def shared(server: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = Path(server.config.storage["root"]) / TESTDATA_BUCKET
    uri = str(root / "orders")
    for start in range(0, 60, 20):  # three versions of six files each
        rows = pa.table({"id": list(range(start, start + 20)), "part": [i % 6 for i in range(20)]})
        write_deltalake(uri, rows, partition_by=["part"], mode="append")
    server.share_tables("jobs", {"orders": "orders"}, schema="s")
    server.share_tables("other", {"orders": "orders"}, schema="s")
    profile = tmp_path_factory.mktemp("async") / "jobs.share"
    secret = server.token("jobs")
    profile.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": server.endpoint,
                                   "bearerToken": secret}))  # fmt: skip
    return {"uri": uri, "token": secret, "profile": str(profile), "other": server.token("other")}


def client(server: Deployment, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.endpoint, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def lines_of(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines()]


def without_urls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lines with what differs per signing (the URL, its expiry) taken out."""
    kept = []
    for line in lines:
        if "file" in line:
            line = {
                "file": {k: v for k, v in line["file"].items() if k not in ("url", "expirationTimestamp")}
            }
        kept.append(line)
    return kept


def run_async(
    http: httpx.Client, body: dict[str, Any], capabilities: str = ASYNC
) -> tuple[str, httpx.Response]:
    """Submit, then poll until the lines come: the query's id and its first answer with lines."""
    headers = {"delta-sharing-capabilities": capabilities}
    answer = http.post(f"{TABLE}/query", json=body, headers=headers)
    first = lines_of(answer)
    assert "asyncquery=true" in answer.headers["delta-sharing-capabilities"]
    assert answer.headers["Delta-Table-Version"] == "0"  # the JVM client needs one even while pending
    assert first == [{"queryStatus": {"queryId": first[0]["queryStatus"]["queryId"], "status": "pending"}}]
    query_id = first[0]["queryStatus"]["queryId"]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        polled = http.post(f"{TABLE}/queries/{query_id}", json={"queryId": query_id}, headers=headers)
        lines = lines_of(polled)
        if "queryStatus" not in lines[0]:
            return query_id, polled
        assert lines[0]["queryStatus"]["status"] == "pending", lines
        time.sleep(0.05)
    raise AssertionError("the query stayed pending")


def test_an_async_query_answers_pending_then_the_lines_of_the_sync_query(
    server: Deployment, shared: dict[str, Any]
) -> None:
    http = client(server, shared["token"])
    sync = http.post(f"{TABLE}/query", json={})
    query_id, polled = run_async(http, {"idempotencyKey": str(uuid.uuid4())})
    assert polled.headers["Delta-Table-Version"] == sync.headers["Delta-Table-Version"] == "2"
    assert without_urls(lines_of(polled)) == without_urls(lines_of(sync))
    assert len([line for line in lines_of(polled) if "file" in line]) == 18
    # Polled again, the lines come at once (and the signed URLs work).
    again = lines_of(http.post(f"{TABLE}/queries/{query_id}", json={}))
    url = next(line["file"]["url"] for line in again if "file" in line)
    assert httpx.get(url).status_code == 200
    # The delta format, asked for on submission, is what every poll answers in.
    _, delta = run_async(http, {"idempotency_key": str(uuid.uuid4())}, "responseformat=delta;asyncquery=true")
    assert "responseformat=delta" in delta.headers["delta-sharing-capabilities"]
    assert sum("file" in line for line in lines_of(delta)) == 18


def test_a_key_given_again_finds_its_query_and_other_parameters_are_refused(
    server: Deployment, shared: dict[str, Any]
) -> None:
    http = client(server, shared["token"])
    key = str(uuid.uuid4())
    headers = {"delta-sharing-capabilities": ASYNC}
    first = lines_of(
        http.post(f"{TABLE}/query", json={"idempotencyKey": key, "limitHint": 5}, headers=headers)
    )
    ids = {first[0]["queryStatus"]["queryId"]}
    # The JVM client's spelling of the key: the same query, pending still or answered from its work.
    again = lines_of(
        http.post(f"{TABLE}/query", json={"idempotency_key": key, "limitHint": 5}, headers=headers)
    )
    assert again[0].get("queryStatus", {"queryId": first[0]["queryStatus"]["queryId"]})["queryId"] in ids
    with server.store.transactions.read() as conn:
        rows = conn.execute(select(func.count()).select_from(async_queries_table).where(
            async_queries_table.c.key_hash == digest(key))).scalar_one()  # fmt: skip
    assert rows == 1
    other = http.post(f"{TABLE}/query", json={"idempotencyKey": key, "limitHint": 6}, headers=headers)
    assert other.status_code == 400
    assert other.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert "other parameters" in other.json()["message"]
    # The same key on another share's table is another query: keys are the client's per table.
    other_table = client(server, shared["other"]).post(
        "/shares/other/schemas/s/tables/orders/query", json={"idempotencyKey": key}, headers=headers
    )
    assert lines_of(other_table)[0]["queryStatus"]["queryId"] not in ids


@pytest.mark.parametrize(
    ("body", "code", "words"),
    [
        ({}, "INVALID_PARAMETER_VALUE", "idempotency_key is required for async query"),
        ({"idempotencyKey": "a", "idempotency_key": "b"}, "INVALID_PARAMETER_VALUE", "differ"),
        ({"idempotencyKey": "k" * 257}, "INVALID_PARAMETER_VALUE", "longer than 256"),
        ({"idempotencyKey": {"a": 1}}, "MALFORMED_REQUEST", "string"),
        ({"idempotencyKey": ["a"], "idempotency_key": "a"}, "MALFORMED_REQUEST", "string"),
        ({"idempotencyKey": ""}, "MALFORMED_REQUEST", "non-empty string"),
        ({"idempotencyKey": "x", "version": -1}, "INVALID_PARAMETER_VALUE", "negative"),
    ],
)
def test_submissions_that_cannot_be_queries_get_a_clear_400(
    server: Deployment, shared: dict[str, Any], body: dict[str, Any], code: str, words: str
) -> None:
    answer = client(server, shared["token"]).post(
        f"{TABLE}/query", json=body, headers={"delta-sharing-capabilities": ASYNC}
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["errorCode"] == code and words in answer.json()["message"]


def test_polls_page_through_the_lines_with_max_files_and_page_tokens(
    server: Deployment, shared: dict[str, Any]
) -> None:
    http = client(server, shared["token"])
    query_id, polled = run_async(http, {"idempotencyKey": str(uuid.uuid4()), "maxFiles": 5})
    files: list[dict[str, Any]] = []
    lines = lines_of(polled)
    pages = 1
    while True:
        files += [line["file"]["id"] for line in lines if "file" in line]  # type: ignore[misc]
        token = lines[-1].get("endStreamAction", {}).get("nextPageToken")
        if not token:
            break
        lines = lines_of(http.post(f"{TABLE}/queries/{query_id}", json={"maxFiles": 5, "pageToken": token}))
        assert lines[0] == lines_of(polled)[0]  # each page starts with the protocol and metadata
        pages += 1
    sync = lines_of(http.post(f"{TABLE}/query", json={}))
    assert sorted(files) == sorted(line["file"]["id"] for line in sync if "file" in line)  # type: ignore[type-var]
    assert pages == 4


def test_a_query_reads_the_version_it_was_made_at_whatever_is_committed_since(
    server: Deployment, shared: dict[str, Any]
) -> None:
    http = client(server, shared["token"])
    headers = {"delta-sharing-capabilities": ASYNC}
    key = str(uuid.uuid4())
    first = lines_of(http.post(f"{TABLE}/query", json={"idempotencyKey": key}, headers=headers))
    version = int(http.get(f"{TABLE}/version").headers["Delta-Table-Version"])
    write_deltalake(
        shared["uri"], pa.table({"id": [1000], "part": [0]}), partition_by=["part"], mode="append"
    )
    query_id = first[0]["queryStatus"]["queryId"]
    deadline = time.monotonic() + 30
    while (
        "queryStatus" in (lines := lines_of(answer := http.post(f"{TABLE}/queries/{query_id}", json={})))[0]
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert answer.headers["Delta-Table-Version"] == str(version)
    assert not any("version" in line.get("file", {}) for line in lines)  # a latest read, not time travel
    # The key's retry is the same query, at the same version.
    retried = http.post(f"{TABLE}/query", json={"idempotencyKey": key}, headers=headers)
    assert retried.headers["Delta-Table-Version"] == str(version)
    assert int(http.get(f"{TABLE}/version").headers["Delta-Table-Version"]) == version + 1


def test_a_query_is_its_callers_and_its_tables_alone(server: Deployment, shared: dict[str, Any]) -> None:
    mine = client(server, shared["token"])
    query_id, _ = run_async(mine, {"idempotencyKey": str(uuid.uuid4())})
    theirs = client(server, shared["other"])
    # Another share's token polling the id on its own table, or on ours (which it cannot open).
    answer = theirs.post(f"/shares/other/schemas/s/tables/orders/queries/{query_id}", json={})
    assert answer.status_code == 404 and answer.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    assert theirs.post(f"{TABLE}/queries/{query_id}", json={}).status_code in (403, 404)
    for bad in ["nope", "x" * 10_000, "%2e%2e", str(uuid.uuid4())]:
        answer = mine.post(f"{TABLE}/queries/{bad}", json={})
        assert answer.status_code == 404, answer.text
        assert answer.json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    for body in [b"[]", b"{", b'{"maxFiles": 0}', b'{"maxFiles": "x"}', b'{"pageToken": 3}']:
        answer = mine.post(f"{TABLE}/queries/{query_id}", content=body)
        assert answer.status_code == 400, (body, answer.text)
    bad_page = mine.post(f"{TABLE}/queries/{query_id}", json={"pageToken": "forged"})
    assert bad_page.status_code == 400 and "page token" in bad_page.json()["message"]


def test_a_caller_with_too_many_pending_queries_is_told_to_wait(
    server: Deployment, shared: dict[str, Any]
) -> None:
    token = server.store.authenticate(shared["other"])
    rows = AsyncQueryStore(server.store.transactions)
    from datetime import timedelta

    for index in range(32):  # pending rows of this caller, as a flood of submissions leaves them
        rows.submit(
            f"token:{token.id}", "some-table", f"flood-{index}", {"n": index}, None, timedelta(hours=1)
        )
    answer = client(server, shared["other"]).post(
        "/shares/other/schemas/s/tables/orders/query",
        json={"idempotencyKey": "one-more"},
        headers={"delta-sharing-capabilities": ASYNC},
    )
    assert answer.status_code == 429 and answer.json()["errorCode"] == "TOO_MANY_REQUESTS"
    assert "Retry-After" in answer.headers


def test_a_query_whose_work_fails_answers_failed_with_the_protocols_error(
    server: Deployment, shared: dict[str, Any], testdata: Path
) -> None:
    import shutil

    root = Path(server.config.storage["root"]) / TESTDATA_BUCKET
    shutil.copytree(testdata / "simple_table", root / "doomed")
    server.share_tables("doomed", {"t": "doomed"}, schema="s")
    http = client(server, server.token("doomed"))
    headers = {"delta-sharing-capabilities": ASYNC}
    key = str(uuid.uuid4())
    path = "/shares/doomed/schemas/s/tables/t"
    # Time travel to a version the table never had: found by the work, not by parsing.
    first = lines_of(http.post(f"{path}/query", json={"idempotencyKey": key, "version": 99}, headers=headers))
    if "queryStatus" not in first[0]:
        pytest.fail(f"expected pending, got {first}")
    query_id = first[0]["queryStatus"]["queryId"]
    deadline = time.monotonic() + 30
    while (status := lines_of(http.post(f"{path}/queries/{query_id}", json={}))[0]["queryStatus"])[
        "status"
    ] == ("pending"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert status["status"] == "failed"
    assert status["errorCode"] == "INVALID_PARAMETER_VALUE" and "99" in status["errorMessage"]


def test_the_python_client_sends_no_async_query_and_sees_no_change(
    server: Deployment, shared: dict[str, Any]
) -> None:
    frame = delta_sharing.load_as_pandas(f"{shared['profile']}#jobs.s.orders")
    assert len(frame) >= 60
    answer = client(server, shared["token"]).post(f"{TABLE}/query", json={"idempotencyKey": "ignored"})
    assert "asyncquery" not in answer.headers["delta-sharing-capabilities"]
    assert "queryStatus" not in answer.text


def test_queries_nobody_polls_do_not_hold_the_places_of_new_ones(
    server: Deployment, shared: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submitted, worked on, never polled: once their work ends, a new query still gets a place."""
    from sharing_server.delta_sharing import async_queries

    monkeypatch.setattr(async_queries, "MAX_RUNNING", 2)
    http = client(server, shared["token"])
    headers = {"delta-sharing-capabilities": ASYNC}
    for _ in range(4):  # left pending, their work done in the background
        http.post(f"{TABLE}/query", json={"idempotencyKey": str(uuid.uuid4())}, headers=headers)
    time.sleep(1)
    _, polled = run_async(http, {"idempotencyKey": str(uuid.uuid4())})
    assert sum("file" in line for line in lines_of(polled)) >= 18


def test_a_refresh_token_query_pages_through_its_polls(server: Deployment, shared: dict[str, Any]) -> None:
    """The JVM client asks a refresh token on its first page; later pages must not repeat it."""
    http = client(server, shared["token"])
    body = {"idempotencyKey": str(uuid.uuid4()), "includeRefreshToken": True, "maxFiles": 10}
    query_id, polled = run_async(http, body)
    end = lines_of(polled)[-1]["endStreamAction"]
    assert end["refreshToken"] and end["nextPageToken"]
    page = http.post(f"{TABLE}/queries/{query_id}", json={"maxFiles": 10, "pageToken": end["nextPageToken"]})
    assert page.status_code == 200, page.text
    assert "refreshToken" not in lines_of(page)[-1].get("endStreamAction", {})
