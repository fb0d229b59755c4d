"""The recipients' read-only Iceberg REST catalog (`/iceberg`) over HTTP, as a share's token sees it:
the configuration, the share's namespaces and tables, the spec's error model for whatever it is
refused, writes refused with no effect, OAuth client credentials, and the signer's refusals.

Its tables are on local storage, which only the Delta Sharing protocol serves: loading one is
refused with the reason. Reads through S3 (signed or with vended keys) are test_delegation.py's
and tests/end_to_end/test_iceberg_rest.py's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pyarrow as pa
import pytest

from share_store.model import TableSpec
from sharing_server.iceberg_shares.scan_plans import PLAN_ENDPOINTS
from tests.conftest import Deployment

CUSTOMERS = pa.table({"custkey": pa.array([1, 2], pa.int64()), "name": ["ann", "bob"]})


@pytest.fixture(scope="module", autouse=True)
def shares(server: Deployment) -> None:
    """Share `ice` with tables `tpch.customer` and `tpch.orders` and share `other` with
    `sales.private`, all Iceberg tables of the provider's own catalog on local storage."""
    catalog = server.catalogs.catalog("default")
    catalog.create_namespace("tpch")
    for name in ("customer", "orders", "private"):
        catalog.create_table(f"tpch.{name}", CUSTOMERS.schema).append(CUSTOMERS)
    server.store.create_share("ice", [
        TableSpec.parse("tpch:customer:uniform:default:tpch:customer"),
        TableSpec.parse("tpch:orders:uniform:default:tpch:orders"),
    ])  # fmt: skip
    server.store.create_share("other", [TableSpec.parse("sales:private:uniform:default:tpch:private")])


def iceberg(server: Deployment, method: str, path: str, token: str | None, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.request(method, f"{server.server.url}/iceberg{path}", headers=headers, **kwargs)


def iceberg_error(answer: httpx.Response, status: int, kind: str) -> str:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["type"]) == (status, kind), error
    return str(error["message"])


def test_the_configuration_lists_read_endpoints_only(server: Deployment) -> None:
    answer = iceberg(server, "GET", "/v1/config", server.token("ice"))
    assert answer.status_code == 200
    body = answer.json()
    assert body["defaults"] == {} and body["overrides"] == {"namespace-separator": "%1F"}
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in body["endpoints"]
    # The spec's signer is a POST that signs reads only; scan planning's POSTs and DELETE (a
    # cancel) plan reads and change nothing.
    writes = [e for e in body["endpoints"] if e.split()[0] in ("POST", "DELETE", "PUT")]
    assert writes == ["POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"] + [
        e for e in PLAN_ENDPOINTS if not e.startswith("GET")
    ]
    assert not [e for e in body["endpoints"] if e.endswith("/credentials")]  # vending is off


def test_a_token_sees_its_shares_namespaces_and_tables_only(server: Deployment) -> None:
    ice, other = server.token("ice"), server.token("other")
    assert iceberg(server, "GET", "/v1/namespaces", ice).json() == {"namespaces": [["tpch"]]}
    assert iceberg(server, "GET", "/v1/namespaces", other).json() == {"namespaces": [["sales"]]}
    assert iceberg(server, "GET", "/v1/namespaces/tpch", ice).json() == {
        "namespace": ["tpch"],
        "properties": {},
    }
    assert iceberg(server, "HEAD", "/v1/namespaces/tpch", ice).status_code == 204
    listed = iceberg(server, "GET", "/v1/namespaces/tpch/tables", ice).json()["identifiers"]
    assert sorted(t["name"] for t in listed) == ["customer", "orders"]
    assert iceberg(server, "HEAD", "/v1/namespaces/tpch/tables/customer", ice).status_code == 204
    iceberg_error(iceberg(server, "GET", "/v1/namespaces/tpch", other), 404, "NoSuchNamespaceException")
    iceberg_error(
        iceberg(server, "GET", "/v1/namespaces/tpch/tables", other), 404, "NoSuchNamespaceException"
    )
    iceberg_error(
        iceberg(server, "GET", "/v1/namespaces/sales/tables/customer", other), 404, "NoSuchTableException"
    )


