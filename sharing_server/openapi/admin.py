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
    recipient = parameter("recipient", "path", NAME, "Recipient name.")
    gone = response("Done.")
    return Area(
        tags={"admin": "Shares, tokens and OAuth clients (the admin token; off unless set)."},
        operations={
            ("admin_list_shares", "GET"): _admin(
                "adminListShares",
                "List shares (searched by name, a page at a time with limit)",
                _returns("Shares in name order; `next` when there may be more.", "AdminShareList"),
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
            ("admin_create_share", "POST"): _admin(
                "adminCreateShare",
                "Create a share",
                _returns("Created.", "CreatedShare"),
                (409,),
                [],
                "CreateShareRequest",
                201,
            ),
            ("admin_share_info", "GET"): _admin(
                "adminShareInfo",
                "A share's tables and credential counts",
                _returns("The share.", "ShareInfo"),
                (404,),
                in_share,
            ),
            ("admin_update_share", "PATCH"): _admin(
                "adminUpdateShare",
                "Add or remove tables",
                _returns("Updated.", "UpdatedShare"),
                (404, 409),
                in_share,
                "UpdateShareRequest",
            ),
            ("admin_remove_share", "DELETE"): _admin(
                "adminRemoveShare",
                "Remove a share, its tokens and clients",
                gone,
                (404,),
                in_share,
                status=204,
            ),
            ("admin_list_tokens", "GET"): _admin(
                "adminListTokens", "List tokens", _returns("Tokens.", "TokenList"), (404,), in_share
            ),
            ("admin_create_token", "POST"): _admin(
                "adminCreateToken",
                "Issue a bearer token (the secret is shown once)",
                _returns("Issued.", "IssuedToken"),
                (404,),
                in_share,
                "CreateTokenRequest",
                201,
            ),
            ("admin_rotate_token", "POST"): _admin(
                "adminRotateToken",
                "Replace a token; the old one works until the grace period ends",
                _returns("The new token.", "IssuedToken"),
                (404,),
                [*in_share, token_id],
                "RotateTokenRequest",
                201,
            ),
            ("admin_revoke_token", "DELETE"): _admin(
                "adminRevokeToken", "Revoke a token", gone, (404,), [*in_share, token_id], status=204
            ),
            ("admin_list_oauth_clients", "GET"): _admin(
                "adminListOAuthClients",
                "List OAuth clients",
                _returns("Clients.", "OAuthClientList"),
                (404,),
                in_share,
            ),
            ("admin_create_oauth_client", "POST"): _admin(
                "adminCreateOAuthClient",
                "Register an OAuth client (the secret is shown once)",
                _returns("Registered.", "IssuedOAuthClient"),
                (404,),
                in_share,
                "CreateOAuthClientRequest",
                201,
            ),
            ("admin_revoke_oauth_client", "DELETE"): _admin(
                "adminRevokeOAuthClient",
                "Revoke an OAuth client",
                gone,
                (404,),
                [*in_share, client_id],
                status=204,
            ),
            ("admin_update_token", "PATCH"): _admin(
                "adminUpdateToken",
                "Change a token's description and/or expiry (counted from now)",
                _returns("The token.", "TokenEntry"),
                (404,),
                [*in_share, token_id],
                "UpdateTokenRequest",
            ),
            ("admin_list_recipients", "GET"): _admin(
                "adminListRecipients",
                "List named recipients",
                _returns("Recipients.", "RecipientList"),
                (),
                [],
            ),
            ("admin_create_recipient", "POST"): _admin(
                "adminCreateRecipient",
                "Create a named recipient",
                _returns("Created.", "Recipient"),
                (409,),
                [],
                "CreateRecipientRequest",
                201,
            ),
            ("admin_recipient_info", "GET"): _admin(
                "adminRecipientInfo",
                "A recipient, its shares and tokens",
                _returns("The recipient.", "RecipientInfo"),
                (404,),
                [recipient],
            ),
            ("admin_remove_recipient", "DELETE"): _admin(
                "adminRemoveRecipient",
                "Remove a recipient (its tokens are revoked)",
                gone,
                (404,),
                [recipient],
                status=204,
            ),
            ("admin_grant_share", "POST"): _admin(
                "adminGrantShare",
                "Grant a share to a recipient: its tokens open it at once",
                _returns("The recipient.", "Recipient"),
                (404, 409),
                [recipient],
                "GrantShareRequest",
                201,
            ),
            ("admin_revoke_recipient_share", "DELETE"): _admin(
                "adminRevokeRecipientShare",
                "Revoke a share from a recipient",
                _returns("The recipient.", "Recipient"),
                (404,),
                [recipient, parameter("share", "path", NAME, "Share name.")],
            ),
            ("admin_list_recipient_tokens", "GET"): _admin(
                "adminListRecipientTokens",
                "A recipient's tokens",
                _returns("Tokens.", "TokenList"),
                (404,),
                [recipient],
            ),
            ("admin_create_recipient_token", "POST"): _admin(
                "adminCreateRecipientToken",
                "Issue a recipient token (the secret, or a one-time activation link, shown once)",
                _returns("Issued.", "IssuedRecipientToken"),
                (404,),
                [recipient],
                "CreateRecipientTokenRequest",
                201,
            ),
            ("admin_revoke_recipient_token", "DELETE"): _admin(
                "adminRevokeRecipientToken",
                "Revoke a recipient's token",
                gone,
                (404,),
                [recipient, token_id],
                status=204,
            ),
            ("admin_health", "GET"): _admin(
                "adminHealth",
                "The share store, and each Iceberg catalog with its backend and last load error",
                _returns("Health.", "AdminHealth"),
                (),
                [],
            ),
        },
        schemas=_schemas(),
        parameters={"adminShare": parameter("share", "path", NAME, "Share name.")},
    )


def _admin(
    operation_id: str,
    summary: str,
    ok: Schema,
    statuses: tuple[int, ...],
    parameters: list[Schema],
    body: str | None = None,
    status: int = 200,
) -> Schema:
    extra = (400, 413) if body else ()
    return operation(
        operation_id,
        summary,
        "admin",
        ADMIN_AUTH,
        {str(status): ok, **errors(*sorted({*ADMIN_ERRORS, *statuses, *extra}))},
        parameters,
        json_body(model(body), required=False) if body else None,
    )


def _returns(description: str, body: str) -> Schema:
    return response(description, json_content(model(body)))


def _schemas() -> dict[str, Schema]:
    token_state = {"type": "string", "enum": ["active", "rotating", "expired", "revoked"]}
    return {
        "Recipient": object_schema(
            {"name": STRING, "id": STRING, "createdAt": DATE_TIME, "shares": array(STRING)}
        ),
        "RecipientList": object_schema({"items": array(model("Recipient"))}),
        "RecipientInfo": object_schema(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "shares": array(STRING),
                "tokens": array(model("TokenEntry")),
            }
        ),
        "CreateRecipientRequest": object_schema({"name": STRING}),
        "GrantShareRequest": object_schema({"share": STRING}),
        "CreateRecipientTokenRequest": object_schema(
            {},
            {
                "expires": DURATION,
                "description": STRING,
                "activation": {
                    **BOOLEAN,
                    "description": "Answer a one-time link to the profile, not the secret.",
                },
            },
        ),
        "IssuedRecipientToken": object_schema(
            {"id": STRING, "recipient": STRING, "expiresAt": NULLABLE_DATE_TIME, "endpoint": STRING},
            {
                "token": STRING,
                "profile": model("BearerProfile"),
                "activationLink": STRING,
                "activationExpiresAt": DATE_TIME,
            },
        ),
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
            {"name": STRING, "id": STRING, "createdAt": DATE_TIME, "tables": INTEGER, "activeTokens": INTEGER}
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
            },
        ),
        "CreatedShare": object_schema({"name": STRING, "id": STRING, "tables": INTEGER}),
        "SharedTableEntry": object_schema(
            {"schema": STRING, "name": STRING, "format": STRING, "historyShared": BOOLEAN},
            {"bucket": STRING, "path": STRING, "warehouse": STRING, "namespace": STRING, "table": STRING},
        ),
        "ShareInfo": object_schema(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "tables": array(model("SharedTableEntry")),
                "activeTokens": INTEGER,
                "activeOAuthClients": INTEGER,
            }
        ),
        "UpdateShareRequest": object_schema(
            {},
            {
                "add": {**array(STRING), "description": "`SCHEMA:NAME:delta:BUCKET:PATH` specs."},
                "remove": {**array(STRING), "description": "`SCHEMA/NAME` references."},
                "history": BOOLEAN,
                "check": CHECK_TABLES,
            },
        ),
        "UpdatedShare": object_schema({"name": STRING, "added": INTEGER, "removed": INTEGER}),
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
