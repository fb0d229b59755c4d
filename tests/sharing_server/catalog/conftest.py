"""Fixtures of the catalog's HTTP tests: the app served in process, and a catalog with tables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from share_store.authentication.tokens import hash_secret
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.app import create_app
from sharing_server.service_options import ServiceOptions
from tests.catalog_attacks import ATT
from tests.sharing_server.catalog.served import ADMIN, SECRET, WH, Served, create_table


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    root = tmp_path / "buckets"
    root.mkdir()
    storage = LocalStorage(root, UrlSigner(SECRET, "http://localhost"))
    options = ServiceOptions(admin_token_hash=hash_secret(ADMIN), per_token_rps=0, warm_on_start=False)
    app = create_app(store, storage, SECRET, options=options)
    with TestClient(app) as client:
        yield Served(client, store, root)
    store.close()


@pytest.fixture
def catalog(served: Served) -> Served:
    """A warehouse `whs` with namespaces `ns`, `att`, `a` and `a.b`, and a v2 table `ns.t`."""
    assert served.call("POST", "/warehouses", {"name": WH}).json() == {"name": WH}
    for levels in (["ns"], [ATT], ["a"], ["a", "b"]):
        created = served.call("POST", f"/{WH}/namespaces", {"namespace": levels})
        assert created.status_code == 200, created.text
    create_table(served, "ns", "t")
    return served