def test_local_storage_is_refused_with_the_reason(server: Deployment) -> None:
    answer = iceberg(server, "GET", "/v1/namespaces/tpch/tables/customer", server.token("ice"))
    assert answer.status_code == 406
    assert "local directory" in answer.json()["error"]["message"]


def test_requests_without_a_valid_token_are_refused(server: Deployment) -> None:
    for path in ("/v1/config", "/v1/namespaces", "/v1/namespaces/tpch/tables/customer"):
        for token in ("nope", None):
            iceberg_error(iceberg(server, "GET", path, token), 401, "NotAuthorizedException")
    expired = server.token("ice", expires=timedelta(seconds=-1))
    iceberg_error(iceberg(server, "GET", "/v1/namespaces", expired), 401, "NotAuthorizedException")


def test_a_named_recipients_token_is_sent_to_its_shares_tokens(server: Deployment) -> None:
    server.store.create_recipient("acme")
    server.store.grant_share("acme", "ice")
    _, secret = server.store.create_recipient_token("acme", timedelta(hours=1))
    message = iceberg_error(iceberg(server, "GET", "/v1/namespaces", secret), 403, "ForbiddenException")
    assert "one share per token" in message


def test_the_catalog_is_read_only(server: Deployment) -> None:
    ice = server.token("ice")
    writes = [
        ("POST", "/v1/namespaces", {"namespace": ["new"]}),
        ("DELETE", "/v1/namespaces/tpch", None),
        ("POST", "/v1/namespaces/tpch/tables", {"name": "t", "schema": {"type": "struct", "fields": []}}),
        ("POST", "/v1/namespaces/tpch/tables/customer", {"requirements": [], "updates": []}),
        ("DELETE", "/v1/namespaces/tpch/tables/customer", None),
        ("POST", "/v1/tables/rename", {}),
        ("POST", "/v1/namespaces/tpch/register", {}),
        ("POST", "/v1/transactions/commit", {}),
    ]
    for method, path, body in writes:
        iceberg_error(iceberg(server, method, path, ice, json=body), 403, "ForbiddenException")
    iceberg_error(iceberg(server, "GET", "/v1/views", ice), 404, "NoSuchEndpointException")
    assert iceberg(server, "GET", "/v1/namespaces", ice).json() == {"namespaces": [["tpch"]]}
    listed = iceberg(server, "GET", "/v1/namespaces/tpch/tables", ice).json()["identifiers"]
    assert sorted(t["name"] for t in listed) == ["customer", "orders"]


def test_oauth_clients_exchange_credentials_for_catalog_tokens(server: Deployment) -> None:
    client, secret = server.store.create_oauth_client("ice", timedelta(hours=1), "engine")
    form = {"grant_type": "client_credentials", "client_id": client.id, "client_secret": secret}
    answer = iceberg(server, "POST", "/v1/oauth/tokens", None, data=form)
    assert answer.status_code == 200, answer.text
    issued = answer.json()
    assert issued["token_type"].lower() == "bearer"
    namespaces = iceberg(server, "GET", "/v1/namespaces", issued["access_token"])
    assert namespaces.json() == {"namespaces": [["tpch"]]}
    wrong = {**form, "client_secret": "not-it"}
    assert iceberg(server, "POST", "/v1/oauth/tokens", None, data=wrong).status_code == 401


def test_the_signer_refuses_bad_requests_and_tokens(server: Deployment) -> None:
    iceberg_error(iceberg(server, "POST", "/v1/aws/s3/sign", server.token("ice"), content=b"{not json"),
                  400, "BadRequestException")  # fmt: skip
    body = {"method": "GET", "region": "us-east-1", "uri": "https://s3.example.com/b/k", "headers": {}}
    for token in ("nope", None):
        iceberg_error(iceberg(server, "POST", "/v1/aws/s3/sign", token, json=body), 403, "ForbiddenException")
