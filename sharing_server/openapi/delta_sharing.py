"""The OpenAPI specs of what is served under the protocol prefix: the protocol, OAuth, file URLs.

The NDJSON bodies of metadata, query and changes are described as strings:
each line is one protocol action (protocol notes §2), which JSON Schema cannot
express line by line.
"""

from __future__ import annotations

from sharing_server.openapi.components import CLIENT_AUTH, NO_AUTH, PROTOCOL_AUTH, bodyless_errors, errors
from sharing_server.openapi.shapes import (
    BOOLEAN,
    DATE_TIME,
    INTEGER,
    NAME,
    STRING,
    TEXT,
    Area,
    OperationKey,
    Schema,
    array,
    header,
    json_body,
    json_content,
    model,
    object_schema,
    operation,
    parameter,
    parameter_refs,
    query,
    response,
)
from sharing_server.openapi.share_metadata import PROTOCOL_FIELDS

NDJSON_LINES = {"application/x-ndjson": {"schema": {**STRING, "description": "One JSON action per line."}}}
TABLE_READ_ERRORS = (400, 401, 404, 429, 503)
VERSION: Schema = {**INTEGER, "minimum": 0}


def area() -> Area:
    return Area(
        tags={
            "protocol": "The Delta Sharing REST protocol (recipients' bearer tokens).",
            "oauth": "Access tokens for OAuth client credentials profiles.",
            "files": "Signed URLs of local storage (the signature is the credential).",
        },
        operations={
            ("list_shares", "GET"): _list_operation("listShares", "List shares", "ShareList", ()),
            ("activation", "GET"): operation(
                "activateProfile",
                "A recipient token's profile, served once by its one-time link",
                "files",
                NO_AUTH,
                {
                    "200": response("The `.share` profile.", json_content(model("BearerProfile"))),
                    "410": response("The link was used or has expired.", json_content(model("Error"))),
                    **errors(404, 429),
                },
                [parameter("code", "path", STRING, "The link's code (the link is the credential).")],
            ),
            ("get_share", "GET"): operation(
                "getShare",
                "Get a share",
                "protocol",
                PROTOCOL_AUTH,
                {
                    "200": response("The share.", json_content(model("ShareResponse"))),
                    **errors(401, 404, 429),
                },
                parameter_refs("share"),
            ),
            ("list_schemas", "GET"): _list_operation("listSchemas", "List schemas", "SchemaList", ("share",)),
            ("list_tables", "GET"): _list_operation(
                "listTables", "List the tables of a schema", "TableList", ("share", "schema")
            ),
            ("list_all_tables", "GET"): _list_operation(
                "listAllTables", "List the tables of all schemas", "TableList", ("share",)
            ),
            ("table_version", "HEAD"): _table_version(
                "headTableVersion", "Table version (deprecated HEAD form)", head=True
            ),
            ("table_version", "GET"): _table_version("getTableVersion", "Table version", head=False),
            ("table_metadata", "GET"): _table_stream(
                "getTableMetadata",
                "Table protocol and metadata",
                [
                    query("version", VERSION, "Time travel to this version."),
                    query("timestamp", DATE_TIME, "Time travel to this moment."),
                ],
            ),
            ("table_query", "POST"): _table_stream(
                "queryTable",
                "Table data files (snapshot, time travel, or changes from startingVersion)",
                parameter_refs("fileidhash"),
                json_body(model("QueryRequest")),
            ),
            ("table_changes", "GET"): _table_stream(
                "getTableChanges", "Change data feed", _changes_parameters()
            ),
            ("query_info", "POST"): _table_stream(
                "getQueryInfo",
                "An async query's lines once ready, else one queryStatus line (pending or failed)",
                [{"name": "query_id", "in": "path", "required": True, "schema": STRING}],
                json_body(model("QueryInfoRequest"), required=False),
            ),
            **_table_access_operations(),
            ("token_endpoint", "POST"): token_operation(),
            **_file_operations(),
        },
        schemas=_schemas(),
        parameters=_parameters(),
    )


#: Directory access (2026-02) and OpenSharing's `format`, in every table item.
_TABLE_ACCESS_FIELDS: dict[str, Schema] = {
    "format": {"type": "string", "enum": ["delta", "iceberg"], "description": "OpenSharing's table format."},
    "accessModes": {
        **array({"type": "string", "enum": ["url", "dir"]}),
        "description": "`url`: read by /query's signed URLs; `dir`: also by the table's folder, with "
        "temporary-table-credentials. Absent means `url` only.",
    },
    "location": {**STRING, "description": "The table's folder (`s3://bucket/path`), for `dir` tables."},
    "auxiliaryLocations": array(STRING),
}
_TABLE_ACCESS_SCHEMAS: dict[str, Schema] = {
    "TableResponse": object_schema({"table": model("Table")}),
    "TemporaryCredentialsRequest": object_schema(
        {}, {"location": {**STRING, "description": "The table's location or a folder under it."}}
    ),
    "TemporaryCredentials": object_schema(
        {
            "credentials": object_schema(
                {
                    "location": STRING,
                    "awsTempCredentials": object_schema(
                        {"accessKeyId": STRING, "secretAccessKey": STRING, "sessionToken": STRING}
                    ),
                    "expirationTime": {**INTEGER, "description": "Epoch milliseconds."},
                }
            )
        }
    ),
}


