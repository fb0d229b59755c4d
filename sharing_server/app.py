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
import gc
import importlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.idempotency_keys import IdempotencyKeys
from share_store.persistence import ShareStore
from share_store.readers.directory_access import DirectoryAccess
from share_store.signing.token_codec import TokenCodec
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from sharing_server import paths
from sharing_server.admin.activation import Activation
from sharing_server.admin.routes import admin_routes
from sharing_server.auth.oauth import OAuthTokens
from sharing_server.catalog.routes import catalog_mount
from sharing_server.console.routes import console_routes
from sharing_server.delta_sharing.routes import ProtocolEndpoints
from sharing_server.delta_sharing.table_credentials import TableAccessEndpoints
from sharing_server.http.connections import ConnectionGuard
from sharing_server.http.error_models import APP_ROOT
from sharing_server.http.errors import EXCEPTION_HANDLERS
from sharing_server.http.files import LocalFiles
from sharing_server.http.middleware import ForwardedHeaders, Observe, RequestLimits, SecurityHeaders
from sharing_server.http.rate_limits import RateLimiter
from sharing_server.iceberg_shares.routes import ShareCatalog, iceberg_mount
from sharing_server.observability.audit import AuditLog
from sharing_server.observability.metrics import MetricsEndpoint
from sharing_server.openapi.document import OpenApiEndpoint
from sharing_server.service_options import ServiceOptions
from sharing_server.services import AppServices, app_services
from sharing_server.serving import quiet_aborted_connections


async def health(_request: object) -> Response:
    return Response("ok\n", media_type="text/plain")


def protocol_routes(services: AppServices) -> list[Route]:
    directory = DirectoryAccess(services.storage, services.iceberg_grants.vendor)
    endpoints = ProtocolEndpoints(
        services.store,
        services.queries,
        services.streams,
        services.list_tokens,
        services.options.stream_buffer_bytes,
        services.async_queries,
        directory=directory,
    )
    tables = TableAccessEndpoints(services.store, directory)
    lifetime = timedelta(seconds=services.options.access_token_lifetime)
    oauth = OAuthTokens(services.store, lifetime)
    activation = Activation(services.store, services.secret)
    return [
        Route(paths.SHARES, endpoints.list_shares, methods=["GET"]),
        Route(paths.ACTIVATION, activation.activate, methods=["GET"], name="activation"),
        Route(paths.SHARE, endpoints.get_share, methods=["GET"]),
        Route(paths.SCHEMAS, endpoints.list_schemas, methods=["GET"]),
        Route(paths.TABLES, endpoints.list_tables, methods=["GET"]),
        Route(paths.ALL_TABLES, endpoints.list_all_tables, methods=["GET"]),
        # The legacy HEAD form answers like /version.
        Route(paths.TABLE, endpoints.table_version, methods=["HEAD"]),
        Route(paths.TABLE_VERSION, endpoints.table_version, methods=["GET"]),
        Route(paths.TABLE_METADATA, endpoints.table_metadata, methods=["GET"]),
        Route(paths.TABLE_QUERY, endpoints.table_query, methods=["POST"]),
        Route(paths.TABLE_CHANGES, endpoints.table_changes, methods=["GET"]),
        Route(paths.TABLE, tables.get_table, methods=["GET"]),
        Route(paths.TABLE_CREDENTIALS, tables.temporary_table_credentials, methods=["POST"]),
        Route(paths.TABLE_QUERY_INFO, endpoints.query_info, methods=["POST"]),
        Route(paths.OAUTH_TOKEN, oauth.token_endpoint, methods=["POST"]),
        Route(paths.FILE, LocalFiles(services.storage).serve_file, methods=["GET", "HEAD"]),
    ]


def idempotency_keys(services: AppServices) -> IdempotencyKeys | None:
    """`/_iceberg`'s idempotency keys in the store, unless `[warehouses] idempotency_key_minutes`
    is 0 (then no key is served, nor advertised)."""
    minutes = services.options.idempotency_key_minutes
    if minutes == 0:
        return None
    return IdempotencyKeys(services.store.transactions, services.secret, lifetime=timedelta(minutes=minutes))


