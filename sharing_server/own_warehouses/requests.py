"""What every handler of the own warehouses' API starts from: the catalog and its callers, handed
in when the routes are made (`CatalogEndpoints`), and the caller a request proves it is."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from share_store.own_warehouses.access import CatalogAccess
from share_store.own_warehouses.callers import CatalogCallers, Credentials
from share_store.own_warehouses.catalog import WarehouseCatalog


class CatalogEndpoints:
    def __init__(self, catalog: WarehouseCatalog, callers: CatalogCallers) -> None:
        self.catalog = catalog
        self.callers = callers

    async def access(self, credentials: Credentials) -> CatalogAccess:
        """The catalog as the request's caller may use it (every operation checks its policy),
        authenticated before anything else of the request is read."""
        who = await run_in_threadpool(self.callers.authenticate, credentials)
        return CatalogAccess(self.catalog, who)
