"""`AppServices`: what the server's handlers work with, made once per app (`app_services`, called by
`create_app`) from the opened store, storage, catalogs and key.

Each package's routes are given the services their handlers use when the app is
made (`app_routes`): `ProtocolEndpoints` the store, queries and stream slots,
`ShareCatalog` the store and the tables' grants, the own warehouses' endpoints
the catalog and its callers, the admin API the admin commands and token, the
console its `Console`. No handler looks a service up on `app.state`, so what a
handler depends on is in its constructor's signature.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from share_store.authentication.console_sessions import SessionCodec
from share_store.authentication.sign_in_throttle import AdminToken
from share_store.catalog.callers import CatalogCallers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.data_access import DataAccess
from share_store.catalog.maintenance.background import BackgroundMaintenance
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.maintenance.queue import RunQueue
from share_store.catalog.table_source import OwnWarehouses
from share_store.catalog.users import CatalogUsers
from share_store.iceberg.plan_runs import PlanRuns
from share_store.iceberg_shares.grants import IcebergGrants
from share_store.persistence import ShareStore
from share_store.persistence.async_queries import AsyncQueryStore
from share_store.readers.table_readers import TableReaders
from share_store.signing.token_codec import TokenCodec
from share_store.signing.url_lifetimes import UrlLifetimes
from share_store.storage.base import ObjectStorage
from share_store.storage.sts_vending import CredentialVendor
from share_store.table_sources.registry import CatalogRegistry
from share_store.tables.options import IcebergOptions
from share_store.tables.snapshot_cache import SnapshotCache
from sharing_server import paths
from sharing_server.admin.commands import Admin
from sharing_server.console.web import Console
from sharing_server.delta_sharing.async_queries import AsyncQueries
from sharing_server.delta_sharing.hint_filter import HintLimits
from sharing_server.delta_sharing.queries import TableQueries
from sharing_server.delta_sharing.warming import SnapshotWarmer
from sharing_server.http.stream_slots import StreamSlots
from sharing_server.observability.activity import ActivityRecorder
from sharing_server.observability.audit import note
from sharing_server.observability.metrics import Metrics
from sharing_server.service_options import ServiceOptions

if TYPE_CHECKING:
    from share_store.tables.options import Resolution


@dataclass(frozen=True)
class AppServices:
    prefix: str
    options: ServiceOptions
    store: ShareStore
    storage: ObjectStorage
    #: The server key: seals activation links' profiles, signs page and catalog tokens.
    secret: bytes
    metrics: Metrics
    activity: ActivityRecorder
    readers: TableReaders
    iceberg_grants: IcebergGrants
    warehouses: WarehouseCatalog
    callers: CatalogCallers
    data: DataAccess
    admin_token: AdminToken
    warmer: SnapshotWarmer
    #: The own warehouses' tables kept in the background (`[maintenance]`).
    maintenance: BackgroundMaintenance
    queries: TableQueries
    #: Async `/query`s (2026-07): rows in the store, work in worker threads of their own.
    async_queries: AsyncQueries
    #: Scan plans of both Iceberg catalogs made in the background past their budget (1.11 `submitted`).
    plan_runs: PlanRuns
    streams: StreamSlots
    list_tokens: TokenCodec
    admin: Admin
    #: None when the console is off (no admin token configured).
    console: Console | None


def equality_observer(metrics: Metrics) -> Callable[[Resolution], None]:
    """Records each resolution of equality deletes in the metrics and the request's audit record."""

    def observe(resolution: Resolution) -> None:
        metrics.equality_resolution.labels(resolution.outcome).observe(resolution.seconds)
        metrics.equality_scanned.inc(resolution.bytes_scanned)
        note(
            equality_deletes={
                "outcome": resolution.outcome,
                "seconds": round(resolution.seconds, 3),
                "delete_files": resolution.delete_files,
                "data_files": resolution.data_files,
                "bytes_scanned": resolution.bytes_scanned,
                "rows_deleted": resolution.rows_deleted,
            }
        )

    return observe


