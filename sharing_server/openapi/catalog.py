"""The OpenAPI specs of AIStor Tables' writable Iceberg REST catalog under `/_iceberg`.

Operations are found by the names of `sharing_server.catalog.routes`'s
routes. Every one but the token endpoint and the catch-all authenticates its
caller (SigV4 with signing name `s3tables`, a catalog access token, or the
admin token) and checks the caller's policy for the `s3tables:` action that its
description names (`share_store.catalog.policies`). Refusals are in the
Iceberg REST error model (`IcebergError`), but for 413 and 429, which come
before the catalog sees the request; a path whose names do not fit its route
(a `/` in a name) is the catch-all's 404. As for the read-only catalog, HEAD is
left implied by GET: it answers 204 or the error's status, with no body.
The operations are written with `warehouse_shapes`, which holds the bodies; commits'
are in `warehouse_commits`, views' in `warehouse_views`.
"""

from __future__ import annotations

from share_store.catalog import policies as actions
from sharing_server.openapi.catalog_commits import commit_operations
from sharing_server.openapi.catalog_idempotency import with_idempotency_keys
from sharing_server.openapi.catalog_maintenance import maintenance_operations, maintenance_schemas
from sharing_server.openapi.catalog_plans import warehouse_plan_operations
from sharing_server.openapi.catalog_shapes import (
    BAD_NAMES,
    DROPPED,
    NAMESPACE,
    NO_CONTENT,
    NO_NAMESPACE,
    NO_TABLE,
    NO_WAREHOUSE,
    PREFIX,
    TABLE,
    TAG,
    UNAVAILABLE,
    WAREHOUSE,
    catalog_operation,
    not_found,
    on_table,
    on_warehouse,
    returns,
    schemas,
)
from sharing_server.openapi.catalog_views import view_operations, view_schemas
from sharing_server.openapi.components import NO_AUTH, errors
from sharing_server.openapi.delta_sharing import token_operation
from sharing_server.openapi.shapes import (
    BOOLEAN,
    STRING,
    Area,
    OperationKey,
    Schema,
    json_content,
    model,
    operation,
    parameter,
    query,
    response,
)


def area() -> Area:
    return Area(
        tags={
            TAG: "AIStor Tables: a writable Iceberg REST catalog of warehouses (SigV4 `s3tables` or "
            "bearer tokens; each catalog user's IAM-style policy decides what it may do)."
        },
        operations=with_idempotency_keys(
            {
                **_catalog_operations(),
                **_namespace_operations(),
                **_table_operations(),
                **commit_operations(),
                **view_operations(),
                **maintenance_operations(),
                **warehouse_plan_operations(),
                **_not_served(),
            }
        ),
        schemas={**schemas(), **view_schemas(), **maintenance_schemas()},
    )


