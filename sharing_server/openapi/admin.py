"""The OpenAPI specs of the admin API (`sharing_server.admin.routes`) and its JSON bodies.

Operations are found by their routes' names, `admin_<handler>`. Every one of
them takes the admin token and may be refused as unauthenticated, forbidden
(the API is off) or rate limited; those that read a body may also find it
malformed or too large.
"""

from __future__ import annotations

from sharing_server.openapi.components import ADMIN_AUTH, errors
from sharing_server.openapi.shapes import (
    BOOLEAN,
    DATE_TIME,
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
    parameter_refs,
    response,
)
from sharing_server.openapi.share_metadata import ADMIN_FIELDS, REQUEST_FIELDS, UPDATE_FIELDS

ADMIN_ERRORS = (401, 403, 429)
NULLABLE_DATE_TIME: Schema = {**DATE_TIME, "nullable": True}
# The admin API's durations (`sharing_server.admin.commands.parse_duration`).
DURATION: Schema = {"type": "string", "pattern": r"^(\d{1,9}[smhdw]|never)$"}
GRACE_PERIOD: Schema = {"type": "string", "pattern": r"^\d{1,9}[smhdw]$"}
# The CLI's `--no-check` as the admin API spells it (`Admin` checks on every path).
CHECK_TABLES: Schema = {
    **BOOLEAN,
    "default": True,
    "description": "Check that each added table is there (a Delta table's `_delta_log/`, an Iceberg "
    "table in its catalog) and refuse the request (400) otherwise; false shares tables written later.",
}


def area() -> Area:
    in_share = parameter_refs("adminShare")
    token_id = parameter("token_id", "path", NAME, "Token id.")
    client_id = parameter("client_id", "path", NAME, "OAuth client id.")
    in_table = [
        *in_share,
        parameter("schema", "path", NAME, "Schema name.", required=True),
        parameter("table", "path", NAME, "Table name.", required=True),
    ]
    gone = response("Done.")
    return Area(
        tags={"admin": "Shares, tokens and OAuth clients (the admin token; off unless set)."},
        operations={
            ("admin_list_shares", "GET"): admin_operation(
                "adminListShares",
                "List shares (searched by name, a page at a time with limit)",
                returns("Shares in name order; `next` when there may be more.", "AdminShareList"),
                (400,),
                [
                    parameter(
                        "search", "query", STRING, "Only shares whose name holds this text (any case)."
                    ),
                    parameter(
                        "after", "query", STRING, "Only shares named after this one (the last `next`)."
                    ),
                    parameter("limit", "query", INTEGER, "At most this many (1–1000); all without it."),
                ],
            ),
            ("admin_create_share", "POST"): admin_operation(
                "adminCreateShare",
                "Create a share",
                returns("Created.", "CreatedShare"),
                (409,),
                [],
                "CreateShareRequest",
                201,
            ),
            ("admin_share_info", "GET"): admin_operation(
                "adminShareInfo",
                "A share's metadata, tables and credential counts",
                returns("The share.", "ShareInfo"),
                (404,),
                in_share,
            ),
            ("admin_update_share", "PATCH"): admin_operation(
                "adminUpdateShare",
                "Add or remove tables, change the display name, comment and properties (all or none)",
                returns("Updated.", "UpdatedShare"),
                (404, 409),
                in_share,
                "UpdateShareRequest",
            ),
            ("admin_remove_share", "DELETE"): admin_operation(
                "adminRemoveShare",
                "Remove a share, its tokens and clients",
                gone,
                (404,),
                in_share,
                status=204,
            ),
            ("admin_set_restriction", "PUT"): admin_operation(
                "adminSetRestriction",
                "Serve part of a table: the rows where `where` holds, the `columns` listed",
                returns("The table's restriction.", "TableRestrictionResult"),
                (404,),
                in_table,
                "TableRestrictionRequest",
            ),
            ("admin_clear_restriction", "DELETE"): admin_operation(
                "adminClearRestriction",
                "Share the whole table again",
                returns("The table, unrestricted.", "TableRestrictionResult"),
                (404,),
                in_table,
            ),
            ("admin_list_tokens", "GET"): admin_operation(
                "adminListTokens", "List tokens", returns("Tokens.", "TokenList"), (404,), in_share
            ),
            ("admin_create_token", "POST"): admin_operation(
                "adminCreateToken",
                "Issue a bearer token (the secret is shown once)",
                returns("Issued.", "IssuedToken"),
                (404,),
                in_share,
                "CreateTokenRequest",
                201,
            ),
            ("admin_rotate_token", "POST"): admin_operation(
                "adminRotateToken",
                "Replace a token; the old one works until the grace period ends",
                returns("The new token.", "IssuedToken"),
                (404,),
                [*in_share, token_id],
                "RotateTokenRequest",
                201,
            ),
            ("admin_revoke_token", "DELETE"): admin_operation(
                "adminRevokeToken", "Revoke a token", gone, (404,), [*in_share, token_id], status=204
            ),
            ("admin_list_oauth_clients", "GET"): admin_operation(
                "adminListOAuthClients",
                "List OAuth clients",
                returns("Clients.", "OAuthClientList"),
                (404,),
                in_share,
            ),
            ("admin_create_oauth_client", "POST"): admin_operation(
                "adminCreateOAuthClient",
                "Register an OAuth client (the secret is shown once)",
                returns("Registered.", "IssuedOAuthClient"),
                (404,),
                in_share,
                "CreateOAuthClientRequest",
                201,
            ),
            ("admin_revoke_oauth_client", "DELETE"): admin_operation(
                "adminRevokeOAuthClient",
                "Revoke an OAuth client",
                gone,
                (404,),
                [*in_share, client_id],
                status=204,
            ),
            ("admin_update_token", "PATCH"): admin_operation(
                "adminUpdateToken",
                "Change a token's description and/or expiry (counted from now)",
                returns("The token.", "TokenEntry"),
                (404,),
                [*in_share, token_id],
                "UpdateTokenRequest",
            ),
            ("admin_health", "GET"): admin_operation(
                "adminHealth",
                "The share store, and each Iceberg catalog with its backend and last load error",
                returns("Health.", "AdminHealth"),
                (),
                [],
            ),
        },
        schemas=_schemas(),
        parameters={"adminShare": parameter("share", "path", NAME, "Share name.")},
    )


