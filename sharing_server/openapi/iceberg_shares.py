"""The OpenAPI specs of the read-only Iceberg REST catalog under `/iceberg`.

The catalog answers in the Iceberg REST spec's shapes and error model
(`IcebergError`), which the Iceberg project's OpenAPI document describes in
full; these specs say what this server serves of it.
"""

from __future__ import annotations

from sharing_server.openapi.components import PROTOCOL_AUTH, errors
from sharing_server.openapi.delta_sharing import token_operation
from sharing_server.openapi.scan_plans import plan_schemas, share_plan_operations
from sharing_server.openapi.shapes import (
    INTEGER,
    NAME,
    STRING,
    Area,
    Schema,
    array,
    json_body,
    json_content,
    model,
    object_schema,
    operation,
    parameter,
    response,
)

TAG = "iceberg"


def iceberg_error(description: str) -> Schema:
    """A refusal in the Iceberg REST error model, which both catalogs answer with."""
    return response(description, json_content(model("IcebergError")))


def _iceberg_errors(*statuses: int) -> dict[str, Schema]:
    described = {
        400: "Malformed request.",
        401: "Missing, unknown, expired or revoked token.",
        403: "Not allowed: a write, or a signature for an object the token may not read.",
        404: "No such namespace or table in the token's share.",
        406: "The table cannot be served to Iceberg clients (local storage).",
        503: "Storage or the table's catalog cannot be reached right now.",
    }
    return {str(status): iceberg_error(described[status]) for status in statuses}


NAMESPACE = parameter("namespace", "path", NAME, "A schema of the token's share.")
SHARE = parameter(
    "share", "path", NAME, "A share the token is open to: its own, or one granted to its named recipient."
)
TABLE = parameter("table", "path", NAME, "An Iceberg table of that schema.")
STRING_MAP: Schema = {"type": "object", "additionalProperties": STRING}
HEADERS: Schema = {"type": "object", "additionalProperties": array(STRING)}


def _schemas() -> dict[str, Schema]:
    return {
        "IcebergError": object_schema(
            {"error": object_schema({"message": STRING, "type": STRING, "code": INTEGER})}
        ),
        "CatalogConfig": object_schema(
            {"defaults": STRING_MAP, "overrides": STRING_MAP}, {"endpoints": array(STRING)}
        ),
        "NamespaceList": object_schema({"namespaces": array(array(STRING))}),
        "Namespace": object_schema({"namespace": array(STRING)}, {"properties": STRING_MAP}),
        "TableIdentifiers": object_schema(
            {"identifiers": array(object_schema({"namespace": array(STRING), "name": STRING}))}
        ),
        "StorageCredential": object_schema({"prefix": STRING, "config": STRING_MAP}),
        "LoadTableResult": object_schema(
            {"metadata": {"type": "object"}},
            {
                "metadata-location": STRING,
                "config": STRING_MAP,
                "storage-credentials": {
                    **array(model("StorageCredential")),
                    "description": "Keys scoped to the table, when the client asks for vended credentials "
                    "(`X-Iceberg-Access-Delegation`) and `[iceberg] credential_vending` is on.",
                },
            },
        ),
        "LoadCredentialsResult": object_schema({"storage-credentials": array(model("StorageCredential"))}),
        "S3SignRequest": object_schema(
            {"method": STRING, "uri": STRING, "headers": HEADERS},
            {"region": STRING, "body": STRING, "provider": STRING, "properties": {"type": "object"}},
        ),
        "S3SignResult": object_schema({"uri": STRING, "headers": HEADERS}),
    }


def _operation(
    operation_id: str,
    summary: str,
    answer: tuple[str, str],
    statuses: tuple[int, ...],
    parameters: list[Schema] | None = None,
    body: Schema | None = None,
) -> Schema:
    """A catalog operation: its 200 (`answer`: description and schema name) and its errors."""
    description, schema = answer
    responses = {
        "200": response(description, json_content(model(schema))),
        **_iceberg_errors(*statuses),
        **errors(429),
    }
    return operation(operation_id, summary, TAG, PROTOCOL_AUTH, responses, parameters, body)