def app_services(
    store: ShareStore,
    storage: ObjectStorage,
    secret: bytes,
    prefix: str,
    catalogs: CatalogRegistry,
    options: ServiceOptions,
) -> AppServices:
    """Everything the app's handlers and its background work use, each made once."""
    metrics = Metrics()
    activity = ActivityRecorder(
        store,
        (prefix, paths.ICEBERG_PREFIX),
        timedelta(hours=options.activity_retention_hours),
        options.activity_max_events,
    )
    iceberg = IcebergOptions(options.iceberg, equality_observer(metrics))
    readers = TableReaders(
        storage,
        catalogs,
        store,
        iceberg,
        snapshots=SnapshotCache(options.snapshot_cache_files),
        files_check_seconds=options.files_check_seconds,
        summaries=store,
    )
    vendor = CredentialVendor(options.vending) if options.vending.enabled else None
    warehouses = WarehouseCatalog(store.transactions, storage)
    catalogs.own = OwnWarehouses(warehouses)
    admin_token = AdminToken(options.admin_token_hash)
    callers = CatalogCallers(
        CatalogUsers(store.transactions, secret), TokenCodec(secret, "catalog-access"), admin_token
    )
    # Writers' keys come from the same STS settings as recipients' ([iceberg] credential_*), on
    # whenever the provider lists "vended-credentials" in [warehouses] access_delegation.
    writers_vendor = CredentialVendor(dataclasses.replace(options.vending, mode="sts"))
    data = DataAccess(
        storage, options.access_delegation, writers_vendor, TokenCodec(secret, "writer-signing")
    )
    if data.vends:
        # The store has STS: what the server does to a table's files for a caller (a purge) is
        # done with keys bounded to the table, as its signatures are.
        from share_store.storage.table_keys import TableKeys

        warehouses.table_keys = TableKeys(storage, writers_vendor)
    hint_limits = HintLimits(options.max_hint_nodes, options.hint_budget_ms)
    lifetimes = UrlLifetimes(options.url_lifetime, options.url_lifetime_per_file_ms, options.url_lifetime_max)
    queries = TableQueries(readers, secret, hint_limits, options.prefer_delta_format, lifetimes)
    admin = Admin(
        store,
        options.endpoint,
        lambda: catalogs,
        lambda: storage,
        options.max_token_lifetime,
        secret,
        readers=lambda: readers,
    )
    console = None
    if options.admin_token_hash is not None:
        sessions = SessionCodec(secret, options.admin_token_hash, options.console_idle_minutes * 60)
        console = Console(
            admin,
            sessions,
            admin_token,
            readers,
            warehouses,
            options.activity_retention_hours,
            time.monotonic(),
        )
    return AppServices(
        prefix=prefix,
        options=options,
        store=store,
        storage=storage,
        secret=secret,
        metrics=metrics,
        activity=activity,
        readers=readers,
        iceberg_grants=IcebergGrants(readers, vendor),
        warehouses=warehouses,
        callers=callers,
        data=data,
        admin_token=admin_token,
        warmer=SnapshotWarmer(
            store,
            readers,
            metrics,
            options.warm_on_start,
            options.refresh_seconds,
            options.warm_window_hours * 3600,
        ),
        # One maintainer and one queue for the API's runs and the background's: they share limits.
        maintenance=BackgroundMaintenance(
            Maintainer(warehouses, limits=options.maintenance_limits),
            options.maintenance,
            queue=RunQueue(options.maintenance_limits),
        ),
        queries=queries,
        async_queries=AsyncQueries(queries, AsyncQueryStore(store.transactions), options.async_query_budget),
        plan_runs=PlanRuns(options.scan_plan_budget),
        streams=StreamSlots(options.streams_per_token, options.streams_per_process),
        list_tokens=TokenCodec(secret, "list-page"),
        admin=admin,
        console=console,
    )