def admin_operation(
    operation_id: str,
    summary: str,
    ok: Schema,
    statuses: tuple[int, ...],
    parameters: list[Schema],
    body: str | None = None,
    status: int = 200,
    tag: str = "admin",
) -> Schema:
    extra = (400, 413) if body else ()
    return operation(
        operation_id,
        summary,
        tag,
        ADMIN_AUTH,
        {str(status): ok, **errors(*sorted({*ADMIN_ERRORS, *statuses, *extra}))},
        parameters,
        json_body(model(body), required=False) if body else None,
    )


def returns(description: str, body: str) -> Schema:
    return response(description, json_content(model(body)))


def _schemas() -> dict[str, Schema]:
    token_state = {"type": "string", "enum": ["active", "rotating", "expired", "revoked"]}
    return {
        "CatalogHealth": object_schema(
            {
                "name": STRING,
                "backend": {**STRING, "description": "rest, sql, glue, hive, hadoop, s3tables, …"},
                "loaded": BOOLEAN,
                "lastError": {
                    **STRING,
                    "nullable": True,
                    "description": "Why it last failed to load, "
                    "until it loads again; never a setting's value.",
                },
                "lastErrorAt": NULLABLE_DATE_TIME,
            }
        ),
        "AdminHealth": object_schema(
            {
                "store": {**STRING, "description": "The store's database (sqlite, postgresql)."},
                "catalogs": array(model("CatalogHealth")),
            }
        ),
        # The profiles `sharing_server.auth.profiles` writes, as issued tokens and clients carry them.
        "BearerProfile": object_schema(
            {
                "shareCredentialsVersion": {"type": "integer", "enum": [1]},
                "endpoint": STRING,
                "bearerToken": STRING,
            },
            {"expirationTime": STRING},
        ),
        "OAuthProfile": object_schema(
            {
                "shareCredentialsVersion": {"type": "integer", "enum": [2]},
                "type": {"type": "string", "enum": ["oauth_client_credentials"]},
                "endpoint": STRING,
                "tokenEndpoint": STRING,
                "clientId": STRING,
                "clientSecret": STRING,
            }
        ),
        "AdminShare": object_schema(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "tables": INTEGER,
                "activeTokens": INTEGER,
                **ADMIN_FIELDS,
            }
        ),
        "AdminShareList": object_schema({"items": array(model("AdminShare"))}, {"next": STRING}),
        "CreateShareRequest": object_schema(
            {"name": STRING},
            {
                "tables": {
                    **array(STRING),
                    "description": "`SCHEMA` words, each followed by its `NAME:delta:BUCKET:PATH` "
                    "or `NAME:uniform:WAREHOUSE:NAMESPACE:TABLE` specs.",
                },
                "history": BOOLEAN,
                "check": CHECK_TABLES,
                **REQUEST_FIELDS,
            },
        ),
        "CreatedShare": object_schema({"name": STRING, "id": STRING, "tables": INTEGER, **ADMIN_FIELDS}),
        "SharedTableEntry": object_schema(
            {
                "schema": STRING,
                "name": STRING,
                "format": STRING,
                "historyShared": BOOLEAN,
                "restriction": {**model("TableRestriction"), "nullable": True},
            },
            {"bucket": STRING, "path": STRING, "warehouse": STRING, "namespace": STRING, "table": STRING},
        ),
        "TableRestriction": object_schema(
            {
                "where": {**STRING, "nullable": True, "description": "The row filter, as it was set."},
                "columns": {**array(STRING), "nullable": True, "description": "The columns served."},
            }
        ),
        "TableRestrictionRequest": object_schema(
            {},
            {
                "where": {
                    **STRING,
                    "description": "A SQL predicate over the table's columns; "
                    "`CURRENT_RECIPIENT('key')` reads the recipient's property.",
                },
                "columns": {**array(STRING), "description": "The columns served (every other is absent)."},
            },
        ),
        "TableRestrictionResult": object_schema(
            {
                "share": STRING,
                "schema": STRING,
                "name": STRING,
                "restriction": {**model("TableRestriction"), "nullable": True},
            }
        ),
        "ShareInfo": object_schema(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "tables": array(model("SharedTableEntry")),
                "activeTokens": INTEGER,
                "activeOAuthClients": INTEGER,
                **ADMIN_FIELDS,
            }
        ),
        "UpdateShareRequest": object_schema(
            {},
            {
                "add": {**array(STRING), "description": "`SCHEMA:NAME:delta:BUCKET:PATH` specs."},
                "remove": {**array(STRING), "description": "`SCHEMA/NAME` references."},
                "history": BOOLEAN,
                "check": CHECK_TABLES,
                **UPDATE_FIELDS,
            },
        ),
        "UpdatedShare": object_schema({"name": STRING, "added": INTEGER, "removed": INTEGER, **ADMIN_FIELDS}),
        "TokenEntry": object_schema(
            {
                "id": STRING,
                "state": token_state,
                "description": STRING,
                "createdAt": DATE_TIME,
                "expiresAt": NULLABLE_DATE_TIME,
                "replacedBy": {**STRING, "nullable": True},
            }
        ),
        "TokenList": object_schema({"items": array(model("TokenEntry"))}),
        "CreateTokenRequest": object_schema({}, {"expires": DURATION, "description": STRING}),
        "RotateTokenRequest": object_schema({}, {"grace": GRACE_PERIOD}),
        "UpdateTokenRequest": object_schema({}, {"expires": DURATION, "description": STRING}),
        "IssuedToken": object_schema(
            {
                "id": STRING,
                "token": STRING,
                "expiresAt": NULLABLE_DATE_TIME,
                "endpoint": STRING,
                "profile": model("BearerProfile"),
            },
            {"replaces": STRING, "graceEndsAt": NULLABLE_DATE_TIME},
        ),
        "OAuthClientEntry": object_schema(
            {
                "clientId": STRING,
                "state": token_state,
                "description": STRING,
                "createdAt": DATE_TIME,
                "expiresAt": NULLABLE_DATE_TIME,
            }
        ),
        "OAuthClientList": object_schema({"items": array(model("OAuthClientEntry"))}),
        "CreateOAuthClientRequest": object_schema({}, {"expires": DURATION, "description": STRING}),
        "IssuedOAuthClient": object_schema(
            {
                "clientId": STRING,
                "clientSecret": STRING,
                "expiresAt": NULLABLE_DATE_TIME,
                "endpoint": STRING,
                "tokenEndpoint": STRING,
                "profile": model("OAuthProfile"),
            }
        ),
    }