def _catalog_operations() -> dict[OperationKey, Schema]:
    """Configuration, tokens and warehouses."""
    warehouse = parameter("warehouse", "path", WAREHOUSE, "The warehouse.")
    bad_warehouse = {400: "An invalid warehouse name (`BadRequestException`)."}
    oauth = token_operation()
    return {
        ("warehouse_config", "GET"): catalog_operation(
            "warehouseConfig",
            "A warehouse's catalog configuration",
            "The prefix of the warehouse's paths (`overrides.prefix`, its name) and the endpoints served.",
            returns("Defaults, overrides, endpoints.", "CatalogConfig"),
            {400: "No warehouse named, or an invalid name (`BadRequestException`).", 404: NO_WAREHOUSE},
            on_warehouse(actions.GET_TABLE_BUCKET),
            [parameter("warehouse", "query", WAREHOUSE, "The warehouse (a plain name, no `s3://`).", True)],
        ),
        ("warehouse_oauth", "POST"): {
            **oauth,
            "operationId": "warehouseOAuthTokens",
            "summary": "A catalog user's keys for a bearer token (OAuth2 client credentials)",
            "description": "For engines that cannot sign SigV4: the client id is the user's access key, "
            "the secret its secret key. The token is valid for an hour, while the user exists.",
            "tags": [TAG],
            "responses": {
                **oauth["responses"],
                "200": response("A catalog access token.", json_content(model("AccessToken"))),
            },
        },
        ("warehouses_list", "GET"): catalog_operation(
            "listWarehouses",
            "List warehouses",
            f"The warehouses the caller's policy allows `{actions.LIST_TABLE_BUCKETS}` on (all of them "
            "for the admin token).",
            returns("Warehouses.", "WarehouseList"),
            {},
            None,
        ),
        ("warehouses_create", "POST"): catalog_operation(
            "createWarehouse",
            "Create a warehouse",
            "A warehouse and the storage bucket of the same name that holds its tables. A bucket that "
            "exists already is refused unless the admin token asks to `adopt` it.",
            returns("Created.", "Warehouse"),
            {
                400: "An invalid name or body (`BadRequestException`).",
                406: "The storage cannot create buckets (`UnsupportedOperationException`).",
                409: "The warehouse, or a bucket of that name, exists (`AlreadyExistsException`).",
                503: UNAVAILABLE,
            },
            on_warehouse(actions.CREATE_TABLE_BUCKET),
            body="CreateWarehouseRequest",
        ),
        ("warehouse", "GET"): catalog_operation(
            "loadWarehouse",
            "A warehouse (HEAD: whether it exists)",
            "The warehouse's name and table defaults; HEAD answers 204 with no body if it exists.",
            returns("The warehouse.", "Warehouse"),
            {**bad_warehouse, 404: NO_WAREHOUSE},
            on_warehouse(actions.GET_TABLE_BUCKET),
            [warehouse],
        ),
        ("warehouse_properties", "POST"): catalog_operation(
            "updateWarehouseProperties",
            "Set and remove a warehouse's table defaults and dropped tables' retention",
            "Its `table-default.*` properties (e.g. `table-default.format-version`), which new tables "
            "of every namespace in it start with, under the namespace's own and the create's, and "
            "`dropped-table-retention-seconds` (whole seconds, 7 days unless set): how long a table "
            "dropped without purge is kept before maintenance purges it. Applied together, as a "
            "namespace's properties are. The admin token only: they apply to every user's tables.",
            returns("What was updated, removed and missing.", "UpdateNamespacePropertiesResponse"),
            {
                **bad_warehouse,
                400: "An invalid name, a body that does not fit, a key that is neither `table-default.*` "
                "nor the retention (or a retention that is no whole number of seconds), or a key both "
                "updated and removed (`BadRequestException`).",
                403: "Not the admin token, or a SigV4 signature that does not verify (`ForbiddenException`).",
                404: NO_WAREHOUSE,
            },
            None,
            [warehouse],
            body="UpdateNamespacePropertiesRequest",
        ),
        ("warehouse", "DELETE"): catalog_operation(
            "dropWarehouse",
            "Drop an empty warehouse",
            "Its bucket goes too, if nothing else is left in it.",
            (204, NO_CONTENT),
            {
                **bad_warehouse,
                404: NO_WAREHOUSE,
                409: "The warehouse holds namespaces, or dropped tables not purged yet "
                "(`NamespaceNotEmptyException`).",
                503: UNAVAILABLE,
            },
            on_warehouse(actions.DELETE_TABLE_BUCKET),
            [warehouse],
        ),
    }


