"""The OpenAPI description of every endpoint the app serves, built as a plain dict.

Served at `/openapi.json` so that recipients and operators see the protocol,
OAuth and admin surfaces in one place, and fuzzed by the test suite
(schemathesis) so that the description and the server cannot drift apart.

OpenAPI 3.0.3 rather than 3.1: schemathesis 3.x supports 3.1 only
experimentally. The NDJSON bodies of metadata, query and changes are
described as strings: each line is one protocol action (protocol notes §2),
which JSON Schema cannot express line by line.
"""

from __future__ import annotations

import copy
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sharing_server import __version__
from sharing_server.paths import ADMIN_PREFIX, OAUTH_TOKEN, TABLE

Schema = dict[str, Any]

OPENAPI_VERSION = "3.0.3"

PROTOCOL_AUTH = [{"recipientBearer": []}]
ADMIN_AUTH = [{"adminBearer": []}]
CLIENT_AUTH = [{"oauthClientBasic": []}]
NO_AUTH: list[dict[str, list[str]]] = []

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer", "format": "int64"}
BOOLEAN: Schema = {"type": "boolean"}
DATE_TIME: Schema = {"type": "string", "format": "date-time"}
NULLABLE_DATE_TIME: Schema = {**DATE_TIME, "nullable": True}
# The admin API's durations (`sharing_server.admin.parse_duration`).
DURATION: Schema = {"type": "string", "pattern": r"^(\d{1,9}[smhdw]|never)$"}
GRACE_PERIOD: Schema = {"type": "string", "pattern": r"^\d{1,9}[smhdw]$"}
TEXT = {"text/plain": {"schema": STRING}}
NDJSON_LINES = {"application/x-ndjson": {"schema": {**STRING, "description": "One JSON action per line."}}}

# Error responses shared by many operations: status → (component name, when it happens).
ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "Invalid parameters or body (`INVALID_PARAMETER_VALUE`, `MALFORMED_REQUEST`, ...)."),
    401: ("Unauthenticated", "Missing, unknown, expired or revoked bearer token."),
    403: ("Forbidden", "Not allowed (`PERMISSION_DENIED`)."),
    404: ("NotFound", "The share, schema, table, token or client does not exist (or is not yours)."),
    409: ("Conflict", "The name is already taken (`RESOURCE_ALREADY_EXISTS`)."),
    413: ("TooLarge", "The request body exceeds `[limits] max_body_bytes`."),
    429: ("TooManyRequests", "Over the per-token or server-wide request rate; see `Retry-After`."),
    503: ("Unavailable", "Storage or a catalog cannot be reached right now (`TEMPORARILY_UNAVAILABLE`)."),
}
TABLE_READ_ERRORS = (400, 401, 404, 429, 503)
ADMIN_ERRORS = (401, 403, 429)


def _ref(section: str, name: str) -> Schema:
    return {"$ref": f"#/components/{section}/{name}"}


def _model(name: str) -> Schema:
    return _ref("schemas", name)


def _json(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    schema: Schema = {"type": "object", "properties": {**required, **(optional or {})}}
    if required:
        schema["required"] = list(required)
    return schema


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _page(item: str) -> Schema:
    """A list endpoint's body: `items` is left out when empty, `nextPageToken` on the last page."""
    return _object({}, {"items": _array(_model(item)), "nextPageToken": STRING})


def _header(schema: Schema, required: bool = True) -> Schema:
    return {"schema": schema, "required": required}


def _response(
    description: str, content: dict[str, Any] | None = None, headers: Schema | None = None
) -> Schema:
    response: Schema = {"description": description}
    if content:
        response["content"] = content
    if headers:
        response["headers"] = headers
    return response


def _errors(*statuses: int) -> dict[str, Schema]:
    return {str(status): _ref("responses", ERRORS[status][0]) for status in statuses}


def _bodyless_errors(*statuses: int) -> dict[str, Schema]:
    """HEAD answers errors with the status (and auth headers) only."""
    return {str(status): {"description": ERRORS[status][1]} for status in statuses}


def _operation(
    operation_id: str,
    summary: str,
    tag: str,
    security: list[dict[str, list[str]]],
    responses: dict[str, Schema],
    parameters: list[Schema] | None = None,
    body: Schema | None = None,
) -> Schema:
    operation: Schema = {
        "operationId": operation_id,
        "summary": summary,
        "tags": [tag],
        "security": security,
        "responses": responses,
    }
    if parameters:
        operation["parameters"] = parameters
    if body is not None:
        operation["requestBody"] = body
    return operation


def _json_body(schema: Schema, required: bool = True) -> Schema:
    return {"required": required, "content": _json(schema)}


def _parameter(name: str, where: str, schema: Schema, description: str, required: bool = False) -> Schema:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "schema": schema,
        "description": description,
    }


