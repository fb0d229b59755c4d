"""Where `sharing-server table maintenance …` configures and runs a table's maintenance: the store,
through the `Maintainer` as the provider (`LocalMaintenance`), or a server's maintenance API
(`RemoteMaintenance`). Both answer in the API's documents, so the commands print one shape:

    {"warehouse": W, "configuration": {...}}    {"table": "NS.T", "configuration": {...}}
    {"status": {TYPE: {...}}}                   {"runs": {TYPE: {...}}}
"""

from __future__ import annotations

from typing import Any, Protocol

from share_store.catalog.access import PROVIDER
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance.access import MaintenanceAccess
from share_store.catalog.maintenance.configuration import KINDS, Limits
from share_store.catalog.maintenance.maintainer import Maintainer, described_run
from share_store.catalog.names import TableName
from sharing_server.admin.catalog.backend import (
    CATALOG_PREFIX,
    require_admin_token,
    segment,
    table_path,
    warehouse_path,
)
from sharing_server.admin.client import JsonApi

#: A run rewrites a table's data files in the server's request: far longer than a catalog call.
RUN_TIMEOUT_SECONDS = 3600.0


class MaintenanceBackend(Protocol):
    def warehouse_configuration(self, warehouse: str) -> dict[str, Any]: ...
    def table_configuration(self, table: TableName) -> dict[str, Any]: ...
    def configure_warehouse(self, warehouse: str, kind: str, value: Any) -> None: ...
    def configure_table(self, table: TableName, kind: str, value: Any) -> None: ...
    def status(self, table: TableName) -> dict[str, Any]: ...
    def run(self, table: TableName, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]: ...


class LocalMaintenance:
    """On the store, as the provider: the rules the API applies, every action allowed."""

    def __init__(self, catalog: WarehouseCatalog, limits: Limits | None = None) -> None:
        # The configuration's `[maintenance]` limits, as the server's runs keep to them.
        self.access = MaintenanceAccess(Maintainer(catalog, limits=limits), PROVIDER)

    def warehouse_configuration(self, warehouse: str) -> dict[str, Any]:
        return {"warehouse": warehouse, "configuration": self.access.warehouse_configuration(warehouse)}

    def table_configuration(self, table: TableName) -> dict[str, Any]:
        return {"table": str(table), "configuration": self.access.table_configuration(table)}

    def configure_warehouse(self, warehouse: str, kind: str, value: Any) -> None:
        self.access.configure_warehouse(warehouse, kind, value)

    def configure_table(self, table: TableName, kind: str, value: Any) -> None:
        self.access.configure_table(table, kind, value)

    def status(self, table: TableName) -> dict[str, Any]:
        return {"status": self.access.status(table)}

    def run(self, table: TableName, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
        runs = self.access.run(table, kinds)
        return {"runs": {kind: described_run(run) for kind, run in runs.items()}}


class RemoteMaintenance:
    """Through a running server's maintenance API under `/_iceberg/v1`, as the admin."""

    def __init__(self, server: str, token: str, cafile: str | None = None) -> None:
        api = JsonApi(server, CATALOG_PREFIX, token, RUN_TIMEOUT_SECONDS, cafile)
        require_admin_token(token)
        self._call = api.call

    def warehouse_configuration(self, warehouse: str) -> dict[str, Any]:
        return dict(self._call("GET", warehouse_path(warehouse) + "/maintenance"))

    def table_configuration(self, table: TableName) -> dict[str, Any]:
        return dict(self._call("GET", table_path(table) + "/maintenance"))

    def configure_warehouse(self, warehouse: str, kind: str, value: Any) -> None:
        self._call("PUT", f"{warehouse_path(warehouse)}/maintenance/{segment(kind)}", {"value": value})

    def configure_table(self, table: TableName, kind: str, value: Any) -> None:
        self._call("PUT", f"{table_path(table)}/maintenance/{segment(kind)}", {"value": value})

    def status(self, table: TableName) -> dict[str, Any]:
        return dict(self._call("GET", table_path(table) + "/maintenance-job-status"))

    def run(self, table: TableName, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
        # No body runs every enabled kind; the server checks the kinds named.
        body = None if kinds == KINDS else {"types": list(kinds)}
        return dict(self._call("POST", table_path(table) + "/maintenance/run", body))