def _namespace_operations() -> dict[OperationKey, Schema]:
    names = {400: BAD_NAMES + " (`BadRequestException`)."}
    return {
        ("warehouse_namespaces", "GET"): catalog_operation(
            "warehouseListNamespaces",
            "List namespaces",
            "The namespaces right under `parent`, or the top-level ones; in one page.",
            returns("Namespaces.", "ListNamespacesResponse"),
            {**names, 404: NO_NAMESPACE},
            on_warehouse(actions.LIST_NAMESPACES),
            [PREFIX, query("parent", STRING, "A namespace: its levels joined by `%1F`.")],
        ),
        ("warehouse_namespaces", "POST"): catalog_operation(
            "warehouseCreateNamespace",
            "Create a namespace",
            "A nested namespace's parent must exist.",
            returns("The namespace and its properties.", "Namespace"),
            {
                400: BAD_NAMES + ", or a body that does not fit (`BadRequestException`).",
                404: "No such warehouse, or no parent namespace (`NoSuchWarehouseException`, "
                "`NoSuchNamespaceException`).",
                409: "The namespace exists (`AlreadyExistsException`).",
            },
            on_warehouse(actions.CREATE_NAMESPACE),
            [PREFIX],
            "CreateNamespaceRequest",
        ),
        ("warehouse_namespace", "GET"): catalog_operation(
            "warehouseLoadNamespace",
            "A namespace (HEAD: whether it exists)",
            "The namespace and its properties; HEAD answers 204 with no body if it exists.",
            returns("The namespace.", "Namespace"),
            {**names, 404: NO_NAMESPACE},
            on_warehouse(actions.GET_NAMESPACE),
            [PREFIX, NAMESPACE],
        ),
        ("warehouse_namespace", "DELETE"): catalog_operation(
            "warehouseDropNamespace",
            "Drop an empty namespace",
            "Refused while it holds tables or namespaces.",
            (204, NO_CONTENT),
            {
                **names,
                404: NO_NAMESPACE,
                409: "The namespace holds tables or namespaces (`NamespaceNotEmptyException`).",
            },
            on_warehouse(actions.DELETE_NAMESPACE),
            [PREFIX, NAMESPACE],
        ),
        ("warehouse_namespace_properties", "POST"): catalog_operation(
            "warehouseUpdateNamespaceProperties",
            "Set and remove a namespace's properties",
            "Applied together; removals of keys that are not set are reported as missing.",
            returns("What was updated, removed and missing.", "UpdateNamespacePropertiesResponse"),
            {
                400: BAD_NAMES + ", a body that does not fit, or a key both updated and removed "
                "(`BadRequestException`).",
                404: NO_NAMESPACE,
            },
            on_warehouse(actions.UPDATE_NAMESPACE_PROPERTIES),
            [PREFIX, NAMESPACE],
            "UpdateNamespacePropertiesRequest",
        ),
    }