def _share_named() -> dict[tuple[str, str], Schema]:
    """The catalog with the share named (the prefix `shares/<share>`): the same operations, and
    metrics reports."""
    return {
        ("iceberg_share_config", "GET"): _operation(
            "icebergShareConfig", "The share's catalog configuration", ("Its prefix.", "CatalogConfig"),
            (401, 404), [SHARE],
        ),
        ("iceberg_share_namespaces", "GET"): _operation(
            "icebergShareListNamespaces", "The share's schemas", ("Namespaces.", "NamespaceList"),
            (401, 404), [SHARE, parameter("parent", "query", STRING, "A parent namespace.")],
        ),
        ("iceberg_share_namespace", "GET"): _operation(
            "icebergShareLoadNamespace", "A namespace of the share", ("The namespace.", "Namespace"),
            (401, 404), [SHARE, NAMESPACE],
        ),
        ("iceberg_share_tables", "GET"): _operation(
            "icebergShareListTables", "The tables of a schema of the share",
            ("Table identifiers.", "TableIdentifiers"), (401, 404), [SHARE, NAMESPACE],
        ),
        ("iceberg_share_table", "GET"): _operation(
            "icebergShareLoadTable", "Load a table of the share, read for the token's recipient",
            ("Metadata cut to the grant, and how to read it.", "LoadTableResult"),
            (401, 404, 406, 503), [SHARE, NAMESPACE, TABLE],
        ),
        ("iceberg_share_credentials", "GET"): _operation(
            "icebergShareLoadCredentials", "Fresh keys scoped to a table of the share",
            ("Keys and the location prefixes they serve.", "LoadCredentialsResult"),
            (400, 401, 403, 404, 503), [SHARE, NAMESPACE, TABLE],
        ),
        ("iceberg_share_metrics", "POST"): operation(
            "icebergShareReportMetrics", "An engine's scan or commit report (taken, kept nowhere)", TAG,
            PROTOCOL_AUTH,
            {"204": {"description": "Taken."}, **_iceberg_errors(400, 401, 404), **errors(429)},
            [SHARE, NAMESPACE, TABLE], json_body({"type": "object"}),
        ),
        ("iceberg_share_table_sign", "POST"): _operation(
            "icebergShareSignTableRequest", "Sign one S3 read of this table's file (Iceberg 1.11's signer)",
            ("Headers that authorize the request.", "S3SignResult"), (400, 401, 403, 404, 503),
            [SHARE, NAMESPACE, TABLE], json_body(model("S3SignRequest")),
        ),
        ("iceberg_share_s3_sign", "POST"): _operation(
            "icebergShareSignS3Request", "Sign one S3 read of a file of the share's tables",
            ("Headers that authorize the request.", "S3SignResult"), (400, 403, 503), [SHARE],
            json_body(model("S3SignRequest")),
        ),
    }  # fmt: skip


def area() -> Area:
    return Area(
        tags={TAG: "A read-only Iceberg REST catalog over the same shares and tokens."},
        operations={
            ("iceberg_config", "GET"): _operation(
                "icebergConfig",
                "Catalog configuration",
                ("Defaults, overrides, endpoints.", "CatalogConfig"),
                (401,),
            ),
            ("iceberg_oauth_tokens", "POST"): {
                **token_operation(),
                "operationId": "icebergOAuthTokens",
                "tags": [TAG],
            },
            ("iceberg_namespaces", "GET"): _operation(
                "icebergListNamespaces",
                "The share's schemas as namespaces",
                ("Namespaces.", "NamespaceList"),
                (401, 404),
                [parameter("parent", "query", STRING, "A parent namespace (schemas have none below).")],
            ),
            ("iceberg_namespace", "GET"): _operation(
                "icebergLoadNamespace",
                "A namespace (HEAD: whether it exists)",
                ("The namespace.", "Namespace"),
                (401, 404),
                [NAMESPACE],
            ),
            ("iceberg_tables", "GET"): _operation(
                "icebergListTables",
                "The tables of a schema",
                ("Table identifiers.", "TableIdentifiers"),
                (401, 404),
                [NAMESPACE],
            ),
            ("iceberg_table", "GET"): _operation(
                "icebergLoadTable",
                "Load a table (HEAD: whether it exists)",
                ("Metadata cut to the grant, and how to read it.", "LoadTableResult"),
                (401, 404, 406, 503),
                [NAMESPACE, TABLE, parameter("snapshots", "query", STRING, "`all` or `refs`.")],
            ),
            ("iceberg_credentials", "GET"): _operation(
                "icebergLoadCredentials",
                "Fresh keys scoped to a table (credential vending on)",
                ("Keys and the location prefixes they serve.", "LoadCredentialsResult"),
                (400, 401, 403, 404, 503),
                [NAMESPACE, TABLE],
            ),
            ("iceberg_s3_sign", "POST"): _operation(
                "icebergSignS3Request",
                "Sign one S3 read of a shared table's file (remote signing)",
                ("Headers that authorize the request.", "S3SignResult"),
                (400, 403, 503),
                body=json_body(model("S3SignRequest")),
            ),
            ("iceberg_table_sign", "POST"): _operation(
                "icebergSignTableRequest",
                "Sign one S3 read of a file of this table (Iceberg 1.11's signer)",
                ("Headers that authorize the request.", "S3SignResult"),
                (400, 401, 403, 404, 503),
                [NAMESPACE, TABLE],
                json_body(model("S3SignRequest")),
            ),
            **_share_named(),
            **share_plan_operations(_operation, "", "", [NAMESPACE, TABLE]),
            **share_plan_operations(_operation, "Share", "share_", [SHARE, NAMESPACE, TABLE]),
            **{
                ("iceberg_read_only", method): operation(
                    f"icebergReadOnly{method.title()}",
                    "Any other catalog endpoint: 403 for writes, 404 for reads",
                    TAG,
                    PROTOCOL_AUTH,
                    {
                        "403": iceberg_error("The catalog is read-only."),
                        "404": iceberg_error("No such endpoint."),
                        **_iceberg_errors(401),
                        **errors(429),
                    },
                    [parameter("rest", "path", STRING, "The rest of the path.")],
                )
                for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
            },
        },
        schemas={**_schemas(), **plan_schemas()},
    )
