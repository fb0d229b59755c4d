"""The OpenAPI operations of server-side scan planning at `/_iceberg` (`warehouse_*plan*`,
`warehouse_table_tasks` routes); the bodies are `scan_plans.plan_schemas`."""

from __future__ import annotations

from share_store.catalog import policies as actions
from sharing_server.openapi.catalog_shapes import (
    NAMESPACE,
    NO_TABLE,
    PREFIX,
    TABLE,
    UNAVAILABLE,
    catalog_operation,
    on_table,
    returns,
)
from sharing_server.openapi.scan_plans import BAD_PLAN, NO_PLAN, NO_TASK, PLAN_ID
from sharing_server.openapi.shapes import OperationKey, Schema, response


def warehouse_plan_operations() -> dict[OperationKey, Schema]:
    table = [PREFIX, NAMESPACE, TABLE]
    needs = on_table(actions.GET_TABLE_DATA)
    return {
        ("warehouse_table_plan", "POST"): catalog_operation(
            "warehousePlanTableScan",
            "Plan a scan of a table on the server",
            "Planned with pyiceberg's planner at the snapshot asked (the current one else): the tasks "
            "inline when the snapshot's data manifests have at most 1,000 files, else plan tasks (one "
            "per run of manifests) to fetch from `/tasks`. Always `completed`; `storage-credentials` "
            "when vended keys are asked for and served.",
            returns("The plan.", "PlanTableScanResult"),
            {400: BAD_PLAN, 404: NO_TABLE, 503: UNAVAILABLE},
            needs,
            table,
            "PlanTableScanRequest",
        ),
        ("warehouse_plan", "GET"): catalog_operation(
            "warehouseFetchPlanningResult",
            "A plan again, by its id",
            "Plans hold no state on the server: the id names the scan, planned again.",
            returns("The plan.", "PlanTableScanResult"),
            {404: NO_PLAN, 503: UNAVAILABLE},
            needs,
            [*table, PLAN_ID],
        ),
        ("warehouse_plan", "DELETE"): catalog_operation(
            "warehouseCancelPlanning",
            "Cancel a plan",
            "Nothing is held for a plan, so nothing is freed; an unknown id is a 404.",
            (204, response("Cancelled.")),
            {404: NO_PLAN},
            needs,
            [*table, PLAN_ID],
        ),
        ("warehouse_table_tasks", "POST"): catalog_operation(
            "warehouseFetchScanTasks",
            "The file scan tasks of one plan task",
            "At most 1,000 tasks, and a plan task for the rest of its run when there are more.",
            returns("The tasks.", "FetchScanTasksResult"),
            {400: "No `plan-task` (`BadRequestException`).", 404: NO_TASK, 503: UNAVAILABLE},
            needs,
            table,
            "FetchScanTasksRequest",
        ),
    }
