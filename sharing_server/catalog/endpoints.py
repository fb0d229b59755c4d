"""What every handler of the own warehouses' API starts from: the catalog, its callers and its data
access, handed in when the routes are made (`CatalogEndpoints`), and the caller a request proves it
is."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

from share_store.catalog.access import CatalogAccess
from share_store.catalog.callers import CatalogCallers, Credentials
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.data_access import DataAccess

T = TypeVar("T")


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

    async def as_caller(self, credentials: Credentials, action: Callable[[CatalogAccess], T]) -> T:
        """`access(credentials)`, then `action` on it, in one trip to a worker thread: for the hot
        calls (a table's load and commit), each trip a wait for a thread to take it up. The
        caller is authenticated first there too; `action` reads the body only after."""

        def authenticated_action() -> T:
            return action(CatalogAccess(self.catalog, self.callers.authenticate(credentials)))

        return await run_in_threadpool(authenticated_action)
