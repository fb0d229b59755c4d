"""What every area of the OpenAPI document shares: the error responses and the security schemes.

Errors have one body (`Error`: `errorCode` and `message`, from
`sharing_server.http.errors`) whichever endpoint answers them, so each status is
described once here and referred to by the operations that can answer it.
"""

from __future__ import annotations

from sharing_server.openapi.shapes import (
    STRING,
    Schema,
    Security,
    header,
    json_content,
    model,
    object_schema,
    ref,
    response,
)

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

PROTOCOL_AUTH: Security = [{"recipientBearer": []}]
ADMIN_AUTH: Security = [{"adminBearer": []}]
CLIENT_AUTH: Security = [{"oauthClientBasic": []}]
# AIStor Tables' catalog under `/_iceberg` (`sharing_server.auth.catalog_callers`): any one of these.
CATALOG_AUTH: Security = [{"catalogSigV4": []}, {"catalogBearer": []}, {"adminBearer": []}]
NO_AUTH: Security = []

SECURITY_SCHEMES: dict[str, Schema] = {
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
    # OpenAPI 3.0 has no scheme for AWS signatures: described as the header that carries one.
    "catalogSigV4": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "AWS Signature Version 4 (`AWS4-HMAC-SHA256`) with signing name `s3tables`, any "
        "region, by a catalog user's access and secret keys, as botocore and pyiceberg sign requests. "
        "The user's IAM-style policy is checked on every request.",
    },
    "catalogBearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "A catalog access token from `POST /_iceberg/v1/oauth/tokens` (a catalog user's "
        "keys as client credentials), valid for an hour and checked against the user's policy.",
    },
}


def errors(*statuses: int) -> dict[str, Schema]:
    """The shared error responses of `statuses`, by reference."""
    return {str(status): ref("responses", ERRORS[status][0]) for status in statuses}


def bodyless_errors(*statuses: int) -> dict[str, Schema]:
    """HEAD answers errors with the status (and auth headers) only."""
    return {str(status): {"description": ERRORS[status][1]} for status in statuses}


def shared_schemas() -> dict[str, Schema]:
    return {"Error": object_schema({"errorCode": STRING, "message": STRING})}


def error_responses() -> dict[str, Schema]:
    headers = {
        401: {"WWW-Authenticate": header(STRING)},
        429: {"Retry-After": header({"type": "integer", "minimum": 1})},
    }
    return {
        name: response(description, json_content(model("Error")), headers.get(status))
        for status, (name, description) in ERRORS.items()
    }
