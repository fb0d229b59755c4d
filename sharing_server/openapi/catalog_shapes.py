"""What the specs of AIStor Tables' catalog (`warehouses`) are written with, and its JSON bodies.

`catalog_operation` makes an operation of its parts: what it answers, which
`s3tables:` action it needs of the caller's policy, and its refusals in the
Iceberg REST error model; every one takes `CATALOG_AUTH` and may be refused as
unauthenticated, forbidden or rate limited (and, with a body, too large).

The bodies take the Iceberg REST spec's names (`CreateTableRequest`,
`CommitTableRequest`, ...), except where the read-only catalog's specs
(`iceberg`) already define the same shape: `IcebergError`, `CatalogConfig`,
`Namespace` and `LoadTableResult` are theirs. Table metadata is an object here:
its shape is the table format's, which pyiceberg reads and writes. Requirements
and updates list the kinds that pyiceberg's models, which parse commits here,
accept.
"""

from __future__ import annotations

from share_store.catalog.commits import DEFAULT_FORMAT_VERSION, FORMAT_VERSIONS
from share_store.catalog.names import WAREHOUSE_NAME
from share_store.catalog.policies import table_arn, warehouse_arn
from sharing_server.openapi.components import CATALOG_AUTH, errors
from sharing_server.openapi.iceberg_shares import iceberg_error
from sharing_server.openapi.shapes import (
    BOOLEAN,
    INTEGER,
    NAME,
    STRING,
    Schema,
    array,
    header,
    json_body,
    json_content,
    model,
    object_schema,
    operation,
    parameter,
    response,
)

STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
NULLABLE_STRING: Schema = {**STRING, "nullable": True}
ANY: Schema = {}
LEVELS: Schema = {**array(STRING), "minItems": 1, "description": "The namespace's levels, outermost first."}
METADATA: Schema = {"type": "object", "description": "The table's metadata (the spec's `TableMetadata`)."}
WAREHOUSE: Schema = {
    "type": "string",
    "pattern": f"^{WAREHOUSE_NAME.pattern}$",
    "description": "A warehouse (and the bucket holding its tables): 3 to 63 lowercase letters, digits, "
    "'.', '_' and '-'; not `config`, `warehouses` or `oauth`.",
}
VERSIONS = ", ".join(map(str, FORMAT_VERSIONS))
FORMAT_VERSION = f"`format-version`: one of {VERSIONS} ({DEFAULT_FORMAT_VERSION} by default)."
# As pyiceberg 0.12's `TableRequirement` and `TableUpdate` unions name them.
TABLE_REQUIREMENTS = (
    "assert-create",
    "assert-table-uuid",
    "assert-ref-snapshot-id",
    "assert-last-assigned-field-id",
    "assert-current-schema-id",
    "assert-last-assigned-partition-id",
    "assert-default-spec-id",
    "assert-default-sort-order-id",
)
TABLE_UPDATES = (
    "assign-uuid",
    "upgrade-format-version",
    "add-schema",
    "set-current-schema",
    "add-spec",
    "set-default-spec",
    "add-sort-order",
    "set-default-sort-order",
    "add-snapshot",
    "set-snapshot-ref",
    "remove-snapshots",
    "remove-snapshot-ref",
    "set-location",
    "set-properties",
    "remove-properties",
    "set-statistics",
    "remove-statistics",
    "remove-partition-specs",
    "remove-schemas",
    "set-partition-statistics",
    "remove-partition-statistics",
)

TAG = "warehouses"
UNAUTHENTICATED = (
    "No credentials, or a bearer token that is not valid, has expired or whose user was removed "
    "(`NotAuthorizedException`)."
)
BAD_NAMES = "An invalid warehouse, namespace or table name"
NO_WAREHOUSE = "No such warehouse (`NoSuchWarehouseException`)."
NO_NAMESPACE = "No such warehouse or namespace (`NoSuchWarehouseException`, `NoSuchNamespaceException`)."
NO_TABLE = "No such table (`NoSuchTableException`)."
UNAVAILABLE = "Storage cannot be reached right now (`ServiceUnavailableException`)."
NO_CONTENT = response("Done; no body.")

PREFIX = parameter(
    "prefix", "path", WAREHOUSE, "The warehouse, as `/v1/config` names it (`overrides.prefix`)."
)
NAMESPACE = parameter(
    "namespace", "path", NAME, "The namespace: its levels joined by the unit separator, `%1F` (`a%1Fb`)."
)
TABLE = parameter("table", "path", NAME, "The table's name.")
DROPPED = parameter(
    "dropped", "query", {**BOOLEAN, "default": False}, "List the dropped ones (kept, undroppable) instead."
)


def on_warehouse(action: str) -> str:
    """What an operation needs of the caller's policy on the warehouse, for its description."""
    return f"`{action}` on the warehouse (`{warehouse_arn('{warehouse}')}`)"


