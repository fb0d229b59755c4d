"""Every error under the Iceberg catalogs' prefixes in the Iceberg REST model; Delta Sharing's its own.

A client of `/iceberg` or `/_iceberg` reads `{"error": {"message", "type", "code"}}`, whatever
answered: a handler's refusal, a 500 of an error no handler expected, an outage's 503, a
middleware's refusal before routing, Starlette's own 405, a 401 with its `WWW-Authenticate`, a
429 with its `Retry-After`; HEAD gets no body, and the audit line names the error's code. The
same failures under `/delta-sharing` keep `{"errorCode", "message"}`. Also with the app mounted
under a prefix of another app's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import make_url
from starlette.applications import Starlette
from starlette.routing import Mount

from share_store.authentication.tokens import hash_secret
from testbed.seaweed import free_port
from tests.conftest import ADMIN_TOKEN, Deployment, audit_record, deploy
from tests.live_server import LiveServer
from tests.postgres import Postgres

INTERNAL = "The server failed to process the request."


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """A per-token request limit of 20 a second, which the rate-limited request here goes past."""
    return {"SHARING_LIMITS_PER_TOKEN_RPS": "20"}


@pytest.fixture(scope="module", autouse=True)
def share(server: Deployment) -> None:
    """The share `errors`, empty."""
    server.store.create_share("errors")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def admin() -> dict[str, str]:
    return bearer(ADMIN_TOKEN)


def iceberg_error(response: httpx.Response, status: int, kind: str, message: str | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code"}, body
    assert body["error"]["code"] == status and body["error"]["type"] == kind, body
    if message is not None:
        assert body["error"]["message"] == message, body


def delta_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"errorCode", "message"} and body["errorCode"] == code, body


def audited_code(server: Deployment, response: httpx.Response) -> Any:
    """The audit line's error code for `response`, whose status the line names too."""
    record = audit_record(server, response.headers["x-request-id"])
    assert record["status"] == response.status_code
    return record.get("error_code")


def services(server: Deployment) -> Any:
    return server.server.app.state.services  # type: ignore[attr-defined]


# -- a 500: an error no handler expected ---------------------------------------------------


