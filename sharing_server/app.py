"""The Starlette application: the protocol under its prefix, the admin API, OAuth, probes.

/healthz                      liveness (no auth, not logged)
/openapi.json                 the OpenAPI description of all of these
/metrics                      Prometheus metrics (no auth; no names in labels)
{prefix}/...                  the Delta Sharing protocol (bearer tokens)
{prefix}/oauth/token          OAuth2 client credentials → access tokens
{prefix}/files/...            local storage's signed file URLs
/admin/v1/...                 the admin API (admin token; off unless configured)
/iceberg/v1/...               a read-only Iceberg REST catalog over the same shares (bearer tokens)
/console/...                  the providers' web console (admin token; off unless configured)
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import Receive, Scope, Send

from share_store.authentication.console_sessions import SessionCodec
from share_store.authentication.sign_in_throttle import AdminToken
from share_store.external_catalogs.registry import CatalogRegistry
from share_store.own_warehouses.callers import CatalogCallers
from share_store.own_warehouses.catalog import WarehouseCatalog
from share_store.own_warehouses.shared import OwnWarehouses
from share_store.own_warehouses.users import CatalogUsers
from share_store.persistence import ShareStore
from share_store.signing.sts_vending import CredentialVendor
from share_store.signing.token_codec import TokenCodec
from share_store.storage.base import ObjectStorage
from share_store.tables.iceberg_grants import IcebergGrants
from share_store.tables.options import IcebergOptions
from share_store.tables.readers import TableReaders
from share_store.tables.snapshot_cache import SnapshotCache
from sharing_server import paths
from sharing_server.admin.activation import activate
from sharing_server.admin.commands import Admin
from sharing_server.admin.routes import admin_routes
from sharing_server.auth.oauth import token_endpoint
from sharing_server.config import ServiceOptions
from sharing_server.console.routes import console_routes
from sharing_server.console.web import Console
from sharing_server.http.connections import ConnectionGuard
from sharing_server.http.errors import EXCEPTION_HANDLERS
from sharing_server.http.files import serve_file
from sharing_server.http.middleware import ForwardedHeaders, Observe, RequestLimits, SecurityHeaders
from sharing_server.http.rate_limits import RateLimiter
from sharing_server.http.stream_slots import StreamSlots
from sharing_server.observability.activity import ActivityRecorder
from sharing_server.observability.audit import AuditLog, note
from sharing_server.observability.metrics import Metrics, metrics_endpoint
from sharing_server.openapi import openapi_endpoint
from sharing_server.own_warehouses.routes import warehouse_api
from sharing_server.protocol import routes
from sharing_server.protocol.hint_filter import HintLimits
from sharing_server.protocol.queries import TableQueries
from sharing_server.protocol.warming import SnapshotWarmer
from sharing_server.serving import quiet_aborted_connections
from sharing_server.share_catalog.routes import iceberg_routes

if TYPE_CHECKING:
    from share_store.tables.options import Resolution


async def health(_request: object) -> Response:
    return Response("ok\n", media_type="text/plain")


def protocol_routes() -> list[Route]:
    return [
        Route(paths.SHARES, routes.list_shares, methods=["GET"]),
        Route(paths.ACTIVATION, activate, methods=["GET"], name="activation"),
        Route(paths.SHARE, routes.get_share, methods=["GET"]),
        Route(paths.SCHEMAS, routes.list_schemas, methods=["GET"]),
        Route(paths.TABLES, routes.list_tables, methods=["GET"]),
        Route(paths.ALL_TABLES, routes.list_all_tables, methods=["GET"]),
        # The legacy HEAD form answers like /version.
        Route(paths.TABLE, routes.table_version, methods=["HEAD"]),
        Route(paths.TABLE_VERSION, routes.table_version, methods=["GET"]),
        Route(paths.TABLE_METADATA, routes.table_metadata, methods=["GET"]),
        Route(paths.TABLE_QUERY, routes.table_query, methods=["POST"]),
        Route(paths.TABLE_CHANGES, routes.table_changes, methods=["GET"]),
        Route(paths.OAUTH_TOKEN, token_endpoint, methods=["POST"]),
        Route(paths.FILE, serve_file, methods=["GET", "HEAD"]),
    ]


def app_routes(prefix: str, catalog: WarehouseCatalog, callers: CatalogCallers) -> list[BaseRoute]:
    """Everything the app serves: what `create_app` routes and `/openapi.json` describes."""
    return [
        Route(paths.HEALTHZ, health, methods=["GET"]),
        Route(paths.OPENAPI, openapi_endpoint, methods=["GET"]),
        Route(paths.METRICS, metrics_endpoint, methods=["GET"]),
        Mount(prefix, routes=protocol_routes()),
        Mount(paths.ADMIN_PREFIX, routes=admin_routes()),
        Mount(paths.ICEBERG_PREFIX, routes=iceberg_routes()),
        Mount(paths.WAREHOUSE_PREFIX, routes=warehouse_api(catalog, callers)),
        Mount(paths.CONSOLE_PREFIX, routes=console_routes()),
    ]


def proxy_middleware(hops: int) -> list[Middleware]:
    """Behind `hops` trusted proxies, take the client address and scheme from their headers."""
    if hops <= 0:
        return []
    return [Middleware(ForwardedHeaders, hops=hops)]


# What the first cold query would otherwise wait for: pyarrow imports pandas the
# first time it turns strings into NumPy, as reading a checkpoint does (0.3 s),
# and pyiceberg's modules, loaded on first use, are 40% of a cold Iceberg query.
logger = logging.getLogger(__name__)

WARM_MODULES = ("pandas", "pyiceberg.table", "pyiceberg.catalog.sql")


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional part missing: its first use will say so
            logger.debug("not preloaded: %s", name)


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """As the server starts: heavy modules load, shared tables' snapshots and the console's activity
    summaries are built in the background, without delaying it, and connections the kernel aborts
    for their stalled clients are logged in one line."""
    threading.Thread(target=_import_all, args=(WARM_MODULES,), name="warm-imports", daemon=True).start()
    if app.state.console is not None:  # the console's Activity page is the only reader
        threading.Thread(target=app.state.activity.warm, name="warm-activity", daemon=True).start()
    quiet_aborted_connections(asyncio.get_running_loop())
    app.state.warmer.start()
    yield
    await asyncio.to_thread(app.state.warmer.stop)
    # Recipients' last requests reach the store before the server stops.
    await asyncio.to_thread(app.state.activity.close)


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


class SharingApp(Starlette):
    """Starlette, minus the exception it raises again once a 500 has been answered.

    Its `ServerErrorMiddleware` hands an unexpected error to `internal_error`
    (which answers 500 and logs the error's type) and then raises it again for
    the ASGI server, which would log the whole traceback and message ("Error in
    ASGI Framework"): messages of storage and database errors may carry
    credentials. Mid-stream, returning without the body's end still makes the
    server cut the connection, so the client sees a broken response, not a short one.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        try:
            await super().__call__(scope, receive, send)
        except Exception:  # noqa: BLE001, S110 - answered and logged by `internal_error` already
            pass


def create_app(
    store: ShareStore,
    storage: ObjectStorage,
    secret: bytes,
    prefix: str = "/delta-sharing",
    catalogs: CatalogRegistry | None = None,
    options: ServiceOptions | None = None,
) -> Starlette:
    options = options or ServiceOptions()
    catalogs = catalogs if catalogs is not None else CatalogRegistry({})
    metrics = Metrics()
    audit = AuditLog(options.audit_log)
    activity = ActivityRecorder(
        store,
        (prefix, paths.ICEBERG_PREFIX),
        timedelta(hours=options.activity_retention_hours),
        options.activity_max_events,
    )
    # The own warehouses' services, handed to their routes.
    warehouses = WarehouseCatalog(store.transactions, storage)
    admin_token = AdminToken(options.admin_token_hash)
    callers = CatalogCallers(
        CatalogUsers(store.transactions, secret), TokenCodec(secret, "catalog-access"), admin_token
    )
    app = SharingApp(
        routes=app_routes(prefix, warehouses, callers),
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
        middleware=[
            *proxy_middleware(options.proxy_hops),
            Middleware(SecurityHeaders),
            Middleware(Observe, audit=audit, metrics=metrics, activity=activity),
            Middleware(
                ConnectionGuard,
                body_timeout=options.body_timeout,
                send_timeout=options.stream_send_timeout,
            ),
            Middleware(
                RequestLimits,
                limiter=RateLimiter(
                    options.per_token_rps, options.global_rps, options.admin_rps, options.admin_token_hash
                ),
                metrics=metrics,
                max_body_bytes=options.max_body_bytes,
            ),
        ],
    )
    app.state.prefix = prefix  # for /openapi.json
    app.state.store = store
    app.state.storage = storage
    app.state.options = options
    app.state.metrics = metrics
    app.state.audit = audit
    iceberg = IcebergOptions(options.iceberg, equality_observer(metrics))
    app.state.readers = TableReaders(
        storage,
        catalogs,
        store,
        iceberg,
        snapshots=SnapshotCache(options.snapshot_cache_files),
        files_check_seconds=options.files_check_seconds,
        summaries=store,
    )
    vendor = CredentialVendor(options.vending) if options.vending.enabled else None
    app.state.iceberg_grants = IcebergGrants(app.state.readers, vendor)
    app.state.admin_token = admin_token
    app.state.warehouses = warehouses
    catalogs.own = OwnWarehouses(warehouses)
    app.state.secret = secret  # seals activation links' profiles
    app.state.warmer = SnapshotWarmer(
        store,
        app.state.readers,
        metrics,
        options.warm_on_start,
        options.refresh_seconds,
        options.warm_window_hours * 3600,
    )
    hint_limits = HintLimits(options.max_hint_nodes, options.hint_budget_ms)
    app.state.queries = TableQueries(app.state.readers, secret, hint_limits, options.prefer_delta_format)
    app.state.streams = StreamSlots(options.streams_per_token, options.streams_per_process)
    app.state.list_tokens = TokenCodec(secret, "list-page")
    app.state.admin = Admin(
        store, options.endpoint, lambda: catalogs, lambda: storage, options.max_token_lifetime, secret
    )
    app.state.activity = activity
    app.state.started = time.monotonic()
    app.state.console = None
    if options.admin_token_hash is not None:
        sessions = SessionCodec(secret, options.admin_token_hash, options.console_idle_minutes * 60)
        app.state.console = Console(app.state.admin, sessions, admin_token)
    return app
