"""The OpenAPI operations of AIStor Tables' commits under `/_iceberg`: a table's commit, a multi-table
transaction, registering, renaming and undropping tables (the `warehouse_table` POST,
`warehouse_register`, `warehouse_rename`, `warehouse_undrop` and `warehouse_transactions` routes)."""

from __future__ import annotations

from share_store.catalog import policies as actions
from sharing_server.openapi.catalog_shapes import (
    BAD_NAMES,
    NAMESPACE,
    NO_CONTENT,
    NO_NAMESPACE,
    PREFIX,
    TABLE,
    UNAVAILABLE,
    catalog_operation,
    on_table,
    returns,
)
from sharing_server.openapi.shapes import OperationKey, Schema


def commit_operations() -> dict[OperationKey, Schema]:
    """Commits, transactions, registering and renaming tables."""
    conflict = (
        "A requirement failed, or another commit changed the table first: refresh and retry "
        "(`CommitFailedException`)."
    )
    return {
        ("warehouse_table", "POST"): catalog_operation(
            "warehouseCommitTable",
            "Commit changes to a table",
            "Checks the requirements against the current metadata, applies the updates, writes the next "
            "metadata file and swaps the table's pointer to it if nobody committed meanwhile. With "
            f"`assert-create`, creates the table (a staged creation's commit; `{actions.CREATE_TABLE}` "
            "too). The table's location cannot move: `set-location`, `write.*.path` properties and the "
            "files the commit names (manifest list, statistics) must be inside it.",
            returns("The new metadata and where it is.", "CommitTableResponse"),
            {
                400: BAD_NAMES + ", an update that cannot apply, a location or file outside the table, or "
                "a body that does not fit (`BadRequestException`).",
                404: "No such table or namespace (`NoSuchTableException`, `NoSuchNamespaceException`).",
                409: conflict,
                503: UNAVAILABLE,
            },
            on_table(actions.UPDATE_TABLE_METADATA_LOCATION),
            [PREFIX, NAMESPACE, TABLE],
            "CommitTableRequest",
        ),
        ("warehouse_register", "POST"): catalog_operation(
            "warehouseRegisterTable",
            "Register a table from a metadata file",
            "Adopts a metadata file already in the warehouse's bucket as a new table's current metadata: "
            "the file must be in no other table's location (a dropped table's only for a caller allowed "
            f"`{actions.REGISTER_TABLE}` on the dropped table's own name, whose location it then takes "
            "whole), and inside the location its metadata names.",
            returns("The table.", "LoadTableResult"),
            {
                400: BAD_NAMES + ", no metadata file there, a file or table location outside the "
                "warehouse or overlapping another table's, or a body that does not fit "
                "(`BadRequestException`).",
                404: NO_NAMESPACE,
                409: "The table exists (`AlreadyExistsException`).",
                503: UNAVAILABLE,
            },
            on_table(actions.REGISTER_TABLE, "the new table"),
            [PREFIX, NAMESPACE],
            "RegisterTableRequest",
        ),
        ("warehouse_rename", "POST"): catalog_operation(
            "warehouseRenameTable",
            "Rename a table, or move it to another namespace of the warehouse",
            "The table keeps its location and files.",
            (204, NO_CONTENT),
            {
                400: BAD_NAMES + ", or a body that does not fit (`BadRequestException`).",
                404: "No such source table, or no destination namespace (`NoSuchTableException`, "
                "`NoSuchNamespaceException`).",
                409: "The destination exists (`AlreadyExistsException`).",
            },
            f"{on_table(actions.RENAME_TABLE, 'the source')} and `{actions.CREATE_TABLE}` on the destination",
            [PREFIX],
            "RenameTableRequest",
        ),
        ("warehouse_undrop", "POST"): catalog_operation(
            "warehouseUndropTables",
            "Undrop tables dropped without purge",
            "Each comes back under its name with its metadata and files, all or none: the dropped one "
            "of that name whose `id` is given (as `GET .../tables?dropped=true` lists it), else the "
            "latest dropped. Lakekeeper's undrop; S3 Tables has none.",
            (204, NO_CONTENT),
            {
                400: BAD_NAMES + ", or a body that does not fit (`BadRequestException`).",
                404: "No such dropped table, or its namespace was dropped since: make it again first "
                "(`NoSuchTableException`, `NoSuchNamespaceException`).",
                409: "A table or view holds the name now (`AlreadyExistsException`).",
            },
            on_table(actions.UNDROP_TABLE, "each table"),
            [PREFIX],
            "UndropRequest",
        ),
        ("warehouse_transactions", "POST"): catalog_operation(
            "warehouseCommitTransaction",
            "Commit changes to several tables at once",
            "All or none: every table's metadata file is written first, then every pointer is swapped in "
            "one transaction of the share store.",
            (204, NO_CONTENT),
            {
                400: BAD_NAMES + ", a table named twice, an update that cannot apply, or a body that does "
                "not fit (`BadRequestException`).",
                404: "No such table or namespace (`NoSuchTableException`, `NoSuchNamespaceException`).",
                409: conflict,
                503: UNAVAILABLE,
            },
            on_table(actions.UPDATE_TABLE_METADATA_LOCATION, "every table"),
            [PREFIX],
            "CommitTransactionRequest",
        ),
    }
