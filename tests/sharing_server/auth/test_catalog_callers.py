"""Bearer tokens at the writable catalog (`/_iceberg`): the admin token is checked, throttled and
audited as at `/admin` and the console, and a catalog user's own token never counts against it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from share_store.catalog.users import CatalogUsers
from tests.conftest import ADMIN_TOKEN, Deployment, audit_lines, audit_records, served_locally

WRONG = "dsa_not-the-admin-token"


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Deployment]:
    """A server of its own for each test: the throttle counts per process, and every test here fails
    from the one address, 127.0.0.1."""
    with served_locally(tmp_path, ADMIN_TOKEN, {"SHARING_LIMITS_PER_TOKEN_RPS": "0"}) as deployment:
        yield deployment


def warehouses(server: Deployment, token: str) -> httpx.Response:
    return httpx.get(
        f"{server.server.url}/_iceberg/v1/warehouses", headers={"Authorization": f"Bearer {token}"}
    )


def catalog_token(server: Deployment) -> str:
    user = CatalogUsers(server.store.transactions, server.secret).create("alice")
    answer = httpx.post(
        f"{server.server.url}/_iceberg/v1/oauth/tokens",
        data={
            "grant_type": "client_credentials",
            "client_id": user.access_key,
            "client_secret": user.secret_key,
        },
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def test_wrong_admin_tokens_at_the_catalog_are_throttled_like_the_admin_api(fresh_server: Deployment) -> None:
    answers = [warehouses(fresh_server, WRONG) for _ in range(10)]
    assert [answer.status_code for answer in answers] == [401] * 10
    assert answers[0].json()["error"]["type"] == "NotAuthorizedException"

    refused = warehouses(fresh_server, WRONG)
    assert refused.status_code == 429, refused.text
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    error = refused.json()["error"]
    assert error["type"] == "TooManyRequestsException" and error["code"] == 429
    assert "too many wrong admin tokens from this address" in error["message"]
    # The address waits out the window, the right admin token included, here and at /admin.
    assert warehouses(fresh_server, ADMIN_TOKEN).status_code == 429
    admin = httpx.get(
        f"{fresh_server.server.url}/admin/v1/shares", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert admin.status_code == 429

    assert len(audit_lines(fresh_server, lambda r: r.get("sign_in") == "failed", 10)) == 10
    assert audit_lines(
        fresh_server, lambda r: r.get("sign_in") == "throttled" and "_iceberg" in r.get("path", "")
    )
    assert not any(WRONG in json.dumps(record) for record in audit_records(fresh_server))


def test_catalog_tokens_are_not_admin_token_attempts(fresh_server: Deployment) -> None:
    token = catalog_token(fresh_server)
    # Far more requests than the throttle allows failures: none of them is counted as one.
    for _ in range(15):
        assert warehouses(fresh_server, token).status_code == 200
    assert warehouses(fresh_server, ADMIN_TOKEN).status_code == 200
    # The requests were made one after another, so once the last one's line is written all are.
    assert audit_lines(fresh_server, lambda r: r.get("catalog_user") == "admin")
    assert not [r for r in audit_records(fresh_server) if r.get("sign_in") in ("failed", "throttled")]


def test_a_throttled_address_keeps_its_valid_catalog_token(fresh_server: Deployment) -> None:
    token = catalog_token(fresh_server)
    for _ in range(11):
        warehouses(fresh_server, WRONG)
    assert warehouses(fresh_server, WRONG).status_code == 429
    # The throttle guards the admin token; a catalog token is HMAC-checked, and not guessed.
    assert warehouses(fresh_server, token).status_code == 200
