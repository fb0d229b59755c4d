"""The OpenAPI bodies of server-side scan planning in both Iceberg catalogs, and its operations at
`/iceberg` (`iceberg_*plan*`, `*_tasks` routes; `/_iceberg`'s are in `catalog_plans.py`).

The bodies are the spec's (`PlanTableScanRequest`, `PlanTableScanResult`, `FetchScanTasksRequest`,
`FetchScanTasksResult`), described here as far as the server reads and writes them: a file scan
task's `data-file` is the spec's `DataFile`, `delete-file-references` index `delete-files`.
"""

from __future__ import annotations

from collections.abc import Callable

from sharing_server.openapi.shapes import (
    BOOLEAN,
    INTEGER,
    STRING,
    OperationKey,
    Schema,
    array,
    json_body,
    model,
    object_schema,
    parameter,
    response,
)

PLAN_ID = parameter("plan_id", "path", STRING, "A plan's id, as its plan answered it.", required=True)
ANY_OBJECT: Schema = {"type": "object"}
NO_PLAN = "No such plan id for this table and caller, or it expired (`NoSuchPlanIdException`)."
NO_TASK = "No such plan task for this table and caller, or it expired (`NoSuchPlanTaskException`)."
BAD_PLAN = (
    "A body that does not fit, a filter or column the table lacks, a snapshot it does not show, "
    "an incremental scan (not served), a filter too large (`BadRequestException`)."
)


def plan_schemas() -> dict[str, Schema]:
    tasks = {
        "plan-tasks": array(STRING),
        "file-scan-tasks": array(model("FileScanTask")),
        "delete-files": array(ANY_OBJECT),
    }
    return {
        "PlanTableScanRequest": object_schema(
            {},
            {
                "snapshot-id": INTEGER,
                "select": array(STRING),
                "filter": ANY_OBJECT,
                "case-sensitive": BOOLEAN,
                "use-snapshot-schema": BOOLEAN,
                "start-snapshot-id": INTEGER,
                "end-snapshot-id": INTEGER,
                "stats-fields": array(STRING),
                "min-rows-requested": INTEGER,
            },
        ),
        "FileScanTask": object_schema(
            {"data-file": ANY_OBJECT},
            {"delete-file-references": array(INTEGER), "residual-filter": ANY_OBJECT},
        ),
        "PlanTableScanResult": object_schema(
            # `submitted` to a client that polls, past the budget; `cancelled` once cancelled.
            {"status": {"type": "string", "enum": ["completed", "submitted", "cancelled"]}},
            {"plan-id": STRING, **tasks, "storage-credentials": array(model("StorageCredential"))},
        ),
        "FetchScanTasksRequest": object_schema({"plan-task": STRING}),
        "FetchScanTasksResult": object_schema({}, tasks),
    }


#: `iceberg_shares._operation`: (id, summary, (description, schema), statuses, parameters, body).
Operation = Callable[..., Schema]


def share_plan_operations(
    make: Operation, prefix: str, names: str, table: list[Schema]
) -> dict[OperationKey, Schema]:
    """The share catalog's planning operations, route names `iceberg_{names}…`, ids `iceberg{prefix}…`."""
    return {
        (f"iceberg_{names}table_plan", "POST"): make(
            f"iceberg{prefix}PlanTableScan", "Plan a scan of what a shared table's grant shows",
            ("The plan.", "PlanTableScanResult"), (400, 401, 404, 503), table,
            json_body(model("PlanTableScanRequest")),
        ),
        (f"iceberg_{names}plan", "GET"): make(
            f"iceberg{prefix}FetchPlanningResult", "A plan again, by its id",
            ("The plan.", "PlanTableScanResult"), (401, 404, 503), [*table, PLAN_ID],
        ),
        (f"iceberg_{names}plan", "DELETE"): _no_content(make(
            f"iceberg{prefix}CancelPlanning", "Cancel a plan (nothing is held for it)",
            ("Cancelled.", "PlanTableScanResult"), (401, 404), [*table, PLAN_ID],
        )),
        (f"iceberg_{names}table_tasks", "POST"): make(
            f"iceberg{prefix}FetchScanTasks", "The file scan tasks of one plan task",
            ("The tasks.", "FetchScanTasksResult"), (400, 401, 404, 503), table,
            json_body(model("FetchScanTasksRequest")),
        ),
    }  # fmt: skip


def _no_content(spec: Schema) -> Schema:
    """`spec` answering 204 with no body where `make` gave it a 200 with one (a cancel)."""
    others = {status: answer for status, answer in spec["responses"].items() if status != "200"}
    return {**spec, "responses": {"204": response("Cancelled: nothing was held."), **others}}
