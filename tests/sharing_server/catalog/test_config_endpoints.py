"""`GET /v1/config` lists exactly the endpoints the own warehouses serve under `/v1/{prefix}`: the
Java client and DuckDB decide what to call from it, so a listed endpoint that is not served, or a
served one that is not listed, is a client that fails or falls back for nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from share_store.authentication.tokens import hash_secret
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server import paths
from sharing_server.app import create_app
from sharing_server.catalog.idempotent_routes import MUTATING_METHODS, IdempotentEndpoint
from sharing_server.service_options import ServiceOptions
from tests.sharing_server.catalog.served import ADMIN, SECRET, WH

#: Served under `/v1/{prefix}` but no catalog endpoint of the spec: the writers' signer, whose
#: address comes with a table load (`s3.signer.endpoint`), not from /v1/config, and maintenance
#: (S3 Tables' API, not Iceberg's: no engine calls it), and the undrop of dropped tables and views
#: (Lakekeeper's, in its management API: no engine calls it either).
NOT_LISTED = {
    paths.WAREHOUSE_S3_SIGN,
    paths.WAREHOUSE_UNDROP,
    paths.WAREHOUSE_VIEW_UNDROP,
    paths.WAREHOUSE_TABLE_MAINTENANCE,
    paths.WAREHOUSE_TABLE_MAINTENANCE_KIND,
    paths.WAREHOUSE_TABLE_MAINTENANCE_RUN,
    paths.WAREHOUSE_TABLE_MAINTENANCE_STATUS,
}


def served_endpoints(app: object) -> set[str]:
    mount = next(r for r in app.routes if isinstance(r, Mount) and r.path == paths.WAREHOUSE_PREFIX)  # type: ignore[attr-defined]
    found = set()
    for route in mount.routes:
        if not isinstance(route, Route) or not route.path.startswith("/v1/{prefix}/"):
            continue
        if route.path in NOT_LISTED:
            continue
        # The spec spells the plan's id `{plan-id}`, which is no name of a Starlette parameter.
        path = route.path.replace("{plan_id}", "{plan-id}")
        for method in route.methods or ():
            head_served = route.path.endswith("}") and route.path != paths.WAREHOUSE_TABLE_PLAN_ID
            if method != "HEAD" or "GET" not in (route.methods or ()) or head_served:
                found.add(f"{method} {path}")
    return found


def keyed_mutations(app: object) -> set[str]:
    """The endpoints under `/v1/{prefix}` whose handler takes an `Idempotency-Key`."""
    mount = next(r for r in app.routes if isinstance(r, Mount) and r.path == paths.WAREHOUSE_PREFIX)  # type: ignore[attr-defined]
    return {
        f"{method} {route.path.replace('{plan_id}', '{plan-id}')}"
        for route in mount.routes
        if isinstance(route, Route)
        and isinstance(getattr(route.endpoint, "__self__", None), IdempotentEndpoint)
        for method in route.methods or ()
    }


@pytest.mark.parametrize("delegation", [(), ("vended-credentials",), ("remote-signing",)])
def test_config_lists_exactly_what_is_served(tmp_path: Path, delegation: tuple[str, ...]) -> None:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    (tmp_path / "buckets").mkdir()
    storage = LocalStorage(tmp_path / "buckets", UrlSigner(SECRET, "http://localhost"))
    options = ServiceOptions(
        admin_token_hash=hash_secret(ADMIN),
        per_token_rps=0,
        warm_on_start=False,
        access_delegation=delegation,
    )
    app = create_app(store, storage, SECRET, options=options)
    try:
        with TestClient(app) as client:
            headers = {"Authorization": f"Bearer {ADMIN}"}
            assert (
                client.post("/_iceberg/v1/warehouses", json={"name": WH}, headers=headers).status_code == 200
            )
            config = client.get(f"/_iceberg/v1/config?warehouse={WH}", headers=headers).json()
        listed = set(config["endpoints"])
        served = served_endpoints(app)
        if "vended-credentials" not in delegation:
            served.discard(f"GET {paths.WAREHOUSE_TABLE_CREDENTIALS}")
        if "remote-signing" not in delegation:
            served.discard(f"POST {paths.WAREHOUSE_TABLE_SIGN}")
        assert listed == served
        # The lifetime is advertised, and every mutation the config lists takes a key but metrics
        # reports and the signer (the spec declares none there: neither changes the catalog).
        assert config["idempotency-key-lifetime"] == "PT30M"
        mutations = {e for e in listed if e.split()[0] in MUTATING_METHODS}
        unkeyed = {e for e in mutations - keyed_mutations(app) if not e.endswith("/sign")}
        assert unkeyed == {f"POST {paths.WAREHOUSE_TABLE_METRICS}"}
    finally:
        store.close()


@pytest.mark.parametrize(("minutes", "advertised"), [(0, None), (90, "PT90M")])
def test_the_key_lifetime_advertised_is_the_one_set_and_none_when_keys_are_off(
    tmp_path: Path, minutes: int, advertised: str | None
) -> None:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    (tmp_path / "buckets").mkdir()
    storage = LocalStorage(tmp_path / "buckets", UrlSigner(SECRET, "http://localhost"))
    options = ServiceOptions(
        admin_token_hash=hash_secret(ADMIN), per_token_rps=0, warm_on_start=False,
        idempotency_key_minutes=minutes,
    )  # fmt: skip
    app = create_app(store, storage, SECRET, options=options)
    try:
        with TestClient(app) as client:
            headers = {"Authorization": f"Bearer {ADMIN}"}
            client.post("/_iceberg/v1/warehouses", json={"name": WH}, headers=headers)
            config = client.get(f"/_iceberg/v1/config?warehouse={WH}", headers=headers).json()
        assert config.get("idempotency-key-lifetime") == advertised
        assert bool(keyed_mutations(app)) == (advertised is not None)
    finally:
        store.close()
