"""The OpenAPI specs of the catalog's maintenance endpoints (sharing_server/catalog/maintenance.py),
in S3 Tables' shapes: a configuration's `value` is `{"status", "settings": {type: {...}}}`."""

from __future__ import annotations

from share_store.catalog import policies as actions
from share_store.catalog.maintenance.configuration import KINDS, TABLE_KINDS
from sharing_server.openapi.catalog_shapes import (
    BAD_NAMES,
    NAMESPACE,
    NO_CONTENT,
    NO_TABLE,
    NO_WAREHOUSE,
    PREFIX,
    TABLE,
    catalog_operation,
    on_table,
    on_warehouse,
    returns,
)
from sharing_server.openapi.shapes import STRING, OperationKey, Schema, object_schema, parameter

WAREHOUSE_PARAM = parameter("warehouse", "path", STRING, "The warehouse.", required=True)
KIND = parameter(
    "kind", "path", {"type": "string", "enum": list(KINDS)}, "The maintenance type.", required=True
)
BAD = BAD_NAMES + ", or a configuration that does not fit (`BadRequestException`)."


def maintenance_operations() -> dict[OperationKey, Schema]:
    table = [PREFIX, NAMESPACE, TABLE]
    run = catalog_operation(
        "runTableMaintenance", "Run a table's maintenance now",
        "Its enabled types in order (compaction, snapshot expiry, unreferenced-file removal), or only "
        "those a body's `types` names; each one's run as the job status records it.",
        returns("Each type's run.", "MaintenanceRuns"),
        {400: BAD, 404: NO_TABLE}, on_table(actions.PUT_TABLE_MAINTENANCE_CONFIGURATION), table,
        "MaintenanceRunRequest",
    )  # fmt: skip
    run["requestBody"]["required"] = False  # no body: every enabled type
    return {
        ("warehouse_maintenance", "GET"): catalog_operation(
            "getWarehouseMaintenance", "A warehouse's maintenance configuration",
            "Each type's status and settings as its tables get them unless they set their own "
            "(S3 Tables' defaults where the warehouse sets none).",
            returns("The configuration.", "MaintenanceConfiguration"),
            {400: BAD, 404: NO_WAREHOUSE}, on_warehouse(actions.GET_TABLE_BUCKET_MAINTENANCE_CONFIGURATION),
            [WAREHOUSE_PARAM],
        ),
        ("warehouse_maintenance_put", "PUT"): catalog_operation(
            "putWarehouseMaintenance", "Set a warehouse's maintenance of one type",
            f"Any of {', '.join(KINDS)}; `icebergUnreferencedFileRemoval` is set only here.",
            (204, NO_CONTENT), {400: BAD, 404: NO_WAREHOUSE},
            on_warehouse(actions.PUT_TABLE_BUCKET_MAINTENANCE_CONFIGURATION), [WAREHOUSE_PARAM, KIND],
            "MaintenanceValue",
        ),
        ("table_maintenance", "GET"): catalog_operation(
            "getTableMaintenance", "A table's maintenance configuration",
            "Its own settings over its warehouse's over the defaults.",
            returns("The configuration.", "MaintenanceConfiguration"),
            {400: BAD, 404: NO_TABLE}, on_table(actions.GET_TABLE_MAINTENANCE_CONFIGURATION), table,
        ),
        ("table_maintenance_put", "PUT"): catalog_operation(
            "putTableMaintenance", "Set a table's maintenance of one type",
            f"One of {', '.join(TABLE_KINDS)}.", (204, NO_CONTENT), {400: BAD, 404: NO_TABLE},
            on_table(actions.PUT_TABLE_MAINTENANCE_CONFIGURATION), [*table, KIND], "MaintenanceValue",
        ),
        ("table_maintenance_status", "GET"): catalog_operation(
            "getTableMaintenanceJobStatus", "A table's last maintenance runs",
            "Per type: `Not_Yet_Run`, `Disabled`, `Successful` or `Failed` (with `failureMessage`), "
            "`lastRunTimestamp` and what the run did.",
            returns("Each type's last run.", "MaintenanceStatus"),
            {400: BAD, 404: NO_TABLE}, on_table(actions.GET_TABLE_MAINTENANCE_JOB_STATUS), table,
        ),
        ("table_maintenance_run", "POST"): run,
    }  # fmt: skip


def maintenance_schemas() -> dict[str, Schema]:
    value = object_schema({"status": {"type": "string", "enum": ["enabled", "disabled"]}},
                          {"settings": {"type": "object"}})  # fmt: skip
    kinds = {"type": "array", "minItems": 1, "items": {"type": "string", "enum": list(KINDS)}}
    return {
        "MaintenanceValue": object_schema({"value": value}),
        "MaintenanceConfiguration": object_schema(
            {"configuration": {"type": "object"}}, {"table": STRING, "warehouse": STRING}
        ),
        "MaintenanceStatus": object_schema({"status": {"type": "object"}}),
        "MaintenanceRuns": object_schema({"runs": {"type": "object"}}),
        "MaintenanceRunRequest": object_schema({"types": kinds}),
    }