def app_routes(services: AppServices) -> list[BaseRoute]:
    """Everything the app serves: what `create_app` routes and `/openapi.json` describes. Each
    package's routes are given the services their handlers use; none looks one up per request."""
    plans = TokenCodec(services.secret, "scan-plan")  # one key on every replica: any answers a plan task
    runs = services.plan_runs  # plans past their budget, of both catalogs
    share_catalog = ShareCatalog(services.store, services.iceberg_grants, services.metrics, plans, runs)
    share_oauth = OAuthTokens(services.store, timedelta(seconds=services.options.access_token_lifetime))
    return [
        Route(paths.HEALTHZ, health, methods=["GET"]),
        Route(paths.OPENAPI, OpenApiEndpoint(services.prefix).openapi_endpoint, methods=["GET"]),
        Route(paths.METRICS, MetricsEndpoint(services.metrics).metrics_endpoint, methods=["GET"]),
        Mount(services.prefix, routes=protocol_routes(services)),
        Mount(paths.ADMIN_PREFIX, routes=admin_routes(services.admin, services.admin_token)),
        iceberg_mount(share_catalog, share_oauth),
        catalog_mount(
            services.warehouses,
            services.callers,
            services.data,
            services.maintenance.maintainer,
            services.maintenance.queue,
            idempotency_keys(services),
            TokenCodec(services.secret, "scan-plan-writers"),
            runs,
        ),
        Mount(paths.CONSOLE_PREFIX, routes=console_routes(services.console)),
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
#: What restricted tables need, preloaded as the server starts when it shares one (20 MB a server
#: without one never holds): their reader (pyarrow's compute and Parquet writer), and sqlglot with
#: its Spark dialect (loaded on first use), which parses their row filters. A first restricted
#: request would wait ~0.3 s for them.
RESTRICTION_MODULES = ("sqlglot", "sqlglot.dialects.spark", "share_store.restrictions.restricted_reader")
#: What the writable catalog's requests need beyond those, imported on first use (a server without
#: own warehouses never needs them: 17 MB it would hold, the million-entry log's peak 259 -> 241 MB),
#: and preloaded as the server starts when it has own warehouses (a first request would wait
#: about 60 ms for them): the SigV4 callers' sealed secrets, pyiceberg's REST request models, and
#: its pyarrow FileIO, which reads the tables' manifests.
CATALOG_MODULES = (
    "cryptography.hazmat.primitives.ciphers.aead",
    "pyiceberg.catalog.rest",
    "pyiceberg.io.pyarrow",
)


def _import_all(modules: tuple[str, ...]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional part missing: its first use will say so
            logger.debug("not preloaded: %s", name)


_heap_frozen = threading.Event()


def freeze_heap() -> None:
    """Leave what the process holds once started (modules, their tables, the app) out of every
    later garbage collection, the first time an app of this process starts.

    Some 200,000 objects, which each full collection walked while every request waited: under
    64 clients one took 140 to 490 ms, a pause all requests in flight shared (a tenth of them,
    so the p99). Frozen, one takes 5 ms. Objects frozen are still freed when no longer used;
    only a reference cycle among them would now stay, and at start there is little to leave.
    Once per process: tests start many apps in one, and freezing each would keep their cycles.
    """
    if _heap_frozen.is_set():
        return
    _heap_frozen.set()
    gc.collect()
    gc.freeze()


def _settle(modules: tuple[str, ...], warehouses: WarehouseCatalog, store: ShareStore) -> None:
    try:
        has_warehouses = bool(warehouses.list_warehouses())
    except Exception:
        logger.debug("own warehouses not listed; catalog modules load on first use", exc_info=True)
        has_warehouses = False
    try:
        restricts = any(table.restriction is not None for table in store.all_tables())
    except Exception:
        logger.debug("shared tables not listed; restriction modules load on first use", exc_info=True)
        restricts = False
    _import_all(
        modules + (CATALOG_MODULES if has_warehouses else ()) + (RESTRICTION_MODULES if restricts else ())
    )
    freeze_heap()


def lifespan(services: AppServices) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """As the server starts: heavy modules load (then what it holds is frozen, `freeze_heap`), shared
    tables' snapshots and the console's activity summaries are built in the background, without
    delaying it, and connections the kernel aborts for their stalled clients are logged in one line."""

    @asynccontextmanager
    async def span(_app: Starlette) -> AsyncIterator[None]:
        threading.Thread(
            target=_settle,
            args=(WARM_MODULES, services.warehouses, services.store),
            name="warm-imports",
            daemon=True,
        ).start()
        if services.console is not None:  # the console's Activity page is the only reader
            threading.Thread(target=services.activity.warm, name="warm-activity", daemon=True).start()
        quiet_aborted_connections(asyncio.get_running_loop())
        services.warmer.start()
        services.maintenance.start()
        yield
        await asyncio.to_thread(services.maintenance.stop)
        await asyncio.to_thread(services.warmer.stop)
        services.async_queries.close()
        # Recipients' last requests reach the store before the server stops.
        await asyncio.to_thread(services.activity.close)

    return span


class SharingApp(Starlette):
    """Starlette, with its handler of unexpected errors inside the middleware that sees every answer,
    and minus the exception it raises again once a 500 has been answered.

    Starlette puts its `ServerErrorMiddleware`, which hands an unexpected error (a bug, the share
    store's database gone) to `internal_error`, outside every middleware: its 500 or 503 would
    leave without the security headers and the request id, and the audit line and metrics would
    say 500 whatever it answered. Here it sits inside `OUTSIDE_ERRORS`, and outside the guards
    (`ConnectionGuard` ends a stalled send itself, which is no error to log).

    `ServerErrorMiddleware` then raises the error again for the ASGI server, which would log the
    whole traceback and message ("Error in ASGI Framework"): messages of storage and database
    errors may carry credentials. Mid-stream, returning without the body's end still makes the
    server cut the connection, so the client sees a broken response, not a short one.

    It also notes where the app starts (`error_models.APP_ROOT`): errors answered under the
    Iceberg catalogs' prefixes take their model, wherever the app is served or mounted.
    """

    OUTSIDE_ERRORS: tuple[type, ...] = (ForwardedHeaders, SecurityHeaders, Observe)

    def build_middleware_stack(self) -> ASGIApp:
        handlers = dict(self.exception_handlers)
        on_error = handlers.pop(500, None)
        on_error = handlers.pop(Exception, on_error)
        outer = [m for m in self.user_middleware if m.cls in self.OUTSIDE_ERRORS]
        inner = [m for m in self.user_middleware if m.cls not in self.OUTSIDE_ERRORS]
        middleware = [
            *outer,
            Middleware(ServerErrorMiddleware, handler=on_error, debug=self.debug),
            *inner,
            Middleware(ExceptionMiddleware, handlers=handlers, debug=self.debug),
        ]
        app: ASGIApp = self.router
        for cls, args, kwargs in reversed(middleware):
            app = cls(app, *args, **kwargs)
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        scope[APP_ROOT] = scope.get("root_path", "")
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
    services = app_services(store, storage, secret, prefix, catalogs, options)
    audit = AuditLog(options.audit_log)
    metrics, activity = services.metrics, services.activity
    app = SharingApp(
        routes=app_routes(services),
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan(services),
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
    # For operators and tests looking into a running app; no handler reads app.state.
    app.state.services = services
    return app
