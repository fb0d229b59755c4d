"""Both Iceberg catalogs' `/v1/config` `endpoints` against their route tables (issue 52).

The Java client (1.9+), DuckDB and pyiceberg decide what to call from `endpoints`: one listed but
not served is a client that fails, one served but not listed a client that falls back for nothing.
So, for `/_iceberg` and `/iceberg` (the share token's own form and a recipient's `shares/<share>`
form), with vending and signing on and off:

* every advertised `METHOD /v1/{prefix}/...` is served by a route of the mount for that method
  (not by its catch-all, which answers every path);
* every operation of the Iceberg REST spec (1.11 and main, `SPEC` below) that the route table
  serves is advertised, unless the server answers it, while a setting is off, with a refusal that
  names the setting (the credentials refresh and the writers' signer are routed either way).

The route tables are read from Starlette, so routes added later (scan planning, anything else of
the spec) are checked without this test knowing of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from share_store.authentication.tokens import hash_secret
from share_store.model import TableSpec
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.storage.sts_vending import VendingSettings
from sharing_server import paths
from sharing_server.app import create_app
from sharing_server.service_options import ServiceOptions
from tests.sharing_server.catalog.served import ADMIN, SCHEMA, SECRET, V2, WH

#: Every operation of the Iceberg REST catalog spec under `/v1/{prefix}` (open-api/
#: rest-catalog-open-api.yaml, apache/iceberg main of 2026-08-21: 1.11 and what main added).
SPEC_ENDPOINTS = frozenset(
    line.strip()
    for line in """
    GET /v1/{prefix}/namespaces
    POST /v1/{prefix}/namespaces
    GET /v1/{prefix}/namespaces/{namespace}
    HEAD /v1/{prefix}/namespaces/{namespace}
    DELETE /v1/{prefix}/namespaces/{namespace}
    POST /v1/{prefix}/namespaces/{namespace}/properties
    GET /v1/{prefix}/namespaces/{namespace}/tables
    POST /v1/{prefix}/namespaces/{namespace}/tables
    GET /v1/{prefix}/namespaces/{namespace}/functions
    GET /v1/{prefix}/namespaces/{namespace}/functions/{function}
    POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan
    GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}
    DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}
    POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks
    POST /v1/{prefix}/namespaces/{namespace}/register
    GET /v1/{prefix}/namespaces/{namespace}/tables/{table}
    POST /v1/{prefix}/namespaces/{namespace}/tables/{table}
    DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}
    HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}
    POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister
    GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials
    POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign
    POST /v1/{prefix}/tables/rename
    POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics
    POST /v1/{prefix}/transactions/commit
    GET /v1/{prefix}/namespaces/{namespace}/views
    POST /v1/{prefix}/namespaces/{namespace}/views
    GET /v1/{prefix}/namespaces/{namespace}/views/{view}
    POST /v1/{prefix}/namespaces/{namespace}/views/{view}
    DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}
    HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}
    POST /v1/{prefix}/views/rename
    POST /v1/{prefix}/namespaces/{namespace}/register-view
    """.strip().splitlines()
)
#: What a refusal must name for a routed endpoint to count as not served while it is off.
SETTINGS = ("access_delegation", "credential_vending")
#: A value for each path parameter of a probe.
PROBE_VALUES = {"namespace": "ns", "table": "t", "view": "v", "plan-id": "p", "function": "f"}
SHARE = "ads"
CATCH_ALL = "{rest:path}"


def _spec_path(route_path: str, route_prefix: str) -> str:
    """A route's path as the spec writes it: its `{prefix}` part (`/v1/{prefix}`, `/v1/shares/{share}`
    or none at all) as `/v1/{prefix}`, and Starlette's `plan_id` as the spec's `plan-id`."""
    path = "/v1/{prefix}" + route_path.removeprefix(route_prefix)
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: "{" + m.group(1).replace("_", "-") + "}", path)


def served(mount: Mount, route_prefix: str) -> set[str]:
    """Every `METHOD path` the mount's routes under `route_prefix` serve, in the spec's form (a GET's
    HEAD too, as Starlette serves it: only the spec's own HEADs are compared)."""
    found: set[str] = set()
    others = ("/v1/shares/",) if route_prefix == "/v1" else ()
    for route in mount.routes:
        path = getattr(route, "path", "")
        if not isinstance(route, Route) or CATCH_ALL in path or not path.startswith(route_prefix + "/"):
            continue
        if path.startswith(others) or path.removeprefix(route_prefix) in ("/config", "/oauth/tokens"):
            continue
        for method in route.methods or ():
            found.add(f"{method} {_spec_path(path, route_prefix)}")
    return found


@dataclass
class Catalogs:
    app: Starlette
    client: TestClient
    own_token: str  # a share's own token: `/iceberg`'s URLs with no prefix
    recipient_token: str  # a named recipient's: `/iceberg/v1/shares/<share>/...`

    def mount(self, prefix: str) -> Mount:
        return next(r for r in self.app.routes if isinstance(r, Mount) and r.path == prefix)


@pytest.fixture(params=[False, True], ids=["delegation-off", "delegation-on"])
def catalogs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalogs]:
    on: bool = request.param
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    (tmp_path / "buckets").mkdir()
    storage = LocalStorage(tmp_path / "buckets", UrlSigner(SECRET, "http://localhost"))
    options = ServiceOptions(
        admin_token_hash=hash_secret(ADMIN),
        per_token_rps=0,
        warm_on_start=False,
        access_delegation=("vended-credentials", "remote-signing") if on else (),
        vending=VendingSettings(mode="sts" if on else "off"),
    )
    app = create_app(store, storage, SECRET, options=options)
    try:
        with TestClient(app) as client:
            admin = {"Authorization": f"Bearer {ADMIN}"}
            assert client.post("/_iceberg/v1/warehouses", json={"name": WH}, headers=admin).status_code == 200
            assert client.post(
                f"/_iceberg/v1/{WH}/namespaces", json={"namespace": ["ns"]}, headers=admin
            ).is_success
            table = {"name": "t", "schema": SCHEMA, "properties": V2}
            made = client.post(f"/_iceberg/v1/{WH}/namespaces/ns/tables", json=table, headers=admin)
            assert made.status_code == 200, made.text
            store.create_share(SHARE, [TableSpec.parse(f"ns:t:uniform:{WH}:ns:t")])
            store.create_recipient("acme")
            store.grant_share("acme", SHARE)
            _, own = store.create_token(SHARE, timedelta(hours=1))
            _, recipient = store.create_recipient_token("acme", timedelta(hours=1))
            yield Catalogs(app, client, own, recipient)
    finally:
        store.close()


