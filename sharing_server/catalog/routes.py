"""The route table of AIStor Tables' catalog API, and its mount at `/_iceberg` (`catalog_mount`),
whose errors are answered in the Iceberg REST model by one exception handling (`NOT_FOUND` the
type of a 404 by route).

Anything else under the prefix (scan planning, credentials while vending is off) answers 404
in the spec's error model, so a client learns the endpoint is not served
rather than guessing from an HTML page.
"""

from __future__ import annotations

import os

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from share_store.catalog.callers import CatalogCallers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.data_access import DataAccess
from share_store.catalog.idempotency import lifetime_text
from share_store.catalog.idempotency_keys import IdempotencyKeys
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.maintenance.queue import RunQueue
from share_store.iceberg.plan_runs import SCAN_PLAN_BUDGET, PlanRuns
from share_store.iceberg.scan_plans import PlanTokens
from share_store.signing.token_codec import TokenCodec
from sharing_server import paths
from sharing_server.auth.catalog_callers import CatalogTokens
from sharing_server.catalog.idempotent_routes import idempotent_routes
from sharing_server.catalog.maintenance import MaintenanceEndpoints
from sharing_server.catalog.scan_plans import PlanEndpoints
from sharing_server.catalog.tables import TableEndpoints
from sharing_server.catalog.views import ViewEndpoints
from sharing_server.catalog.warehouses import WarehouseEndpoints
from sharing_server.http.errors import error_response
from sharing_server.http.iceberg_errors import iceberg_error_model
from sharing_server.observability.redaction import redact_path

WAREHOUSE_MISSING, NAMESPACE_MISSING, VIEW_MISSING = (
    "NoSuchWarehouseException",
    "NoSuchNamespaceException",
    "NoSuchViewException",
)
#: The Iceberg type of a 404 whose error names none (`NoSuchTableException` for routes not here).
NOT_FOUND = {
    "warehouse_config": WAREHOUSE_MISSING,
    "warehouses_list": WAREHOUSE_MISSING,
    "warehouses_create": WAREHOUSE_MISSING,
    "warehouse": WAREHOUSE_MISSING,
    "warehouse_properties": WAREHOUSE_MISSING,
    "warehouse_maintenance": WAREHOUSE_MISSING,
    "warehouse_maintenance_put": WAREHOUSE_MISSING,
    "warehouse_namespaces": NAMESPACE_MISSING,
    "warehouse_namespace": NAMESPACE_MISSING,
    "warehouse_namespace_properties": NAMESPACE_MISSING,
    "warehouse_tables": NAMESPACE_MISSING,
    "warehouse_register": NAMESPACE_MISSING,
    "warehouse_views": NAMESPACE_MISSING,
    "warehouse_register_view": NAMESPACE_MISSING,
    "warehouse_view": VIEW_MISSING,
    "warehouse_view_rename": VIEW_MISSING,
    "warehouse_view_undrop": VIEW_MISSING,
}


async def not_served(request: Request) -> Response:
    # The path as logs name it: a GET of a signer's URL would echo its grant.
    message = f"No such endpoint: {request.method} {redact_path(request.url.path)}"
    return error_response(request, 404, "RESOURCE_DOES_NOT_EXIST", message, kind="NoSuchEndpointException")