def _query(name: str, schema: Schema, description: str) -> Schema:
    return _parameter(name, "query", schema, description)


def _params(*names: str) -> list[Schema]:
    return [_ref("parameters", name) for name in names]


# -- components ----------------------------------------------------------------------


def _schemas() -> dict[str, Schema]:
    token_state = {"type": "string", "enum": ["active", "rotating", "expired", "revoked"]}
    return {
        "Error": _object({"errorCode": STRING, "message": STRING}),
        "OAuthError": {
            "allOf": [_model("Error"), _object({"error": STRING, "error_description": STRING})],
            "description": "RFC 6749 §5.2 `error` fields alongside the server's `errorCode` and `message`.",
        },
        "Share": _object({"name": STRING}, {"id": STRING}),
        "ShareList": _page("Share"),
        "ShareResponse": _object({"share": _model("Share")}),
        "Schema": _object({"name": STRING, "share": STRING}),
        "SchemaList": _page("Schema"),
        "Table": _object(
            {"name": STRING, "schema": STRING, "share": STRING}, {"shareId": STRING, "id": STRING}
        ),
        "TableList": _page("Table"),
        "QueryRequest": _object(
            {},
            {
                "predicateHints": _array(STRING),
                "jsonPredicateHints": {**STRING, "description": "A JSON predicate tree, as a string."},
                "limitHint": {**INTEGER, "minimum": 0},
                "version": {**INTEGER, "minimum": 0},
                "timestamp": DATE_TIME,
                "startingVersion": {**INTEGER, "minimum": 0},
                "endingVersion": {**INTEGER, "minimum": 0},
                "maxFiles": {"type": "integer", "format": "int32", "minimum": 1},
                "pageToken": STRING,
                "includeRefreshToken": BOOLEAN,
                "refreshToken": STRING,
                "includeHistoricalProtocol": BOOLEAN,
            },
        ),
        "TokenRequest": _object(
            {"grant_type": {"type": "string", "enum": ["client_credentials"]}},
            {"client_id": STRING, "client_secret": STRING},
        ),
        "AccessToken": _object(
            {
                "access_token": STRING,
                "token_type": {"type": "string", "enum": ["bearer"]},
                "expires_in": INTEGER,
            }
        ),
        "BearerProfile": _object(
            {
                "shareCredentialsVersion": {"type": "integer", "enum": [1]},
                "endpoint": STRING,
                "bearerToken": STRING,
            },
            {"expirationTime": STRING},
        ),
        "OAuthProfile": _object(
            {
                "shareCredentialsVersion": {"type": "integer", "enum": [2]},
                "type": {"type": "string", "enum": ["oauth_client_credentials"]},
                "endpoint": STRING,
                "tokenEndpoint": STRING,
                "clientId": STRING,
                "clientSecret": STRING,
            }
        ),
        "AdminShare": _object({"name": STRING, "id": STRING, "createdAt": DATE_TIME, "tables": INTEGER}),
        "AdminShareList": _object({"items": _array(_model("AdminShare"))}),
        "CreateShareRequest": _object(
            {"name": STRING},
            {
                "tables": {
                    **_array(STRING),
                    "description": "`SCHEMA` words, each followed by its `NAME:delta:BUCKET:PATH` "
                    "or `NAME:uniform:WAREHOUSE:NAMESPACE:TABLE` specs.",
                },
                "history": BOOLEAN,
            },
        ),
        "CreatedShare": _object({"name": STRING, "id": STRING, "tables": INTEGER}),
        "SharedTableEntry": _object(
            {"schema": STRING, "name": STRING, "format": STRING, "historyShared": BOOLEAN},
            {"bucket": STRING, "path": STRING, "warehouse": STRING, "namespace": STRING, "table": STRING},
        ),
        "ShareInfo": _object(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "tables": _array(_model("SharedTableEntry")),
                "activeTokens": INTEGER,
                "activeOAuthClients": INTEGER,
            }
        ),
        "UpdateShareRequest": _object(
            {},
            {
                "add": {**_array(STRING), "description": "`SCHEMA:NAME:delta:BUCKET:PATH` specs."},
                "remove": {**_array(STRING), "description": "`SCHEMA/NAME` references."},
                "history": BOOLEAN,
            },
        ),
        "UpdatedShare": _object({"name": STRING, "added": INTEGER, "removed": INTEGER}),
        "TokenEntry": _object(
            {
                "id": STRING,
                "state": token_state,
                "description": STRING,
                "createdAt": DATE_TIME,
                "expiresAt": NULLABLE_DATE_TIME,
                "replacedBy": {**STRING, "nullable": True},
            }
        ),
        "TokenList": _object({"items": _array(_model("TokenEntry"))}),
        "CreateTokenRequest": _object({}, {"expires": DURATION, "description": STRING}),
        "RotateTokenRequest": _object({}, {"grace": GRACE_PERIOD}),
        "IssuedToken": _object(
            {
                "id": STRING,
                "token": STRING,
                "expiresAt": NULLABLE_DATE_TIME,
                "endpoint": STRING,
                "profile": _model("BearerProfile"),
            },
            {"replaces": STRING, "graceEndsAt": NULLABLE_DATE_TIME},
        ),
        "OAuthClientEntry": _object(
            {
                "clientId": STRING,
                "state": token_state,
                "description": STRING,
                "createdAt": DATE_TIME,
                "expiresAt": NULLABLE_DATE_TIME,
            }
        ),
        "OAuthClientList": _object({"items": _array(_model("OAuthClientEntry"))}),
        "CreateOAuthClientRequest": _object({}, {"expires": DURATION, "description": STRING}),
        "IssuedOAuthClient": _object(
            {
                "clientId": STRING,
                "clientSecret": STRING,
                "expiresAt": NULLABLE_DATE_TIME,
                "endpoint": STRING,
                "tokenEndpoint": STRING,
                "profile": _model("OAuthProfile"),
            }
        ),
    }