def broken(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("a bug, whose message no client may read")


def test_an_unexpected_error_under_the_writable_catalog_is_an_iceberg_500(
    server: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services(server).callers, "authenticate", broken)
    url = f"{server.server.url}/_iceberg/v1"
    answer = httpx.get(f"{url}/warehouses", headers=admin())
    iceberg_error(answer, 500, "InternalServerError", INTERNAL)
    assert "bug" not in answer.text
    assert audited_code(server, answer) == "INTERNAL_ERROR"
    head = httpx.head(f"{url}/warehouses/anything", headers=admin())
    assert head.status_code == 500 and head.content == b""


def test_an_unexpected_error_under_the_recipients_catalog_is_an_iceberg_500_and_delta_sharings_its_own(
    server: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = server.token("errors")
    monkeypatch.setattr(server.store, "authenticate", broken)
    answer = httpx.get(f"{server.server.url}/iceberg/v1/namespaces", headers=bearer(token))
    iceberg_error(answer, 500, "InternalServerError", INTERNAL)
    assert audited_code(server, answer) == "INTERNAL_ERROR"
    head = httpx.head(f"{server.server.url}/iceberg/v1/namespaces/default", headers=bearer(token))
    assert head.status_code == 500 and head.content == b""
    shares = httpx.get(f"{server.endpoint}/shares", headers=bearer(token))
    delta_error(shares, 500, "INTERNAL_ERROR")


# -- answers of Starlette and the middleware, before any handler ---------------------------


@pytest.mark.parametrize("prefix", ["/iceberg", "/_iceberg"])
def test_a_method_no_route_takes_is_an_iceberg_405_with_allow(server: Deployment, prefix: str) -> None:
    answer = httpx.request("OPTIONS", f"{server.server.url}{prefix}/v1/config")
    iceberg_error(answer, 405, "MethodNotAllowedException")
    assert "GET" in answer.headers["allow"]
    assert audited_code(server, answer) == "METHOD_NOT_ALLOWED"
    delta_error(httpx.request("OPTIONS", f"{server.endpoint}/shares"), 405, "METHOD_NOT_ALLOWED")


@pytest.mark.parametrize("prefix", ["/iceberg", "/_iceberg"])
def test_a_middlewares_refusal_is_in_the_iceberg_model(server: Deployment, prefix: str) -> None:
    two = httpx.Headers([("Authorization", "Bearer one"), ("Authorization", "Bearer two")])
    answer = httpx.get(f"{server.server.url}{prefix}/v1/config", headers=two)
    iceberg_error(answer, 400, "BadRequestException", "send one Authorization header, not several")
    assert audited_code(server, answer) == "MALFORMED_REQUEST"
    delta_error(httpx.get(f"{server.endpoint}/shares", headers=two), 400, "MALFORMED_REQUEST")
    too_large = b"x" * (server.config.options.max_body_bytes + 1)
    answer = httpx.post(f"{server.server.url}{prefix}/v1/oauth/tokens", content=too_large)
    iceberg_error(answer, 413, "RequestTooLargeException")
    assert audited_code(server, answer) == "REQUEST_TOO_LARGE"


def test_a_refused_token_is_an_iceberg_401_with_www_authenticate(server: Deployment) -> None:
    for url in (f"{server.server.url}/_iceberg/v1/warehouses", f"{server.server.url}/iceberg/v1/namespaces"):
        answer = httpx.get(url, headers=bearer(f"no-one-holds-this-{url[-6:]}"))
        iceberg_error(answer, 401, "NotAuthorizedException")
        assert answer.headers["www-authenticate"] == "Bearer"
        assert audited_code(server, answer) == "UNAUTHENTICATED"


def test_a_rate_limited_request_is_an_iceberg_429_with_retry_after(server: Deployment) -> None:
    token = server.token("errors")
    with httpx.Client(base_url=server.server.url, headers=bearer(token)) as client:
        for _ in range(1000):  # the bucket's burst first
            answer = client.get("/iceberg/v1/config")
            if answer.status_code == 429:
                break
    iceberg_error(answer, 429, "TooManyRequestsException")
    assert int(answer.headers["retry-after"]) >= 1
    assert audited_code(server, answer) == "TOO_MANY_REQUESTS"


def test_the_catalogs_own_refusals_keep_their_types_and_now_name_their_code(server: Deployment) -> None:
    missing = httpx.get(f"{server.server.url}/_iceberg/v1/warehouses/nowhere", headers=admin())
    iceberg_error(missing, 404, "NoSuchWarehouseException")
    assert audited_code(server, missing) == "RESOURCE_DOES_NOT_EXIST"
    unknown = httpx.get(f"{server.server.url}/_iceberg/v1/nowhere/at/all", headers=admin())
    iceberg_error(unknown, 404, "NoSuchEndpointException")


# -- the app mounted under another's prefix ------------------------------------------------


def test_mounted_under_a_prefix_the_catalogs_errors_keep_their_model(server: Deployment) -> None:
    outer = Starlette(routes=[Mount("/outer", app=server.server.app)])
    with LiveServer(outer, free_port()) as mounted:
        for prefix in ("/iceberg", "/_iceberg"):
            answer = httpx.request("OPTIONS", f"{mounted.url}/outer{prefix}/v1/config")
            iceberg_error(answer, 405, "MethodNotAllowedException")
        refused = httpx.get(f"{mounted.url}/outer/_iceberg/v1/warehouses", headers=bearer("nobody"))
        iceberg_error(refused, 401, "NotAuthorizedException")
        delta_error(httpx.get(f"{mounted.url}/outer/delta-sharing/shares"), 401, "UNAUTHENTICATED")


# -- a 503: the share store's database is gone -----------------------------------------------


def rename_database(postgres: Postgres, old: str, new: str) -> None:
    with postgres.connect() as conn:
        for _ in range(50):  # the pool may reconnect between the two statements
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (old,))
            try:
                conn.execute(f'ALTER DATABASE "{old}" RENAME TO "{new}"')
                return
            except Exception:  # still in use: terminate again
                time.sleep(0.05)
    raise AssertionError("could not rename the database")


def test_a_share_store_outage_is_an_iceberg_503_under_both_catalogs(
    tmp_path: Path, postgres: Postgres, postgres_url: str
) -> None:
    database = make_url(postgres_url).database
    assert database is not None
    env = {"SHARING_STORE_URL": postgres_url, "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN)}
    deployment = deploy(tmp_path, {"type": "local", "root": str(tmp_path / "buckets")}, env=env)
    try:
        deployment.store.create_share("outage")
        token = deployment.token("outage")
        catalogs = (
            (f"{deployment.server.url}/_iceberg/v1/warehouses", admin()),
            (f"{deployment.server.url}/iceberg/v1/namespaces", bearer(token)),
        )
        for url, headers in catalogs:
            assert httpx.get(url, headers=headers).status_code == 200
        away = f"away_{database[:40]}"  # names are cut at 63 characters
        rename_database(postgres, database, away)
        try:
            for url, headers in catalogs:
                answer = httpx.get(url, headers=headers)
                iceberg_error(
                    answer,
                    503,
                    "ServiceUnavailableException",
                    "the share store is unreachable; try again later",
                )
                assert audited_code(deployment, answer) == "TEMPORARILY_UNAVAILABLE"
                assert answer.headers["retry-after"] == "5"  # an outage's: it names no wait of its own
            shares = httpx.get(f"{deployment.endpoint}/shares", headers=bearer(token))
            delta_error(shares, 503, "TEMPORARILY_UNAVAILABLE")
            assert shares.headers["retry-after"] == "5" and "x-request-id" in shares.headers
        finally:
            rename_database(postgres, away, database)
        for url, headers in catalogs:
            assert httpx.get(url, headers=headers).status_code == 200
    finally:
        deployment.server.stop()
        deployment.store.close()