def _table_operations() -> dict[OperationKey, Schema]:
    names = BAD_NAMES + " (`BadRequestException`)."
    table = [PREFIX, NAMESPACE, TABLE]
    return {
        ("warehouse_tables", "GET"): catalog_operation(
            "warehouseListTables",
            "List a namespace's tables (or its dropped ones)",
            "In one page. With `dropped=true`, the tables dropped without purge instead, each in "
            "`dropped` with its id, when it was dropped and when it is purged (a namespace dropped since "
            "still lists them).",
            returns("Table identifiers.", "ListTablesResponse"),
            {400: names, 404: NO_NAMESPACE},
            on_warehouse(actions.LIST_TABLES),
            [PREFIX, NAMESPACE, DROPPED],
        ),
        ("warehouse_tables", "POST"): catalog_operation(
            "warehouseCreateTable",
            "Create a table (or stage its creation)",
            "Writes the table's first metadata file under its location (a new one in the warehouse by "
            "default); with `stage-create`, writes nothing and answers the metadata a create "
            "transaction then commits (`assert-create`).",
            returns("The table's metadata (and where it is, unless staged).", "LoadTableResult"),
            {
                400: BAD_NAMES + ", a location outside the warehouse, or a body that does not fit "
                "(`BadRequestException`).",
                404: NO_NAMESPACE,
                409: "The table exists (`AlreadyExistsException`).",
                503: UNAVAILABLE,
            },
            on_table(actions.CREATE_TABLE, "the new table"),
            [PREFIX, NAMESPACE],
            "CreateTableRequest",
        ),
        ("warehouse_table", "GET"): catalog_operation(
            "warehouseLoadTable",
            "Load a table (HEAD: whether it exists)",
            "Its current metadata and where it is; HEAD answers 204, or 404, with no body.",
            returns("The table.", "LoadTableResult"),
            {
                400: BAD_NAMES + ", or `snapshots` neither `all` nor `refs` (`BadRequestException`).",
                404: NO_TABLE,
                500: "The table's metadata file is gone from storage (`ServiceFailureException`).",
                503: UNAVAILABLE,
            },
            on_table(actions.GET_TABLE) + f" or `{actions.GET_TABLE_METADATA_LOCATION}`",
            [
                *table,
                query(
                    "snapshots",
                    {"type": "string", "enum": ["all", "refs"], "default": "all"},
                    "`refs`: only the snapshots a branch or tag points at.",
                ),
            ],
        ),
        ("warehouse_table", "DELETE"): catalog_operation(
            "warehouseDropTable",
            "Drop a table",
            "Drops the table: it is kept, with its files and its location, for its warehouse's retention "
            "(undroppable: `POST /v1/{prefix}/tables/undrop`), then purged by maintenance; its name is "
            "free at once. With `purgeRequested`, forgets it and deletes the files its metadata reaches "
            "inside its location now.",
            (204, NO_CONTENT),
            {400: names, 404: NO_TABLE, 503: UNAVAILABLE},
            on_table(actions.DELETE_TABLE),
            [
                *table,
                query("purgeRequested", {**BOOLEAN, "default": False}, "Delete the table's files too."),
            ],
        ),
        ("warehouse_table_metrics", "POST"): catalog_operation(
            "warehouseReportMetrics",
            "Report a scan's or a commit's metrics",
            "Accepted and dropped (the request is in the audit log).",
            (204, NO_CONTENT),
            {
                400: BAD_NAMES + ", or a body that is not a JSON object (`BadRequestException`).",
                404: NO_TABLE,
            },
            on_table(actions.GET_TABLE),
            table,
            "ReportMetricsRequest",
        ),
        ("warehouse_table_credentials", "GET"): catalog_operation(
            "warehouseLoadCredentials",
            "Fresh keys for a table's location (writers' credential vending on)",
            "STS keys whose session policy allows reading, and with `s3tables:PutTableData` writing and "
            "deleting, only under the table's recorded location. Refused with the setting to turn on "
            "(`[warehouses] access_delegation`) while it is off.",
            returns("Keys and the location they serve.", "LoadCredentialsResult"),
            {
                400: BAD_NAMES + ", or vending is off (`BadRequestException`).",
                404: NO_TABLE,
                406: "The storage is not S3 with static keys (`UnsupportedOperationException`).",
                503: UNAVAILABLE,
            },
            on_table(actions.GET_TABLE_DATA),
            table,
        ),
        ("warehouse_table_sign", "POST"): catalog_operation(
            "warehouseSignTableRequest",
            "Sign one S3 request of a writer's engine for this table (Iceberg 1.11's signer)",
            "The caller authenticated as for any call (bearer or SigV4), the table named by the path: "
            "the same decision as the grant's signer, on the table's recorded location and the "
            "caller's policy now. `provider` is `s3` (or unsaid).",
            returns("Headers that authorize the request.", "S3SignResult"),
            {
                400: "A body that does not fit, another provider, or signing is off (`BadRequestException`).",
                404: NO_TABLE,
                503: UNAVAILABLE,
            },
            f"`{actions.GET_TABLE_DATA}` (reads) or `{actions.PUT_TABLE_DATA}` (writes)",
            table,
            "S3SignRequest",
        ),
        ("warehouse_s3_sign", "POST"): catalog_operation(
            "warehouseSignS3Request",
            "Sign one S3 request of a writer's engine (remote signing)",
            "The grant in the path comes with a table load (`s3.signer.endpoint`) and names the caller "
            "and the table: a GET or HEAD of one object under the table's location is signed if the "
            f"caller's policy allows `{actions.GET_TABLE_DATA}`, a PUT, DELETE or multipart step if it "
            f"allows `{actions.PUT_TABLE_DATA}`; anything else is refused. No other credentials.",
            returns("Headers that authorize the request.", "S3SignResult"),
            {400: "A body that does not fit, or signing is off (`BadRequestException`).", 503: UNAVAILABLE},
            None,
            [PREFIX, parameter("grant", "path", STRING, "The grant a table load handed out.")],
            "S3SignRequest",
        ),
    }


def _not_served() -> dict[OperationKey, Schema]:
    """Anything else under `/_iceberg` (scan planning, credentials while vending is off): 404 to anyone."""
    return {
        ("warehouse_not_served", method): operation(
            f"warehouseNotServed{method.title()}",
            "Any other catalog endpoint: 404",
            TAG,
            NO_AUTH,
            {"404": not_found("No such endpoint (`NoSuchEndpointException`)."), **errors(429)},
            [parameter("rest", "path", STRING, "The rest of the path.")],
            description="Scan planning, credentials and whatever else `/v1/config` does not list "
            "are not served; no credentials are checked.",
        )
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
    }
