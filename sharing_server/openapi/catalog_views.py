"""The OpenAPI operations and bodies of AIStor Tables' views under `/_iceberg` (`warehouse_view*` routes).

A view is named as a table is and shares the tables' names in its namespace;
the caller's policy is asked the table actions on the view's table ARN
(AIStor's documentation names no view actions of its own).
"""

from __future__ import annotations

from share_store.catalog import policies as actions
from share_store.catalog.view_commits import VIEW_REQUIREMENTS, VIEW_UPDATES
from sharing_server.openapi.catalog_shapes import (
    BAD_NAMES,
    DROPPED,
    NAMESPACE,
    NO_CONTENT,
    NO_NAMESPACE,
    NULLABLE_STRING,
    PREFIX,
    STRING_MAP,
    UNAVAILABLE,
    catalog_operation,
    on_table,
    on_warehouse,
    returns,
)
from sharing_server.openapi.shapes import (
    INTEGER,
    NAME,
    STRING,
    OperationKey,
    Schema,
    array,
    model,
    object_schema,
    parameter,
)

VIEW = parameter("view", "path", NAME, "The view's name.")
NO_VIEW = "No such view (`NoSuchViewException`); a table of that name is no view."
TAKEN = "A table or view of that name exists (`AlreadyExistsException`)."


def view_operations() -> dict[OperationKey, Schema]:
    names = BAD_NAMES + " (`BadRequestException`)."
    view = [PREFIX, NAMESPACE, VIEW]
    return {
        ("warehouse_views", "GET"): catalog_operation(
            "warehouseListViews",
            "List a namespace's views (or its dropped ones)",
            "In one page. With `dropped=true`, the views dropped instead, as tables' are listed.",
            returns("View identifiers.", "ListTablesResponse"),
            {400: names, 404: NO_NAMESPACE},
            on_warehouse(actions.LIST_TABLES),
            [PREFIX, NAMESPACE, DROPPED],
        ),
        ("warehouse_views", "POST"): catalog_operation(
            "warehouseCreateView",
            "Create a view",
            "Writes the view's first metadata file (its schema as schema 0, its version as version 1) "
            "under its location, a new folder in the namespace's unless one inside it is asked for.",
            returns("The view's metadata and where it is.", "LoadViewResult"),
            {
                400: BAD_NAMES + ", a location outside the namespace's folder, or a body that does not "
                "fit (`BadRequestException`).",
                404: NO_NAMESPACE,
                409: TAKEN,
                503: UNAVAILABLE,
            },
            on_table(actions.CREATE_TABLE, "the new view"),
            [PREFIX, NAMESPACE],
            "CreateViewRequest",
        ),
        ("warehouse_view", "GET"): catalog_operation(
            "warehouseLoadView",
            "Load a view (HEAD: whether it exists)",
            "Its current metadata and where it is; HEAD answers 204, or 404, with no body.",
            returns("The view.", "LoadViewResult"),
            {
                400: names,
                404: NO_VIEW,
                500: "The view's metadata file is gone from storage (`ServiceFailureException`).",
            },
            on_table(actions.GET_TABLE, "the view") + f" or `{actions.GET_TABLE_METADATA_LOCATION}`",
            view,
        ),
        ("warehouse_view", "POST"): catalog_operation(
            "warehouseReplaceView",
            "Commit changes to a view (replace it)",
            "Checks `assert-view-uuid`, applies the updates, writes the next metadata file and swaps the "
            "view's pointer to it if nobody committed meanwhile. The view's location cannot move.",
            returns("The new metadata and where it is.", "LoadViewResult"),
            {
                400: BAD_NAMES + ", an update that cannot apply, a location outside the view, or a body "
                "that does not fit (`BadRequestException`).",
                404: NO_VIEW,
                409: "The view's uuid is not the one asserted, or another commit changed the view first: "
                "refresh and retry (`CommitFailedException`).",
                503: UNAVAILABLE,
            },
            on_table(actions.UPDATE_TABLE_METADATA_LOCATION, "the view"),
            view,
            "CommitViewRequest",
        ),
        ("warehouse_view", "DELETE"): catalog_operation(
            "warehouseDropView",
            "Drop a view",
            "Drops the view as a table is dropped without purge: kept, with its files and location, for "
            "its warehouse's retention (undroppable: `POST /v1/{prefix}/views/undrop`); its name is free "
            "at once.",
            (204, NO_CONTENT),
            {400: names, 404: NO_VIEW},
            on_table(actions.DELETE_TABLE, "the view"),
            view,
        ),
        ("warehouse_register_view", "POST"): catalog_operation(
            "warehouseRegisterView",
            "Register a view from a metadata file",
            "Adopts a view metadata file already in the namespace's folder as a new view's current "
            "metadata: the file must be in no other table's or view's location (a dropped one's only for "
            "a caller allowed on its own name), and inside the location its metadata names.",
            returns("The view.", "LoadViewResult"),
            {
                400: BAD_NAMES + ", no view metadata file there, or a location outside the namespace's "
                "folder or overlapping another's (`BadRequestException`).",
                404: NO_NAMESPACE,
                409: TAKEN,
                503: UNAVAILABLE,
            },
            on_table(actions.REGISTER_TABLE, "the new view"),
            [PREFIX, NAMESPACE],
            "RegisterViewRequest",
        ),
        ("warehouse_view_rename", "POST"): catalog_operation(
            "warehouseRenameView",
            "Rename a view, or move it to another namespace of the warehouse",
            "The view keeps its location and files.",
            (204, NO_CONTENT),
            {
                400: names,
                404: "No such source view, or no destination namespace (`NoSuchViewException`, "
                "`NoSuchNamespaceException`).",
                409: TAKEN,
            },
            f"{on_table(actions.RENAME_TABLE, 'the source')} and `{actions.CREATE_TABLE}` on the destination",
            [PREFIX],
            "RenameTableRequest",
        ),
        ("warehouse_view_undrop", "POST"): catalog_operation(
            "warehouseUndropViews",
            "Undrop views",
            "Each comes back under its name, all or none, as tables are undropped.",
            (204, NO_CONTENT),
            {
                400: names,
                404: "No such dropped view, or its namespace was dropped since (`NoSuchViewException`, "
                "`NoSuchNamespaceException`).",
                409: TAKEN,
            },
            on_table(actions.UNDROP_TABLE, "each view"),
            [PREFIX],
            "UndropRequest",
        ),
    }