def _table_access_operations() -> dict[OperationKey, Schema]:
    """OpenSharing's get-table and directory access's temporary credentials."""
    table = parameter_refs("share", "schema", "table")
    keys = "Read-only keys to the location (GetObject, ListBucket under it), ending by the token's expiry."
    return {
        ("get_table", "GET"): operation(
            "getTable",
            "A table, with its format and access modes (OpenSharing)",
            "protocol",
            PROTOCOL_AUTH,
            {"200": response("The table.", json_content(model("TableResponse"))), **errors(401, 404, 429)},
            table,
        ),
        ("temporary_table_credentials", "POST"): operation(
            "generateTemporaryTableCredential",
            "Temporary keys to a `dir` table's folder (directory access)",
            "protocol",
            PROTOCOL_AUTH,
            {
                "200": response(keys, json_content(model("TemporaryCredentials"))),
                **errors(400, 401, 403, 404, 413, 429, 503),
            },
            table,
            json_body(model("TemporaryCredentialsRequest"), required=False),
        ),
    }


def _page(item: str) -> Schema:
    """A list endpoint's body: `items` is left out when empty, `nextPageToken` on the last page."""
    return object_schema({}, {"items": array(model(item)), "nextPageToken": STRING})


def _schemas() -> dict[str, Schema]:
    return {
        "OAuthError": {
            "allOf": [model("Error"), object_schema({"error": STRING, "error_description": STRING})],
            "description": "RFC 6749 §5.2 `error` fields alongside the server's `errorCode` and `message`.",
        },
        "Share": object_schema({"name": STRING}, {"id": STRING, **PROTOCOL_FIELDS}),
        "ShareList": _page("Share"),
        "ShareResponse": object_schema({"share": model("Share")}),
        "Schema": object_schema({"name": STRING, "share": STRING}),
        "SchemaList": _page("Schema"),
        "Table": object_schema(
            {"name": STRING, "schema": STRING, "share": STRING},
            {"shareId": STRING, "id": STRING, **_TABLE_ACCESS_FIELDS},
        ),
        **_TABLE_ACCESS_SCHEMAS,
        "TableList": _page("Table"),
        "QueryRequest": object_schema(
            {},
            {
                "predicateHints": array(STRING),
                "jsonPredicateHints": {**STRING, "description": "A JSON predicate tree, as a string."},
                "limitHint": {**INTEGER, "minimum": 0},
                "version": VERSION,
                "timestamp": DATE_TIME,
                "startingVersion": VERSION,
                "endingVersion": VERSION,
                "maxFiles": {"type": "integer", "format": "int32", "minimum": 1},
                "pageToken": STRING,
                "includeRefreshToken": BOOLEAN,
                "refreshToken": STRING,
                "includeHistoricalProtocol": BOOLEAN,
                "idempotencyKey": {
                    **STRING,
                    "maxLength": 256,
                    "description": "An async query's key (with `asyncquery=true`); `idempotency_key` "
                    "is taken too.",
                },
            },
        ),
        "QueryInfoRequest": object_schema(
            {},
            {
                "queryId": STRING,
                "maxFiles": {"type": "integer", "format": "int32", "minimum": 1},
                "pageToken": STRING,
            },
        ),
        "TokenRequest": object_schema(
            {"grant_type": {"type": "string", "enum": ["client_credentials"]}},
            {"client_id": STRING, "client_secret": STRING},
        ),
        "AccessToken": object_schema(
            {
                "access_token": STRING,
                "token_type": {"type": "string", "enum": ["bearer"]},
                "expires_in": INTEGER,
            }
        ),
    }


def _parameters() -> dict[str, Schema]:
    return {
        "share": parameter("share", "path", NAME, "Share name (case-insensitive)."),
        "schema": parameter("schema", "path", NAME, "Schema name (case-insensitive)."),
        "table": parameter("table", "path", NAME, "Table name (case-insensitive)."),
        "maxResults": parameter(
            "maxResults",
            "query",
            {"type": "integer", "minimum": 0, "maximum": 500},
            "Page size (default 500).",
        ),
        "pageToken": parameter("pageToken", "query", STRING, "`nextPageToken` of the previous page."),
        "capabilities": parameter(
            "delta-sharing-capabilities",
            "header",
            STRING,
            "`key=value[,value];key=value`: `responseformat` (parquet, delta), `readerfeatures`, "
            "`includeendstreamaction`.",
        ),
        "fileidhash": parameter(
            "fileidhash",
            "header",
            {"type": "string", "enum": ["parquet", "delta"]},
            "How file ids are hashed.",
        ),
    }


