"""An own warehouse's table page: its current snapshot's files and size, and its maintenance (each
kind's configuration and last run), with "Run maintenance now" for the provider.

Reached from the Tables page, which reads each table's metadata file and no more; this page reads
one table's metadata file, that file's size (one stat) and the table's maintenance rows, so the
list stays as fast as it was however many tables a warehouse has. The counts and size are the
current snapshot summary's totals (`total-data-files`...), which writers keep, not a walk of the
manifests. A run goes through `MaintenanceAccess` as the provider, as the catalog's
`POST .../maintenance/run` does for the admin token.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from share_store.catalog.access import PROVIDER
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance.access import MaintenanceAccess
from share_store.catalog.maintenance.configuration import UNREFERENCED_FILE_REMOVAL
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.names import TableName
from share_store.storage.file_uris import file_location
from sharing_server.console.maintenance_runs import kind_views, outcome
from sharing_server.console.warehouses import (
    SHARE_TABLE_URL,
    problem_of,
    summary_number,
    table_spec,
    table_url,
)
from sharing_server.console.web import Call, Page, Redirect


@dataclass(frozen=True)
class CurrentSnapshot:
    snapshot_id: int
    timestamp_ms: int
    operation: str
    data_files: int | None
    delete_files: int | None
    total_bytes: int | None
    records: int | None


@dataclass(frozen=True)
class Facts:
    format_version: int
    location: str
    snapshots: int
    current: CurrentSnapshot | None
    metadata_location: str
    #: None when storage would not say (the rest of the page does not need it).
    metadata_bytes: int | None


def table_of(call: Call) -> TableName:
    """The table the path names; InvalidParameter (a 400 page) for names the catalog refuses."""
    levels = tuple(call.param("namespace").split("."))
    return TableName.of(call.param("warehouse"), levels, call.param("table"))


def _metadata_bytes(catalog: WarehouseCatalog, location: str) -> int | None:
    try:
        found = catalog.storage.stat(*file_location(catalog.storage, location))
    except Exception:  # noqa: BLE001 - a size the page can go without is no reason to fail it
        return None
    return found.size if found is not None else None


def read_facts(catalog: WarehouseCatalog, table: TableName) -> Facts:
    loaded = catalog.load_table(table)
    metadata = loaded.metadata
    current = metadata.current_snapshot()
    snapshot = None
    if current is not None:
        summary = current.summary
        snapshot = CurrentSnapshot(
            snapshot_id=current.snapshot_id,
            timestamp_ms=current.timestamp_ms,
            operation=summary.operation.value if summary is not None else "—",
            data_files=summary_number(summary, "total-data-files"),
            delete_files=summary_number(summary, "total-delete-files"),
            total_bytes=summary_number(summary, "total-files-size"),
            records=summary_number(summary, "total-records"),
        )
    location = loaded.metadata_location or ""
    return Facts(
        format_version=metadata.format_version,
        location=metadata.location,
        snapshots=len(metadata.snapshots),
        current=snapshot,
        metadata_location=location,
        metadata_bytes=_metadata_bytes(catalog, location) if location else None,
    )


def _url(table: TableName) -> str:
    url = table_url(table.warehouse, table.namespace, table.name)
    assert url is not None, "a checked TableName has a page"
    return url


def _access(call: Call) -> MaintenanceAccess:
    return MaintenanceAccess(Maintainer(call.console.warehouses), PROVIDER)


def own_table_page(call: Call) -> Page:
    table = table_of(call)
    access = _access(call)
    # The maintenance rows first: a table that is not there is a "Not found" page (NoSuchTable).
    status = access.status(table)
    configuration = access.table_configuration(table)
    # Removal of unreferenced files is set per warehouse (S3 Tables' table-bucket configuration).
    removal = access.warehouse_configuration(table.warehouse)[UNREFERENCED_FILE_REMOVAL]
    configuration[UNREFERENCED_FILE_REMOVAL] = removal
    facts, problem = None, ""
    try:
        facts = read_facts(call.console.warehouses, table)
    except Exception as error:  # noqa: BLE001 - an unreadable table still shows its maintenance
        problem = problem_of(error)
    spec = table_spec(table.warehouse, table.namespace, table.name)
    url = _url(table)
    context = {
        "table": table,
        "namespace": ".".join(table.namespace),
        "facts": facts,
        "problem": problem,
        "kinds": kind_views(configuration, status),
        "share_link": f"{SHARE_TABLE_URL}?{urlencode({'spec': spec})}" if spec else None,
        "run_url": f"{url}/maintenance",
        "back": url,
        "active": "tables",
    }
    return Page("own_table.html", context)


def run_maintenance(call: Call) -> Redirect:
    """Every enabled kind now, in order; back on the table's page with the outcome (each kind's
    details are in its Maintenance row there)."""
    table = table_of(call)
    runs = _access(call).run(table)
    return Redirect(_url(table), flash=outcome(f"{table.warehouse}.{table}", runs))
