"""The writable catalog the unit tests of the catalog and of its maintenance start from: over local
storage, with warehouse `whs` and namespace `ns`, on each store the server runs on."""

from __future__ import annotations

from pathlib import Path

import pytest

from share_store.catalog.catalog import WarehouseCatalog
from tests.own_catalog import STORES, own_catalog


@pytest.fixture(params=STORES)
def catalog_store(request: pytest.FixtureRequest) -> str:
    """The store under `catalog`: both by default, as the catalog's guarantees must hold on SQLite and
    on PostgreSQL (replicas); a module whose subject is above the store overrides this with one."""
    return str(request.param)


@pytest.fixture
def catalog(tmp_path: Path, request: pytest.FixtureRequest, catalog_store: str) -> WarehouseCatalog:
    return own_catalog(tmp_path, request, catalog_store)