def _error_components() -> dict[str, Schema]:
    headers = {
        401: {"WWW-Authenticate": _header(STRING)},
        429: {"Retry-After": _header({"type": "integer", "minimum": 1})},
    }
    return {
        name: _response(description, _json(_model("Error")), headers.get(status))
        for status, (name, description) in ERRORS.items()
    }


def _parameter_components() -> dict[str, Schema]:
    name = {"type": "string", "minLength": 1}
    return {
        "share": _parameter("share", "path", name, "Share name (case-insensitive)."),
        "schema": _parameter("schema", "path", name, "Schema name (case-insensitive)."),
        "table": _parameter("table", "path", name, "Table name (case-insensitive)."),
        "adminShare": _parameter("share", "path", name, "Share name."),
        "maxResults": _parameter(
            "maxResults",
            "query",
            {"type": "integer", "minimum": 0, "maximum": 500},
            "Page size (default 500).",
        ),
        "pageToken": _parameter("pageToken", "query", STRING, "`nextPageToken` of the previous page."),
        "capabilities": _parameter(
            "delta-sharing-capabilities",
            "header",
            STRING,
            "`key=value[,value];key=value`: `responseformat` (parquet, delta), `readerfeatures`, "
            "`includeendstreamaction`.",
        ),
        "fileidhash": _parameter(
            "fileidhash",
            "header",
            {"type": "string", "enum": ["parquet", "delta"]},
            "How file ids are hashed.",
        ),
    }


# -- paths ---------------------------------------------------------------------------------


def _service_paths() -> dict[str, Schema]:
    return {
        "/healthz": {
            "get": _operation("health", "Liveness probe", "service", NO_AUTH, {"200": _response("Up.", TEXT)})
        },
        "/metrics": {
            "get": _operation(
                "metrics",
                "Prometheus metrics",
                "service",
                NO_AUTH,
                {"200": _response("Prometheus text exposition format.", TEXT)},
            )
        },
        "/openapi.json": {
            "get": _operation(
                "openapi",
                "This document",
                "service",
                NO_AUTH,
                {"200": _response("The OpenAPI document.", _json({"type": "object"})), **_errors(429)},
            )
        },
    }