def _list_operation(operation_id: str, summary: str, body: str, path_parameters: tuple[str, ...]) -> Schema:
    statuses = (400, 401, 404, 429) if path_parameters else (400, 401, 429)
    return operation(
        operation_id,
        summary,
        "protocol",
        PROTOCOL_AUTH,
        {"200": response("One page.", json_content(model(body))), **errors(*statuses)},
        parameter_refs(*path_parameters, "maxResults", "pageToken"),
    )


def _table_stream(
    operation_id: str, summary: str, parameters: list[Schema], body: Schema | None = None
) -> Schema:
    """An operation answering protocol and metaData lines (then files) as NDJSON."""
    ok = response(
        "Line 1 protocol, line 2 metaData, then file actions and, if asked for, an endStreamAction.",
        NDJSON_LINES,
        {
            "Delta-Table-Version": header(INTEGER),
            "delta-sharing-capabilities": header(STRING),
            "fileidhash": header(STRING, required=False),
        },
    )
    statuses = TABLE_READ_ERRORS if body is None else (*TABLE_READ_ERRORS, 413)
    return operation(
        operation_id,
        summary,
        "protocol",
        PROTOCOL_AUTH,
        {"200": ok, **errors(*statuses)},
        [*parameter_refs("share", "schema", "table", "capabilities"), *parameters],
        body,
    )


def _table_version(operation_id: str, summary: str, head: bool) -> Schema:
    ok = response("The version, in a header; no body.", headers={"Delta-Table-Version": header(INTEGER)})
    error_responses = bodyless_errors if head else errors
    starting_timestamp = query(
        "startingTimestamp", DATE_TIME, "Answer the earliest version committed at or after this moment."
    )
    return operation(
        operation_id,
        summary,
        "protocol",
        PROTOCOL_AUTH,
        {"200": ok, **error_responses(*TABLE_READ_ERRORS)},
        [*parameter_refs("share", "schema", "table"), starting_timestamp],
    )


def _changes_parameters() -> list[Schema]:
    either_start = "One of startingVersion and startingTimestamp."
    either_end = "At most one of endingVersion and endingTimestamp."
    return [
        *parameter_refs("fileidhash"),
        query("startingVersion", VERSION, either_start),
        query("startingTimestamp", DATE_TIME, either_start),
        query("endingVersion", VERSION, either_end),
        query("endingTimestamp", DATE_TIME, either_end),
        query("includeHistoricalMetadata", BOOLEAN, "Add metaData lines of later versions."),
        query("includeHistoricalProtocol", BOOLEAN, "Add protocol lines of later versions (delta format)."),
        query("maxFiles", {"type": "integer", "format": "int32", "minimum": 1}, "Page size."),
        query("pageToken", STRING, "`nextPageToken` of the previous page's endStreamAction."),
    ]


def token_operation() -> Schema:
    oauth_error = json_content(model("OAuthError"))
    return operation(
        "issueAccessToken",
        "OAuth2 client credentials grant (RFC 6749 §4.4)",
        "oauth",
        CLIENT_AUTH,
        {
            "200": response("A bearer token of the client's share.", json_content(model("AccessToken"))),
            "400": response("Bad grant or form.", oauth_error),
            "401": response(
                "Client authentication failed.", oauth_error, {"WWW-Authenticate": header(STRING)}
            ),
            **errors(413, 429),
        },
        body={
            "required": True,
            "content": {"application/x-www-form-urlencoded": {"schema": model("TokenRequest")}},
        },
    )


def _file_operations() -> dict[OperationKey, Schema]:
    parameters = [
        parameter("bucket", "path", NAME, "Bucket (a directory of local storage)."),
        parameter("key", "path", NAME, "Object key; may contain '/'."),
        parameter(
            "X-Sharing-Expires", "query", {"type": "string", "pattern": "^[0-9]+$"}, "Epoch seconds.", True
        ),
        parameter("X-Amz-Signature", "query", STRING, "HMAC-SHA256 of the URL, hex.", True),
    ]
    byte_range = parameter("Range", "header", STRING, "`bytes=start-end[,...]`: answered with 206.")
    octets = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    parts = {"multipart/byteranges": {"schema": {"type": "string", "format": "binary"}}}
    summary = "A file of local storage at a signed URL"
    return {
        ("serve_file", "GET"): operation(
            "getFile",
            summary,
            "files",
            NO_AUTH,
            {
                "200": response("The file.", octets),
                "206": response("The requested range(s).", {**octets, **parts}),
                "400": response("Malformed Range header.", TEXT),
                "416": response("Range not satisfiable.", TEXT),
                **errors(403, 404, 429),
            },
            [*parameters, byte_range],
        ),
        ("serve_file", "HEAD"): operation(
            "headFile",
            summary + " (headers only)",
            "files",
            NO_AUTH,
            {"200": response("The file's headers."), **bodyless_errors(403, 404, 429)},
            parameters,
        ),
    }