def view_schemas() -> dict[str, Schema]:
    return {
        "ViewVersion": object_schema(
            {
                "version-id": INTEGER,
                "schema-id": INTEGER,
                "timestamp-ms": INTEGER,
                "representations": array(
                    object_schema(
                        {"type": {"type": "string", "enum": ["sql"]}, "sql": STRING, "dialect": STRING}
                    )
                ),
                "default-namespace": array(STRING),
            },
            {"summary": STRING_MAP, "default-catalog": NULLABLE_STRING},
        ),
        "CreateViewRequest": object_schema(
            {"name": STRING, "schema": model("IcebergSchema"), "view-version": model("ViewVersion")},
            {
                "location": {**STRING, "description": "Inside the namespace's folder; a new one by default."},
                "properties": STRING_MAP,
            },
        ),
        "CommitViewRequest": object_schema(
            {
                "updates": array(object_schema({"action": {"type": "string", "enum": list(VIEW_UPDATES)}})),
            },
            {
                "requirements": array(
                    object_schema(
                        {"type": {"type": "string", "enum": list(VIEW_REQUIREMENTS)}, "uuid": STRING}
                    )
                ),
                "identifier": model("TableIdentifier"),
            },
        ),
        "RegisterViewRequest": object_schema({"name": STRING, "metadata-location": STRING}),
        "LoadViewResult": object_schema(
            {
                "metadata-location": STRING,
                "metadata": {"type": "object", "description": "The view's metadata (`ViewMetadata`)."},
            },
            {"config": STRING_MAP},
        ),
    }
