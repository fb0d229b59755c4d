"""Rate limits, body limits, security headers, the audit log, metrics, and secrets kept out of logs."""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import delta_sharing
import httpx
import pandas as pd
import pytest
from deltalake import DeltaTable

from share_store.authentication.tokens import hash_secret
from tests.conftest import TESTDATA_BUCKET, Deployment, audit_record, audit_records, deploy

ADMIN_TOKEN = "dsa_limits-admin-token-abcdefghijklmnopqrstuvwxyz"
TABLE = "delta-0.8.0-partitioned"
QUERY = "/shares/limited/schemas/s/tables/t/query"
SERVER_LOGGERS = ("sharing_server", "share_store", "hypercorn", "starlette", "sqlalchemy", "alembic")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("limited")
    root = tmp / "buckets"
    shutil.copytree(testdata / TABLE, root / TESTDATA_BUCKET / TABLE)
    deployment = deploy(
        tmp,
        {"type": "local", "root": str(root)},
        env={
            "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
            "SHARING_LIMITS_PER_TOKEN_RPS": "5",
            "SHARING_LIMITS_GLOBAL_RPS": "0",
            "SHARING_LIMITS_MAX_BODY_BYTES": "65536",
        },
    )
    deployment.share_tables("limited", {"t": TABLE}, schema="s")
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def get(server: Deployment, path: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(server.endpoint + path, headers=headers)


def test_per_token_limit_answers_429_with_retry_after(limited: Deployment) -> None:
    first, second = limited.token("limited"), limited.token("limited")
    # A burst of 5, then 5 a second: asking until refused, however slow the machine.
    start, allowed, refused = time.monotonic(), 0, None
    while refused is None and allowed < 100:
        response = get(limited, "/shares", first)
        if response.status_code == 429:
            refused = response
        else:
            assert response.status_code == 200
            allowed += 1
    assert refused is not None
    assert 5 <= allowed <= 5 + 5 * (time.monotonic() - start) + 1
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["errorCode"] == "TOO_MANY_REQUESTS"
    assert "token's request rate limit" in refused.json()["message"]
    assert refused.headers["x-content-type-options"] == "nosniff"
    # Another token has its own budget.
    assert get(limited, "/shares", second).status_code == 200


def rows(frame: pd.DataFrame) -> list[tuple[str, ...]]:
    return sorted(map(tuple, frame[sorted(frame.columns)].astype(str).values.tolist()))


def client_refusals(server: Deployment) -> int:
    return sum(r["status"] == 429 and "/tables/t/" in r["path"] for r in audit_records(server))


def test_the_python_client_rides_out_429(limited: Deployment) -> None:
    profile = limited.profile("limited")
    expected = rows(DeltaTable(str(limited.tmp / "buckets" / TESTDATA_BUCKET / TABLE)).to_pandas())
    token = json.loads(Path(profile).read_text())["bearerToken"]
    refused_before = client_refusals(limited)
    stop = threading.Event()

    def hammer() -> None:
        """Keep the token's budget spent until the client has been refused (seen in the audit log)."""
        until = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < until:
            for _ in range(10):
                get(limited, "/shares", token)
            if client_refusals(limited) > refused_before:
                return

    while get(limited, "/shares", token).status_code != 429:
        pass  # spent before the client starts
    thread = threading.Thread(target=hammer, daemon=True)
    thread.start()
    try:
        assert rows(delta_sharing.load_as_pandas(f"{profile}#limited.s.t")) == expected
    finally:
        stop.set()
        thread.join()
    assert client_refusals(limited) > refused_before  # it was refused, backed off, and read every row


def test_global_limit(tmp_path: Path) -> None:
    deployment = deploy(
        tmp_path,
        {"type": "local", "root": str(tmp_path / "buckets")},
        env={"SHARING_LIMITS_PER_TOKEN_RPS": "0", "SHARING_LIMITS_GLOBAL_RPS": "3"},
    )
    try:
        # Different (unknown) tokens, so only the global limit can refuse them.
        statuses = []
        while 429 not in statuses and len(statuses) < 100:
            statuses.append(get(deployment, "/shares", f"dss_made-up-{len(statuses)}").status_code)
        assert statuses[:3] == [401] * 3 and statuses[-1] == 429
        assert httpx.get(deployment.server.url + "/healthz").status_code == 200  # probes are never limited
        metrics = httpx.get(deployment.server.url + "/metrics").text
        assert re.search(r'sharing_rate_limited_total\{limit="global"\} [1-9]', metrics)
    finally:
        deployment.server.stop()
        deployment.store.close()


def test_body_limit(limited: Deployment) -> None:
    token = limited.token("limited")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    big = json.dumps({"predicateHints": ["x" * 70_000]})
    response = httpx.post(limited.endpoint + QUERY, content=big, headers=headers)
    assert response.status_code == 413
    assert response.json() == {
        "errorCode": "REQUEST_TOO_LARGE",
        "message": "the request body exceeds the limit of 65536 bytes",
    }

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"predicateHints": ["'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"]}'

    response = httpx.post(limited.endpoint + QUERY, content=chunks(), headers=headers)
    assert response.status_code == 413 and response.json()["errorCode"] == "REQUEST_TOO_LARGE"
    deep = '{"jsonPredicateHints": "' + '{\\"op\\":\\"not\\",\\"children\\":[' * 2000 + '"}'
    response = httpx.post(limited.endpoint + QUERY, content=deep, headers=headers)
    assert response.status_code == 200  # a hint too deep to use is ignored, as hints may be


