"""What every handler of the own warehouses' API starts from: the catalog, its callers and its data
access, handed in when the routes are made (`CatalogEndpoints`), and the catalog as the request's
caller may use it (`access`, `as_caller`), by the mount's one way in (`CatalogAuthentication`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from starlette.requests import Request

from share_store.catalog.access import CatalogAccess
from share_store.catalog.callers import CatalogCallers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.data_access import DataAccess
from sharing_server.auth.catalog_callers import CatalogAuthentication

T = TypeVar("T")


class CatalogEndpoints:
    def __init__(self, catalog: WarehouseCatalog, callers: CatalogCallers, data: DataAccess) -> None:
        self.catalog = catalog
        self.callers = callers
        self.authentication = CatalogAuthentication(callers)
        #: Vended keys and signed requests for the tables' files (`[warehouses] access_delegation`).
        self.data = data

    async def access(self, request: Request) -> CatalogAccess:
        """The catalog as the request's caller may use it (every operation checks its policy),
        authenticated before anything else of the request is read."""
        return CatalogAccess(self.catalog, await self.authentication.caller(request))

    async def as_caller(self, request: Request, action: Callable[[CatalogAccess], T]) -> T:
        """`access(request)`, then `action` on it, in one trip to a worker thread: for the hot
        calls (a table's load and commit). The caller is authenticated first there too."""
        return await self.authentication.as_caller(
            request, lambda who: action(CatalogAccess(self.catalog, who))
        )
