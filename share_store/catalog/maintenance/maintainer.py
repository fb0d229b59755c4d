"""One table's maintenance, configured and run: what every entry point (the API, the CLI, the
server's background runs) goes through.

A run does the table's enabled kinds in the order that leaves the least behind:
compaction (a `replace` snapshot), then snapshot expiry (which can expire the
snapshots the compaction superseded), then unreferenced-file removal (which, a
grace period later, deletes the files neither reaches any more). Each kind's
outcome is recorded as S3 Tables' job status: a failure of one is named in its
status and does not stop the others. The provider's `Limits` bound what a
compaction may cost (its budget, the files it reads); which runs may start at once
is the entry points' (`queue.RunQueue`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from share_store.catalog import table_pointers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance import rows
from share_store.catalog.maintenance.compaction.run import compact
from share_store.catalog.maintenance.configuration import (
    COMPACTION,
    KINDS,
    SNAPSHOT_MANAGEMENT,
    TABLE_KINDS,
    Limits,
    Maintenance,
    check_value,
    described,
    effective,
    enabled,
)
from share_store.catalog.maintenance.expiry import expire_snapshots
from share_store.catalog.maintenance.unreferenced import remove_unreferenced
from share_store.catalog.names import TableName
from share_store.errors import InvalidParameter, ShareStoreError
from share_store.outages import is_outage
from share_store.persistence.mappers import utc_now

log = logging.getLogger(__name__)


class Maintainer:
    def __init__(
        self,
        catalog: WarehouseCatalog,
        clock: Callable[[], datetime] = utc_now,
        limits: Limits | None = None,
    ) -> None:
        self.catalog = catalog
        self.transactions = catalog.transactions
        self.clock = clock
        self.limits = limits or Limits()

    # -- configuration ---------------------------------------------------------------------

    def maintenance(self, table: TableName) -> Maintenance:
        """The table's effective maintenance: its own configurations over its warehouse's."""
        with self.transactions.read() as conn:
            table_id = self._id(conn, table)
            return effective(
                rows.configs(conn, table.warehouse), rows.configs(conn, table.warehouse, table_id)
            )

    def table_configuration(self, table: TableName) -> dict[str, Any]:
        return described(self.maintenance(table), TABLE_KINDS)

    def warehouse_configuration(self, warehouse: str) -> dict[str, Any]:
        self.catalog.warehouse_properties(warehouse)  # NoSuchWarehouse for one that is not
        with self.transactions.read() as conn:
            return described(effective(rows.configs(conn, warehouse), {}))

    def configure_table(self, table: TableName, kind: str, value: Any) -> None:
        """S3 Tables' PutTableMaintenanceConfiguration: compaction or snapshot management."""
        if kind not in TABLE_KINDS:
            raise InvalidParameter(
                f"a table's maintenance type is one of {', '.join(TABLE_KINDS)}, not {kind!r}"
            )
        checked = check_value(kind, value)
        with self.transactions.change() as conn:
            rows.put_config(conn, table.warehouse, self._id(conn, table), kind, checked)

    def configure_warehouse(self, warehouse: str, kind: str, value: Any) -> None:
        """S3 Tables' PutTableBucketMaintenanceConfiguration, and defaults for the tables' kinds."""
        checked = check_value(kind, value)
        self.catalog.warehouse_properties(warehouse)  # NoSuchWarehouse for one that is not
        with self.transactions.change() as conn:
            rows.put_config(conn, warehouse, rows.WAREHOUSE, kind, checked)

    def status(self, table: TableName) -> dict[str, Any]:
        """S3 Tables' GetTableMaintenanceJobStatus: each kind's last run, or that it has none yet."""
        maintenance = self.maintenance(table)
        with self.transactions.read() as conn:
            last = rows.runs(conn, self._id(conn, table))
        out: dict[str, Any] = {}
        for kind in KINDS:
            run = last.get(kind)
            if run is None:
                out[kind] = {"status": "Not_Yet_Run" if enabled(maintenance, kind) else "Disabled"}
                continue
            out[kind] = {"status": run.status, "lastRunTimestamp": run.started_at.isoformat()}
            if run.message:
                out[kind]["failureMessage" if run.status == "Failed" else "message"] = run.message
            if run.details:
                out[kind]["details"] = run.details
        return out

    # -- runs ------------------------------------------------------------------------------

    def run(self, table: TableName, kinds: tuple[str, ...] = KINDS) -> dict[str, rows.Run]:
        """The table's enabled kinds among `kinds`, now, in order; each one's recorded run."""
        unknown = [kind for kind in kinds if kind not in KINDS]
        if unknown:
            # Refused rather than skipped: a misspelt kind would otherwise run nothing, silently.
            raise InvalidParameter(f"unknown maintenance type {unknown[0]!r}: one of {', '.join(KINDS)}")
        maintenance = self.maintenance(table)
        with self.transactions.read() as conn:
            table_id = self._id(conn, table)
        done: dict[str, rows.Run] = {}
        for kind in KINDS:
            if kind not in kinds or not enabled(maintenance, kind):
                continue
            started, clock = self.clock(), time.monotonic()
            try:
                details = self._run_kind(table, kind, maintenance, started)
                # Why nothing was done, and what else the run says (files left, a budget spent).
                said = [details.pop("skipped", None), details.pop("note", None)]
                status, message = "Successful", "; ".join(part for part in said if part) or None
            except ShareStoreError as error:
                status, message, details = "Failed", str(error), {}
            except Exception as error:  # noqa: BLE001 - logged by `_failure`, named by type only
                status, message, details = "Failed", _failure(kind, table, error), {}
            details["seconds"] = round(time.monotonic() - clock, 3)
            run = rows.Run(kind, status, started, self.clock(), message, details)
            with self.transactions.change() as conn:
                rows.record_run(conn, table_id, run)
            done[kind] = run
        return done

    def _run_kind(
        self, table: TableName, kind: str, maintenance: Maintenance, now: datetime
    ) -> dict[str, Any]:
        if kind == COMPACTION:
            details = dataclasses.asdict(compact(self.catalog, table, maintenance.compaction, self.limits))
            if not details["files_skipped"]:
                del details["files_skipped"]  # named only when a file was left as it is
            return details
        if kind == SNAPSHOT_MANAGEMENT:
            expiry = expire_snapshots(
                self.catalog, table, maintenance.snapshot_management, int(now.timestamp() * 1000)
            )
            return {"snapshots_expired": len(expiry.snapshot_ids), "refs_removed": len(expiry.refs)}
        removal = remove_unreferenced(self.catalog, table, maintenance.unreferenced_file_removal, now)
        return dataclasses.asdict(removal)

    def _id(self, conn: Any, table: TableName) -> str:
        return table_pointers.table_pointer(conn, table.warehouse, table.namespace, table.name).id


def described_run(run: rows.Run) -> dict[str, Any]:
    """A run as the API's `maintenance/run` answers it (and the CLI prints it), per kind."""
    return {
        "status": run.status,
        "message": run.message,
        "details": run.details,
        "lastRunTimestamp": run.started_at.isoformat(),
    }


def _failure(kind: str, table: TableName, error: Exception) -> str:
    """What a run's failed kind says, logged as it deserves: an outage in one line (a CLI run
    printed its traceback before the result), anything else, a bug, with its traceback."""
    if is_outage(error):
        log.warning(
            "maintenance %s of %s failed: a service is unreachable (%s)", kind, table, type(error).__name__
        )
        return (
            f"the share store's database or storage is unreachable ({type(error).__name__}); try again later"
        )
    log.exception("maintenance %s of %s failed", kind, table)
    return f"{type(error).__name__} (see the server's log)"