def test_security_headers_on_every_response(limited: Deployment) -> None:
    token = limited.token("limited")
    for response in (
        get(limited, "/shares", token),
        get(limited, "/shares/nope", token),
        get(limited, "/shares", None),
        httpx.get(limited.server.url + "/nowhere"),
    ):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["x-frame-options"] == "DENY"
        assert "default-src 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-request-id"]
        assert "Traceback" not in response.text


def test_audit_log_and_metrics(limited: Deployment) -> None:
    token = limited.token("limited")
    headers = {"Authorization": f"Bearer {token}"}
    response = httpx.post(limited.endpoint + QUERY, json={}, headers=headers)
    files = [line for line in response.text.splitlines() if line.startswith('{"file"')]
    request_id = response.headers["x-request-id"]
    refusal_id = get(limited, "/shares", "dss_not-a-real-token").headers["x-request-id"]

    query = audit_record(limited, request_id)
    assert audit_record(limited, refusal_id)["status"] == 401
    records = audit_records(limited)
    token_id = limited.store.authenticate(token).id
    assert query["token_id"] == token_id
    assert (query["share"], query["schema"], query["table"]) == ("limited", "s", "t")
    assert query["route"] == "table_query" and query["method"] == "POST" and query["status"] == 200
    assert query["version"] == int(response.headers["delta-table-version"])
    assert query["files"] == len(files) > 0
    # The data files' own bytes, as the response states each one's size.
    assert query["file_bytes"] == sum(json.loads(line)["file"]["size"] for line in files) > 0
    # A warm query sends pre-encoded lines (signed and spliced): its bytes count all the same.
    again = httpx.post(limited.endpoint + QUERY, json={}, headers=headers)
    assert audit_record(limited, again.headers["x-request-id"])["file_bytes"] == query["file_bytes"]
    assert query["bytes"] == len(response.content)
    assert query["duration_ms"] > 0 and query["client"] == "127.0.0.1"
    refused = [r for r in records if r["status"] == 401]
    # A bearer token no token holds is recorded as "unknown", never by its secret.
    assert refused and all(r["error_code"] == "UNAUTHENTICATED" for r in refused)
    assert all(r.get("token_id") in (None, "unknown") for r in refused)

    metrics = httpx.get(limited.server.url + "/metrics").text
    assert re.search(
        r'sharing_requests_total\{method="POST",route="table_query",status="200"\} [1-9]', metrics
    )
    assert re.search(r'sharing_files_served_total\{route="table_query"\} [1-9]', metrics)
    assert re.search(r'sharing_errors_total\{code="UNAUTHENTICATED"\} [1-9]', metrics)
    assert 'sharing_request_duration_seconds_bucket{le="0.1",route="table_query"}' in metrics
    assert '"limited"' not in metrics and "share=" not in metrics  # no share or table names


def test_no_secret_reaches_any_log(
    limited: Deployment, tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets: list[str] = [ADMIN_TOKEN, limited.secret.decode()]
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    issued = httpx.post(
        limited.server.url + "/admin/v1/shares/limited/tokens", json={"expires": "1h"}, headers=admin
    ).json()
    secrets.append(issued["token"])
    profile = tmp_path / "oauth.share"
    client = httpx.post(limited.server.url + "/admin/v1/shares/limited/oauth-clients", json={}, headers=admin)
    profile.write_text(json.dumps(client.json()["profile"]))
    secrets.append(client.json()["clientSecret"])
    access = httpx.post(
        limited.endpoint + "/oauth/token",
        auth=(client.json()["clientId"], client.json()["clientSecret"]),
        data={"grant_type": "client_credentials"},
    ).json()["access_token"]
    secrets.append(access)
    wrong = "dss_wrong-secret-that-must-not-be-logged-either"
    secrets.append(wrong)
    get(limited, "/shares", wrong)
    response = httpx.post(limited.endpoint + QUERY, json={}, headers={"Authorization": f"Bearer {access}"})
    for line in response.text.splitlines():
        action = json.loads(line)
        if "file" in action:
            query = urlsplit(action["file"]["url"]).query
            secrets.append(query)  # the signature of a file URL
            httpx.get(action["file"]["url"]).raise_for_status()  # served, and logged, by our /files route
    frame = delta_sharing.load_as_pandas(f"{profile}#limited.s.t")
    assert len(frame) > 0
    httpx.get(limited.endpoint + "/shares", headers={"Authorization": f"Bearer {issued['token']}"})

    out, err = capfd.readouterr()
    logs = "\n".join(
        [
            (limited.tmp / "audit.log").read_text(),
            out,
            err,
            # The server's loggers only: the clients' own debug logs print the URLs they fetch.
            "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(SERVER_LOGGERS)),
        ]
    )
    assert '"route":"table_query"' in logs  # the logs were captured at all
    for secret in secrets:
        assert secret not in logs
    assert "X-Amz-Signature" not in logs and "sig=" not in logs


def test_behind_a_proxy_the_audit_log_names_the_client(tmp_path: Path) -> None:
    deployment = deploy(
        tmp_path, {"type": "local", "root": str(tmp_path / "buckets")}, env={"SHARING_SERVER_PROXY_HOPS": "1"}
    )
    try:
        headers = {"X-Forwarded-For": "127.0.0.8, 127.0.0.9", "X-Forwarded-Proto": "https"}
        response = httpx.get(deployment.endpoint + "/shares", headers=headers)
        assert response.status_code == 401
        assert response.headers["strict-transport-security"] == "max-age=31536000"
        record = audit_record(deployment, response.headers["x-request-id"])
        assert record["client"] == "127.0.0.9"  # one trusted hop: the address the proxy saw
    finally:
        deployment.server.stop()
        deployment.store.close()
