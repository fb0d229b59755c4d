"""Who may configure, read and run a table's maintenance: S3 Tables' actions, checked for every
entry point as `catalog.access.CatalogAccess` checks the catalog's.

Running maintenance now (which S3 Tables has no call for) needs the right to configure it.
"""

from __future__ import annotations

from typing import Any

from share_store.catalog import policies as actions
from share_store.catalog.access import Principal
from share_store.catalog.maintenance.configuration import KINDS
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.maintenance.rows import Run
from share_store.catalog.names import TableName
from share_store.catalog.policies import table_arn, warehouse_arn


def _arn(table: TableName) -> str:
    return table_arn(table.warehouse, table.namespace, table.name)


class MaintenanceAccess:
    def __init__(self, maintainer: Maintainer, who: Principal) -> None:
        self.maintainer = maintainer
        self.who = who

    def table_configuration(self, table: TableName) -> dict[str, Any]:
        self.who.require(actions.GET_TABLE_MAINTENANCE_CONFIGURATION, _arn(table))
        return self.maintainer.table_configuration(table)

    def configure_table(self, table: TableName, kind: str, value: Any) -> None:
        self.who.require(actions.PUT_TABLE_MAINTENANCE_CONFIGURATION, _arn(table))
        self.maintainer.configure_table(table, kind, value)

    def status(self, table: TableName) -> dict[str, Any]:
        self.who.require(actions.GET_TABLE_MAINTENANCE_JOB_STATUS, _arn(table))
        return self.maintainer.status(table)

    def may_run(self, table: TableName) -> None:
        """Forbidden, or NoSuchTable, unless a run of the table may be asked for: checked before the
        run waits for its turn, so that a run refused anyway holds no place in the queue."""
        self.who.require(actions.PUT_TABLE_MAINTENANCE_CONFIGURATION, _arn(table))
        self.maintainer.maintenance(table)

    def run(self, table: TableName, kinds: tuple[str, ...] = KINDS) -> dict[str, Run]:
        self.who.require(actions.PUT_TABLE_MAINTENANCE_CONFIGURATION, _arn(table))
        return self.maintainer.run(table, kinds)

    def warehouse_configuration(self, warehouse: str) -> dict[str, Any]:
        self.who.require(actions.GET_TABLE_BUCKET_MAINTENANCE_CONFIGURATION, warehouse_arn(warehouse))
        return self.maintainer.warehouse_configuration(warehouse)

    def configure_warehouse(self, warehouse: str, kind: str, value: Any) -> None:
        self.who.require(actions.PUT_TABLE_BUCKET_MAINTENANCE_CONFIGURATION, warehouse_arn(warehouse))
        self.maintainer.configure_warehouse(warehouse, kind, value)