def on_table(action: str, which: str = "the table") -> str:
    """What an operation needs on a table, whose ARN joins a nested namespace's levels with `.`."""
    return f"`{action}` on {which} (`{table_arn('{warehouse}', ['{namespace}'], '{table}')}`)"


def catalog_operation(
    operation_id: str,
    summary: str,
    description: str,
    ok: tuple[int, Schema],
    refusals: dict[int, str],
    needs: str | None,
    parameters: list[Schema] | None = None,
    body: str | None = None,
) -> Schema:
    """An operation of the catalog: its answer (`ok`: status, response) and its refusals.

    Every one may be refused as unauthenticated (401) and as forbidden (403: a
    signature that does not verify, or a policy that does not allow `needs`);
    `refusals` are its other statuses, with what they mean.
    """
    forbidden = "A SigV4 signature that does not verify or names an unknown access key"
    if needs:
        description += f" Needs {needs}."
        forbidden += f", or a policy that does not allow {needs}"
    described = {401: UNAUTHENTICATED, 403: forbidden + " (`ForbiddenException`).", **refusals}
    status, answer = ok
    responses = {
        str(status): answer,
        **{
            str(code): (not_found if code == 404 else iceberg_error)(text) for code, text in described.items()
        },
        **errors(*((413,) if body else ())),
        "429": too_many(),
    }
    return operation(
        operation_id,
        summary,
        TAG,
        CATALOG_AUTH,
        dict(sorted(responses.items())),
        parameters,
        json_body(model(body)) if body else None,
        description,
    )


def not_found(description: str) -> Schema:
    """A 404 under `/_iceberg`: the catalog's, or the server's own for a path its mount cannot match."""
    return response(
        description + " A path with a line feed (`%0A`) reaches no route of the catalog: that 404 is the "
        "server's own (`Error`).",
        json_content({"oneOf": [model("IcebergError"), model("Error")]}),
    )


def too_many() -> Schema:
    """A 429 under `/_iceberg`: the server's request rates are limited before the catalog sees the
    request (`Error`), while too many wrong admin tokens are the catalog's own refusal, in its model."""
    return response(
        "Over the per-token or server-wide request rate (`Error`), or too many wrong admin tokens from "
        "this address (`TooManyRequestsException`); see `Retry-After`.",
        json_content({"oneOf": [model("IcebergError"), model("Error")]}),
        {"Retry-After": header({"type": "integer", "minimum": 1})},
    )


def returns(description: str, schema: str) -> tuple[int, Schema]:
    return 200, response(description, json_content(model(schema)))


def _described(schema: Schema, description: str) -> Schema:
    # OpenAPI 3.0 ignores whatever sits beside a `$ref`.
    return (
        {"allOf": [schema], "description": description}
        if "$ref" in schema
        else {**schema, "description": description}
    )