def _list_operation(operation_id: str, summary: str, body: str, path_parameters: tuple[str, ...]) -> Schema:
    statuses = (400, 401, 404, 429) if path_parameters else (400, 401, 429)
    return _operation(
        operation_id,
        summary,
        "protocol",
        PROTOCOL_AUTH,
        {"200": _response("One page.", _json(_model(body))), **_errors(*statuses)},
        _params(*path_parameters, "maxResults", "pageToken"),
    )


def _table_stream(
    operation_id: str, summary: str, parameters: list[Schema], body: Schema | None = None
) -> Schema:
    """An operation answering protocol and metaData lines (then files) as NDJSON."""
    ok = _response(
        "Line 1 protocol, line 2 metaData, then file actions and, if asked for, an endStreamAction.",
        NDJSON_LINES,
        {
            "Delta-Table-Version": _header(INTEGER),
            "delta-sharing-capabilities": _header(STRING),
            "fileidhash": _header(STRING, required=False),
        },
    )
    statuses = TABLE_READ_ERRORS if body is None else (*TABLE_READ_ERRORS, 413)
    return _operation(
        operation_id,
        summary,
        "protocol",
        PROTOCOL_AUTH,
        {"200": ok, **_errors(*statuses)},
        [*_params("share", "schema", "table", "capabilities"), *parameters],
        body,
    )


def _table_version(operation_id: str, summary: str, head: bool) -> Schema:
    ok = _response("The version, in a header; no body.", headers={"Delta-Table-Version": _header(INTEGER)})
    errors = _bodyless_errors if head else _errors
    starting_timestamp = _query(
        "startingTimestamp", DATE_TIME, "Answer the earliest version committed at or after this moment."
    )
    return _operation(
        operation_id,
        summary,
        "protocol",
        PROTOCOL_AUTH,
        {"200": ok, **errors(*TABLE_READ_ERRORS)},
        [*_params("share", "schema", "table"), starting_timestamp],
    )


def _protocol_paths(prefix: str) -> dict[str, Schema]:
    version = {**INTEGER, "minimum": 0}
    either_start = "One of startingVersion and startingTimestamp."
    either_end = "At most one of endingVersion and endingTimestamp."
    changes_parameters = [
        *_params("fileidhash"),
        _query("startingVersion", version, either_start),
        _query("startingTimestamp", DATE_TIME, either_start),
        _query("endingVersion", version, either_end),
        _query("endingTimestamp", DATE_TIME, either_end),
        _query("includeHistoricalMetadata", BOOLEAN, "Add metaData lines of later versions."),
        _query("includeHistoricalProtocol", BOOLEAN, "Add protocol lines of later versions (delta format)."),
        _query("maxFiles", {"type": "integer", "format": "int32", "minimum": 1}, "Page size."),
        _query("pageToken", STRING, "`nextPageToken` of the previous page's endStreamAction."),
    ]
    oauth_error = _json(_model("OAuthError"))
    return {
        prefix + "/shares": {"get": _list_operation("listShares", "List shares", "ShareList", ())},
        prefix + "/shares/{share}": {
            "get": _operation(
                "getShare",
                "Get a share",
                "protocol",
                PROTOCOL_AUTH,
                {"200": _response("The share.", _json(_model("ShareResponse"))), **_errors(401, 404, 429)},
                _params("share"),
            )
        },
        prefix + "/shares/{share}/schemas": {
            "get": _list_operation("listSchemas", "List schemas", "SchemaList", ("share",))
        },
        prefix + "/shares/{share}/schemas/{schema}/tables": {
            "get": _list_operation(
                "listTables", "List the tables of a schema", "TableList", ("share", "schema")
            )
        },
        prefix + "/shares/{share}/all-tables": {
            "get": _list_operation("listAllTables", "List the tables of all schemas", "TableList", ("share",))
        },
        prefix + TABLE: {
            "head": _table_version("headTableVersion", "Table version (deprecated HEAD form)", head=True)
        },
        prefix + TABLE + "/version": {"get": _table_version("getTableVersion", "Table version", head=False)},
        prefix + TABLE + "/metadata": {
            "get": _table_stream(
                "getTableMetadata",
                "Table protocol and metadata",
                [
                    _query("version", version, "Time travel to this version."),
                    _query("timestamp", DATE_TIME, "Time travel to this moment."),
                ],
            )
        },
        prefix + TABLE + "/query": {
            "post": _table_stream(
                "queryTable",
                "Table data files (snapshot, time travel, or changes from startingVersion)",
                _params("fileidhash"),
                _json_body(_model("QueryRequest")),
            )
        },
        prefix + TABLE + "/changes": {
            "get": _table_stream("getTableChanges", "Change data feed", changes_parameters)
        },
        prefix + OAUTH_TOKEN: {
            "post": _operation(
                "issueAccessToken",
                "OAuth2 client credentials grant (RFC 6749 §4.4)",
                "oauth",
                CLIENT_AUTH,
                {
                    "200": _response("A bearer token of the client's share.", _json(_model("AccessToken"))),
                    "400": _response("Bad grant or form.", oauth_error),
                    "401": _response(
                        "Client authentication failed.",
                        oauth_error,
                        {"WWW-Authenticate": _header(STRING)},
                    ),
                    **_errors(413, 429),
                },
                body={
                    "required": True,
                    "content": {"application/x-www-form-urlencoded": {"schema": _model("TokenRequest")}},
                },
            )
        },
        prefix + "/files/{bucket}/{key}": _file_operations(),
    }