def probe(catalogs: Catalogs, base: str, endpoint: str, token: str, prefix: str) -> tuple[int, str]:
    """Call `endpoint` (`METHOD /v1/{prefix}/...`) at `base` with placeholder path values: its status
    and error message."""
    method, path = endpoint.split(" ", 1)
    url = base + path.replace("/v1/{prefix}", "/v1" + prefix)
    for name, value in PROBE_VALUES.items():
        url = url.replace("{" + name + "}", value)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    answer = catalogs.client.request(method, url, content=b"{}", headers=headers)
    message = answer.json().get("error", {}).get("message", "") if answer.content else ""
    return answer.status_code, str(message)


def check(
    catalogs: Catalogs, base: str, config_path: str, token: str, route_prefix: str, prefix: str
) -> None:
    config = catalogs.client.get(base + config_path, headers={"Authorization": f"Bearer {token}"})
    assert config.status_code == 200, config.text
    advertised = set(config.json()["endpoints"])
    routed = served(catalogs.mount(base), route_prefix)
    assert advertised <= routed, f"advertised, not served: {sorted(advertised - routed)}"
    for endpoint in sorted((routed & SPEC_ENDPOINTS) - advertised):
        status, message = probe(catalogs, base, endpoint, token, prefix)
        assert 400 <= status < 500 and any(s in message for s in SETTINGS), (
            f"served, not advertised: {endpoint} answers {status} {message!r}"
        )
    assert len(advertised) == len(config.json()["endpoints"])  # each once


def test_the_writers_catalog_advertises_exactly_what_it_serves(catalogs: Catalogs) -> None:
    check(catalogs, paths.WAREHOUSE_PREFIX, f"/v1/config?warehouse={WH}", ADMIN, "/v1/{prefix}", "/" + WH)


def test_the_recipients_catalog_advertises_exactly_what_it_serves(catalogs: Catalogs) -> None:
    # A share's own token at the URLs with no prefix; a named recipient's at the share's own.
    check(catalogs, paths.ICEBERG_PREFIX, "/v1/config", catalogs.own_token, "/v1", "")
    share_config = f"/v1/config?warehouse={SHARE}"
    check(
        catalogs,
        paths.ICEBERG_PREFIX,
        share_config,
        catalogs.recipient_token,
        "/v1/shares/{share}",
        f"/shares/{SHARE}",
    )


def test_the_comparison_sees_a_route_it_is_not_told_of(catalogs: Catalogs) -> None:
    """The route table is read, not listed here: a spec route of the mount counts as served."""
    routed = served(catalogs.mount(paths.WAREHOUSE_PREFIX), "/v1/{prefix}")
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}" in routed
    assert not any(CATCH_ALL in endpoint or "{rest}" in endpoint for endpoint in routed)
    assert _spec_path(
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan_id}", "/v1/{prefix}"
    ) == ("/v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}")
    assert _spec_path("/v1/shares/{share}/namespaces/{namespace}", "/v1/shares/{share}") == (
        "/v1/{prefix}/namespaces/{namespace}"
    )