def _enum(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


def schemas() -> dict[str, Schema]:
    return {**_catalog_schemas(), **_table_schemas(), **_commit_schemas()}


def _catalog_schemas() -> dict[str, Schema]:
    """Warehouses and namespaces."""
    return {
        "Warehouse": object_schema(
            {"name": STRING},
            {
                "properties": _described(
                    STRING_MAP,
                    "Its `table-default.*` properties, which new tables of every namespace in it start "
                    "with, under the namespace's own (a load only).",
                )
            },
        ),
        "WarehouseList": object_schema({"warehouses": array(model("Warehouse"))}),
        "CreateWarehouseRequest": object_schema(
            {"name": WAREHOUSE},
            {
                "adopt": _described(
                    {"type": "boolean", "default": False},
                    "Take a bucket that exists already (the admin token only).",
                )
            },
        ),
        "ListNamespacesResponse": object_schema(
            {"namespaces": array(LEVELS)},
            {"next-page-token": _described(NULLABLE_STRING, "Always null: one page holds them all.")},
        ),
        "CreateNamespaceRequest": object_schema(
            {"namespace": LEVELS},
            {"properties": _described(STRING_MAP, "Stored as strings.")},
        ),
        "UpdateNamespacePropertiesRequest": object_schema(
            {},
            {
                "removals": _described(array(STRING), "Keys to remove (none of those updated)."),
                "updates": _described(STRING_MAP, "Keys to set, with their values."),
            },
        ),
        "UpdateNamespacePropertiesResponse": object_schema(
            {"updated": array(STRING), "removed": array(STRING)},
            {"missing": _described({**array(STRING), "nullable": True}, "Removals that were not set.")},
        ),
    }


def _table_schemas() -> dict[str, Schema]:
    """Tables: their names, what creates them, and their schema, partitioning and order."""
    return {
        "TableIdentifier": object_schema({"namespace": LEVELS, "name": STRING}),
        "ListTablesResponse": object_schema(
            {"identifiers": array(model("TableIdentifier"))},
            {
                "next-page-token": _described(NULLABLE_STRING, "Always null: one page holds them all."),
                "dropped": _described(
                    array(model("DroppedTable")), "With `dropped=true`: each dropped table, as listed."
                ),
            },
        ),
        "DroppedTable": object_schema(
            {
                "namespace": LEVELS,
                "name": STRING,
                "id": _described(STRING, "Tells two dropped tables of one name apart."),
                "dropped-at": _described(STRING, "When it was dropped (ISO 8601, UTC)."),
                "purge-after": _described(STRING, "When it is purged: the retention after its drop."),
            }
        ),
        "UndropRequest": object_schema(
            {
                "identifiers": array(
                    object_schema(
                        {"namespace": LEVELS, "name": STRING},
                        {"id": _described(STRING, "Which dropped one of that name; the latest by default.")},
                    )
                )
            }
        ),
        "IcebergStructField": object_schema(
            {
                "id": INTEGER,
                "name": STRING,
                "type": _described(
                    ANY,
                    "A primitive type's name (`long`, `decimal(9,2)`, ...) or a struct, list or map object.",
                ),
                "required": BOOLEAN,
            },
            {"doc": STRING, "initial-default": ANY, "write-default": ANY},
        ),
        "IcebergSchema": object_schema(
            {"type": _enum("struct"), "fields": array(model("IcebergStructField"))},
            {"schema-id": INTEGER, "identifier-field-ids": array(INTEGER)},
        ),
        "PartitionSpec": object_schema(
            {
                "fields": array(
                    object_schema(
                        {"source-id": INTEGER, "transform": STRING, "name": STRING}, {"field-id": INTEGER}
                    )
                )
            },
            {"spec-id": INTEGER},
        ),
        "SortOrder": object_schema(
            {
                "order-id": INTEGER,
                "fields": array(
                    object_schema(
                        {
                            "source-id": INTEGER,
                            "transform": STRING,
                            "direction": _enum("asc", "desc"),
                            "null-order": _enum("nulls-first", "nulls-last"),
                        }
                    )
                ),
            }
        ),
        "CreateTableRequest": object_schema(
            {"name": STRING, "schema": model("IcebergSchema")},
            {
                "location": _described(STRING, "Inside the warehouse's bucket; a new one there by default."),
                "partition-spec": model("PartitionSpec"),
                "write-order": model("SortOrder"),
                "stage-create": _described(
                    BOOLEAN, "Only build the metadata, for a create transaction to commit later."
                ),
                "properties": _described(STRING_MAP, FORMAT_VERSION),
            },
        ),
        "RegisterTableRequest": object_schema(
            {"name": STRING, "metadata-location": _described(STRING, "A metadata file in the warehouse.")},
            {
                "overwrite": _described(
                    BOOLEAN,
                    "Send it (false): the server's model requires it, though the spec defaults it. "
                    "An existing table is never overwritten (409).",
                )
            },
        ),
        "RenameTableRequest": object_schema(
            {"source": model("TableIdentifier"), "destination": model("TableIdentifier")}
        ),
    }


def _commit_schemas() -> dict[str, Schema]:
    """Commits to one table or several, their answer, and metrics reports."""
    return {
        "TableRequirement": _described(
            object_schema({"type": _enum(*TABLE_REQUIREMENTS)}),
            "What the table must be for the commit to apply (`assert-create`: that it does not exist); "
            "the other fields are the spec's for each type.",
        ),
        "TableUpdate": _described(
            object_schema({"action": _enum(*TABLE_UPDATES)}),
            "One change of the table's metadata; the other fields are the spec's for each action.",
        ),
        "CommitTableRequest": object_schema(
            {"requirements": array(model("TableRequirement")), "updates": array(model("TableUpdate"))},
            {
                "identifier": _described(
                    model("TableIdentifier"),
                    "The table: required in a transaction; on its own path, the path's.",
                )
            },
        ),
        "CommitTableResponse": object_schema({"metadata-location": STRING, "metadata": METADATA}),
        "CommitTransactionRequest": object_schema(
            {
                "table-changes": {
                    **array(
                        {
                            "allOf": [
                                model("CommitTableRequest"),
                                object_schema({"identifier": model("TableIdentifier")}),
                            ]
                        }
                    ),
                    "minItems": 1,
                    "description": "One commit for each table, each naming its table (`identifier`).",
                }
            }
        ),
        "ReportMetricsRequest": _described(
            object_schema(
                {"report-type": _enum("scan-report", "commit-report")},
                {"table-name": STRING, "snapshot-id": INTEGER, "metrics": {"type": "object"}},
            ),
            "A scan or commit report; the other fields are the spec's `ScanReport` or `CommitReport`.",
        ),
    }
