"""The OpenAPI specs of the admin API's named recipients (`/admin/v1/recipients`) and their bodies."""

from __future__ import annotations

from typing import Any

from sharing_server.openapi.admin import DURATION, NULLABLE_DATE_TIME, admin_operation, returns
from sharing_server.openapi.shapes import (
    BOOLEAN,
    DATE_TIME,
    NAME,
    STRING,
    Area,
    Schema,
    array,
    model,
    object_schema,
    parameter,
    response,
)

TAG = "recipients"
#: What a restricted table's `CURRENT_RECIPIENT('key')` reads: keys of 1-128 letters, digits, `_-.`.
PROPERTIES: Schema = {
    "type": "object",
    "additionalProperties": {"type": "string", "maxLength": 1024},
    "maxProperties": 50,
}


def _recipients(*args: Any, **kwargs: Any) -> Schema:
    """An admin API operation (the admin token, its refusals), filed under the recipients' tag."""
    return admin_operation(*args, **{**kwargs, "tag": TAG})


def area() -> Area:
    recipient = parameter("recipient", "path", NAME, "Recipient name.")
    token_id = parameter("token_id", "path", NAME, "Token id.")
    gone = response("Done.")
    operations = {
        ("admin_list_recipients", "GET"): _recipients(
            "adminListRecipients",
            "List named recipients",
            returns("Recipients.", "RecipientList"),
            (),
            [],
        ),
        ("admin_create_recipient", "POST"): _recipients(
            "adminCreateRecipient",
            "Create a named recipient",
            returns("Created.", "Recipient"),
            (409,),
            [],
            "CreateRecipientRequest",
            201,
        ),
        ("admin_recipient_info", "GET"): _recipients(
            "adminRecipientInfo",
            "A recipient, its shares and tokens",
            returns("The recipient.", "RecipientInfo"),
            (404,),
            [recipient],
        ),
        ("admin_update_recipient", "PATCH"): _recipients(
            "adminUpdateRecipient",
            "Set and remove a recipient's properties (all or none)",
            returns("The recipient.", "Recipient"),
            (404,),
            [recipient],
            "UpdateRecipientRequest",
        ),
        ("admin_remove_recipient", "DELETE"): _recipients(
            "adminRemoveRecipient",
            "Remove a recipient (its tokens are revoked)",
            gone,
            (404,),
            [recipient],
            status=204,
        ),
        ("admin_grant_share", "POST"): _recipients(
            "adminGrantShare",
            "Grant a share to a recipient: its tokens open it at once",
            returns("The recipient.", "Recipient"),
            (404, 409),
            [recipient],
            "GrantShareRequest",
            201,
        ),
        ("admin_revoke_recipient_share", "DELETE"): _recipients(
            "adminRevokeRecipientShare",
            "Revoke a share from a recipient",
            returns("The recipient.", "Recipient"),
            (404,),
            [recipient, parameter("share", "path", NAME, "Share name.")],
        ),
        ("admin_list_recipient_tokens", "GET"): _recipients(
            "adminListRecipientTokens",
            "A recipient's tokens",
            returns("Tokens.", "TokenList"),
            (404,),
            [recipient],
        ),
        ("admin_create_recipient_token", "POST"): _recipients(
            "adminCreateRecipientToken",
            "Issue a recipient token (the secret, or a one-time activation link, shown once)",
            returns("Issued.", "IssuedRecipientToken"),
            (404,),
            [recipient],
            "CreateRecipientTokenRequest",
            201,
        ),
        ("admin_revoke_recipient_token", "DELETE"): _recipients(
            "adminRevokeRecipientToken",
            "Revoke a recipient's token",
            gone,
            (404,),
            [recipient, token_id],
            status=204,
        ),
    }
    return Area(
        tags={TAG: "Named recipients: one token for every share granted (the admin token)."},
        operations=operations,
        schemas=_schemas(),
    )


def _schemas() -> dict[str, Schema]:
    return {
        "Recipient": object_schema(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "shares": array(STRING),
                "properties": PROPERTIES,
            }
        ),
        "RecipientList": object_schema({"items": array(model("Recipient"))}),
        "RecipientInfo": object_schema(
            {
                "name": STRING,
                "id": STRING,
                "createdAt": DATE_TIME,
                "shares": array(STRING),
                "properties": PROPERTIES,
                "tokens": array(model("TokenEntry")),
            }
        ),
        "CreateRecipientRequest": object_schema({"name": STRING}, {"properties": PROPERTIES}),
        "UpdateRecipientRequest": object_schema(
            {},
            {
                "properties": {**PROPERTIES, "description": "Properties to set (others are kept)."},
                "unset": {**array(STRING), "description": "Keys of properties to remove."},
            },
        ),
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
    }
