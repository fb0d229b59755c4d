"""The writable catalog over local storage, with warehouse `whs` and namespace `ns`, as the unit
tests of the catalog and of its maintenance build it: on SQLite, or on the PostgreSQL the store
tests start (`postgres_url`), for the guarantees that must hold on both."""

from __future__ import annotations

from pathlib import Path

import pytest

from share_store.catalog.catalog import WarehouseCatalog
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage

#: A fixture's params for both stores the server runs on.
STORES = ["sqlite", "postgresql"]


def own_catalog(tmp_path: Path, request: pytest.FixtureRequest, store: str = "sqlite") -> WarehouseCatalog:
    on_postgres = store == "postgresql"
    opened = ShareStore(
        request.getfixturevalue("postgres_url") if on_postgres else sqlite_url(tmp_path / "store.db")
    )
    request.addfinalizer(opened.close)
    (tmp_path / "root").mkdir()
    storage = LocalStorage(tmp_path / "root", UrlSigner(b"k" * 32, "http://localhost"))
    catalog = WarehouseCatalog(opened.transactions, storage)
    catalog.create_warehouse("whs")
    catalog.create_namespace("whs", ("ns",), {})
    return catalog