def warehouse_api(
    catalog: WarehouseCatalog,
    callers: CatalogCallers,
    data: DataAccess,
    maintainer: Maintainer | None = None,
    queue: RunQueue | None = None,
    keys: IdempotencyKeys | None = None,
    plans: TokenCodec | None = None,
    runs: PlanRuns | None = None,
) -> list[BaseRoute]:
    """The routes, their handlers given the catalog, its callers and its data access, and the
    maintainer and run queue the server's background maintenance shares (nothing looked up per
    request); with `keys`, the mutations take an `Idempotency-Key` (`idempotent_routes`)."""
    every = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]
    r, t = WarehouseEndpoints(catalog, callers, data), TableEndpoints(catalog, callers, data)
    v = ViewEndpoints(catalog, callers, data)
    # Plan tokens signed with the server's key (`plans`), which every replica shares; without one,
    # a key of this process only (its tokens are refused elsewhere).
    # `runs`: the plans made in the background past their budget (`[limits] scan_plan_budget`).
    tokens_of_plans = PlanTokens(plans or TokenCodec(os.urandom(32), "scan-plan"))
    p = PlanEndpoints(catalog, callers, data, tokens_of_plans, runs or PlanRuns(SCAN_PLAN_BUDGET))
    r.idempotency = None if keys is None else lifetime_text(keys.lifetime)  # advertised when served
    tokens = CatalogTokens(callers)
    m = MaintenanceEndpoints(maintainer or Maintainer(catalog), callers, queue)
    routes: list[BaseRoute] = [
        Route(paths.WAREHOUSE_CONFIG, r.config, methods=["GET"], name="warehouse_config"),
        Route(paths.WAREHOUSE_OAUTH_TOKENS, tokens.token, methods=["POST"], name="warehouse_oauth"),
        Route(paths.WAREHOUSES, r.warehouses, methods=["GET"], name="warehouses_list"),
        Route(paths.WAREHOUSES, r.warehouses, methods=["POST"], name="warehouses_create"),
        Route(paths.WAREHOUSE, r.warehouse, methods=["GET", "HEAD", "DELETE"], name="warehouse"),
        Route(
            paths.WAREHOUSE_PROPERTIES, r.warehouse_properties, methods=["POST"], name="warehouse_properties"
        ),
        Route(paths.WAREHOUSE_NAMESPACES, r.namespaces, methods=["GET", "POST"], name="warehouse_namespaces"),
        Route(
            paths.WAREHOUSE_NAMESPACE,
            r.namespace,
            methods=["GET", "HEAD", "DELETE"],
            name="warehouse_namespace",
        ),
        Route(
            paths.WAREHOUSE_NAMESPACE_PROPERTIES,
            r.namespace_properties,
            methods=["POST"],
            name="warehouse_namespace_properties",
        ),
        Route(paths.WAREHOUSE_TABLES, t.tables, methods=["GET", "POST"], name="warehouse_tables"),
        Route(
            paths.WAREHOUSE_TABLE, t.table, methods=["GET", "HEAD", "POST", "DELETE"], name="warehouse_table"
        ),
        Route(paths.WAREHOUSE_TABLE_METRICS, t.metrics, methods=["POST"], name="warehouse_table_metrics"),
        Route(
            paths.WAREHOUSE_TABLE_CREDENTIALS,
            t.credentials,
            methods=["GET"],
            name="warehouse_table_credentials",
        ),
        Route(paths.WAREHOUSE_TABLE_PLAN, p.plan, methods=["POST"], name="warehouse_table_plan"),
        Route(paths.WAREHOUSE_TABLE_PLAN_ID, p.plan_by_id, methods=["GET", "DELETE"], name="warehouse_plan"),
        Route(paths.WAREHOUSE_TABLE_TASKS, p.tasks, methods=["POST"], name="warehouse_table_tasks"),
        Route(paths.WAREHOUSE_S3_SIGN, t.sign, methods=["POST"], name="warehouse_s3_sign"),
        Route(paths.WAREHOUSE_TABLE_SIGN, t.sign_table, methods=["POST"], name="warehouse_table_sign"),
        Route(paths.WAREHOUSE_REGISTER, t.register, methods=["POST"], name="warehouse_register"),
        Route(paths.WAREHOUSE_RENAME, t.rename, methods=["POST"], name="warehouse_rename"),
        Route(paths.WAREHOUSE_UNDROP, t.undrop, methods=["POST"], name="warehouse_undrop"),
        Route(paths.WAREHOUSE_TRANSACTIONS, t.transaction, methods=["POST"], name="warehouse_transactions"),
        Route(paths.WAREHOUSE_VIEWS, v.views, methods=["GET", "POST"], name="warehouse_views"),
        Route(paths.WAREHOUSE_VIEW, v.view, methods=["GET", "HEAD", "POST", "DELETE"], name="warehouse_view"),
        Route(paths.WAREHOUSE_REGISTER_VIEW, v.register, methods=["POST"], name="warehouse_register_view"),
        Route(paths.WAREHOUSE_VIEW_RENAME, v.rename, methods=["POST"], name="warehouse_view_rename"),
        Route(paths.WAREHOUSE_VIEW_UNDROP, v.undrop, methods=["POST"], name="warehouse_view_undrop"),
        Route(paths.WAREHOUSE_MAINTENANCE, m.warehouse, methods=["GET"], name="warehouse_maintenance"),
        Route(
            paths.WAREHOUSE_MAINTENANCE_KIND, m.warehouse, methods=["PUT"], name="warehouse_maintenance_put"
        ),
        Route(paths.WAREHOUSE_TABLE_MAINTENANCE, m.table, methods=["GET"], name="table_maintenance"),
        Route(paths.WAREHOUSE_TABLE_MAINTENANCE_RUN, m.run, methods=["POST"], name="table_maintenance_run"),
        Route(paths.WAREHOUSE_TABLE_MAINTENANCE_KIND, m.table, methods=["PUT"], name="table_maintenance_put"),
        Route(
            paths.WAREHOUSE_TABLE_MAINTENANCE_STATUS,
            m.status,
            methods=["GET"],
            name="table_maintenance_status",
        ),
        Route(paths.WAREHOUSE_OTHER, not_served, methods=every, name="warehouse_not_served"),
    ]
    if keys is None:
        return routes
    return idempotent_routes(routes, keys, NOT_FOUND)


def catalog_mount(
    catalog: WarehouseCatalog,
    callers: CatalogCallers,
    data: DataAccess,
    maintainer: Maintainer | None = None,
    queue: RunQueue | None = None,
    keys: IdempotencyKeys | None = None,
    plans: TokenCodec | None = None,
    runs: PlanRuns | None = None,
) -> Mount:
    """`/_iceberg`: the routes, behind the Iceberg error model. Its callers are catalog users, not
    share tokens: a refused proof is not named in the audit line as a token."""
    routes = warehouse_api(catalog, callers, data, maintainer, queue, keys, plans, runs)
    errors = iceberg_error_model(routes, NOT_FOUND, names_tokens=False)
    return Mount(paths.WAREHOUSE_PREFIX, routes=routes, middleware=[errors])