def _file_operations() -> dict[str, Schema]:
    parameters = [
        _parameter(
            "bucket", "path", {"type": "string", "minLength": 1}, "Bucket (a directory of local storage)."
        ),
        _parameter("key", "path", {"type": "string", "minLength": 1}, "Object key; may contain '/'."),
        _parameter(
            "X-Sharing-Expires", "query", {"type": "string", "pattern": "^[0-9]+$"}, "Epoch seconds.", True
        ),
        _parameter("X-Amz-Signature", "query", STRING, "HMAC-SHA256 of the URL, hex.", True),
    ]
    byte_range = _parameter("Range", "header", STRING, "`bytes=start-end[,...]`: answered with 206.")
    octets = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}
    parts = {"multipart/byteranges": {"schema": {"type": "string", "format": "binary"}}}
    summary = "A file of local storage at a signed URL"
    return {
        "get": _operation(
            "getFile",
            summary,
            "files",
            NO_AUTH,
            {
                "200": _response("The file.", octets),
                "206": _response("The requested range(s).", {**octets, **parts}),
                "400": _response("Malformed Range header.", TEXT),
                "416": _response("Range not satisfiable.", TEXT),
                **_errors(403, 404, 429),
            },
            [*parameters, byte_range],
        ),
        "head": _operation(
            "headFile",
            summary + " (headers only)",
            "files",
            NO_AUTH,
            {"200": _response("The file's headers."), **_bodyless_errors(403, 404, 429)},
            parameters,
        ),
    }


