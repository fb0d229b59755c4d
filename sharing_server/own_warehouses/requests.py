"""What every handler of the own warehouses' API starts from: the catalog, its callers and its data
access, handed in when the routes are made (`CatalogEndpoints`), and the caller a request proves it
is."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from share_store.own_warehouses.access import CatalogAccess
from share_store.own_warehouses.callers import CatalogCallers, Credentials
from share_store.own_warehouses.catalog import WarehouseCatalog
from share_store.own_warehouses.data_access import DataAccess


class CatalogEndpoints:
    def __init__(self, catalog: WarehouseCatalog, callers: CatalogCallers, data: DataAccess) -> None:
        self.catalog = catalog
        self.callers = callers
        #: Vended keys and signed requests for the tables' files (`[warehouses] access_delegation`).
        self.data = data

    async def access(self, credentials: Credentials) -> CatalogAccess:
        """The catalog as the request's caller may use it (every operation checks its policy),
        authenticated before anything else of the request is read."""
        who = await run_in_threadpool(self.callers.authenticate, credentials)
        return CatalogAccess(self.catalog, who)
