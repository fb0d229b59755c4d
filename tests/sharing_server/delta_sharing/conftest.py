"""The share that the test_routes_*.py here read over real HTTP, and their helpers."""

from __future__ import annotations

import json

import httpx
import pytest

from share_store.model import TableSpec
from tests.conftest import Deployment

TABLES = {
    "t_part": "delta-0.8.0-partitioned",
    "t_simple": "simple_table",
    "t_checkpoint": "simple_table_with_checkpoint",
    "t_dv": "table-with-dv-small",
    "t_cdf": "cdf-table",
}


@pytest.fixture(scope="package")
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