def _admin_paths() -> dict[str, Schema]:
    share = ADMIN_PREFIX + "/shares/{share}"
    token_id = _parameter("token_id", "path", {"type": "string", "minLength": 1}, "Token id.")
    client_id = _parameter("client_id", "path", {"type": "string", "minLength": 1}, "OAuth client id.")

    def admin(
        operation_id: str,
        summary: str,
        ok: Schema,
        statuses: tuple[int, ...],
        parameters: list[Schema],
        body: str | None = None,
        status: int = 200,
    ) -> Schema:
        extra = (400, 413) if body else ()
        return _operation(
            operation_id,
            summary,
            "admin",
            ADMIN_AUTH,
            {str(status): ok, **_errors(*sorted({*ADMIN_ERRORS, *statuses, *extra}))},
            parameters,
            _json_body(_model(body), required=False) if body else None,
        )

    def returns(description: str, model: str) -> Schema:
        return _response(description, _json(_model(model)))

    gone = _response("Done.")
    in_share = _params("adminShare")
    return {
        ADMIN_PREFIX + "/shares": {
            "get": admin("adminListShares", "List shares", returns("All shares.", "AdminShareList"), (), []),
            "post": admin(
                "adminCreateShare",
                "Create a share",
                returns("Created.", "CreatedShare"),
                (409,),
                [],
                "CreateShareRequest",
                201,
            ),
        },
        share: {
            "get": admin(
                "adminShareInfo",
                "A share's tables and credential counts",
                returns("The share.", "ShareInfo"),
                (404,),
                in_share,
            ),
            "patch": admin(
                "adminUpdateShare",
                "Add or remove tables",
                returns("Updated.", "UpdatedShare"),
                (404, 409),
                in_share,
                "UpdateShareRequest",
            ),
            "delete": admin(
                "adminRemoveShare",
                "Remove a share, its tokens and clients",
                gone,
                (404,),
                in_share,
                status=204,
            ),
        },
        share + "/tokens": {
            "get": admin("adminListTokens", "List tokens", returns("Tokens.", "TokenList"), (404,), in_share),
            "post": admin(
                "adminCreateToken",
                "Issue a bearer token (the secret is shown once)",
                returns("Issued.", "IssuedToken"),
                (404,),
                in_share,
                "CreateTokenRequest",
                201,
            ),
        },
        share + "/tokens/{token_id}/rotate": {
            "post": admin(
                "adminRotateToken",
                "Replace a token; the old one works until the grace period ends",
                returns("The new token.", "IssuedToken"),
                (404,),
                [*in_share, token_id],
                "RotateTokenRequest",
                201,
            )
        },
        share + "/tokens/{token_id}": {
            "delete": admin(
                "adminRevokeToken", "Revoke a token", gone, (404,), [*in_share, token_id], status=204
            )
        },
        share + "/oauth-clients": {
            "get": admin(
                "adminListOAuthClients",
                "List OAuth clients",
                returns("Clients.", "OAuthClientList"),
                (404,),
                in_share,
            ),
            "post": admin(
                "adminCreateOAuthClient",
                "Register an OAuth client (the secret is shown once)",
                returns("Registered.", "IssuedOAuthClient"),
                (404,),
                in_share,
                "CreateOAuthClientRequest",
                201,
            ),
        },
        share + "/oauth-clients/{client_id}": {
            "delete": admin(
                "adminRevokeOAuthClient",
                "Revoke an OAuth client",
                gone,
                (404,),
                [*in_share, client_id],
                status=204,
            )
        },
    }


def openapi_document(prefix: str) -> dict[str, Any]:
    """The description of an app serving the protocol under `prefix` (e.g. `/delta-sharing`)."""
    document = {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Delta Sharing server",
            "version": __version__,
            "description": "The Delta Sharing protocol under `" + prefix + "`, its OAuth token endpoint "
            "and local file URLs, the admin API under `" + ADMIN_PREFIX + "`, and the service probes.",
        },
        "tags": [
            {
                "name": "protocol",
                "description": "The Delta Sharing REST protocol (recipients' bearer tokens).",
            },
            {"name": "oauth", "description": "Access tokens for OAuth client credentials profiles."},
            {
                "name": "files",
                "description": "Signed URLs of local storage (the signature is the credential).",
            },
            {
                "name": "admin",
                "description": "Shares, tokens and OAuth clients (the admin token; off unless set).",
            },
            {"name": "service", "description": "Probes, metrics and this document."},
        ],
        "paths": {**_service_paths(), **_protocol_paths(prefix), **_admin_paths()},
        "components": {
            "securitySchemes": {
                "recipientBearer": {"type": "http", "scheme": "bearer", "description": "A share's token."},
                "adminBearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The admin token, whose SHA-256 is `[admin] token_hash`.",
                },
                "oauthClientBasic": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "Client id and secret (or `client_id`/`client_secret` in the form).",
                },
            },
            "schemas": _schemas(),
            "responses": _error_components(),
            "parameters": _parameter_components(),
        },
    }
    # Shapes such as STRING are module constants shared all over the tree: a
    # caller editing its document must not change every later one.
    return copy.deepcopy(document)


async def openapi_endpoint(request: Request) -> Response:
    state = request.app.state
    # Built once per app: the prefix never changes while an app runs.
    document = getattr(state, "openapi", None)
    if document is None:
        document = state.openapi = openapi_document(state.prefix)
    return JSONResponse(document)
