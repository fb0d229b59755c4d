"""A share's metadata in the OpenAPI document (the 2026-02 protocol's `displayName`, `comment` and
`properties`): as recipients get it at `/shares` (left out when not set), and as the admin API
takes and shows it (null and {} when not set). The bounds are the store's
(`share_store.persistence.share_metadata`), said once here for both."""

from __future__ import annotations

from share_store.persistence.share_metadata import (
    MAX_COMMENT,
    MAX_DISPLAY_NAME,
    MAX_PROPERTIES,
    MAX_PROPERTY_KEY,
    MAX_PROPERTY_VALUE,
)
from sharing_server.openapi.shapes import STRING, Schema, array

DISPLAY_NAME: Schema = {
    **STRING,
    "maxLength": MAX_DISPLAY_NAME,
    "description": "The share's name for people.",
}
COMMENT: Schema = {
    **STRING,
    "maxLength": MAX_COMMENT,
    "description": "What the share holds, for its recipients.",
}
PROPERTIES: Schema = {
    "type": "object",
    "maxProperties": MAX_PROPERTIES,
    "additionalProperties": {**STRING, "maxLength": MAX_PROPERTY_VALUE},
    "description": f"The provider's properties of the share, string to string; keys of 1 to "
    f"{MAX_PROPERTY_KEY} characters.",
}

#: The protocol's share item's optional fields (2026-02): present only when set.
PROTOCOL_FIELDS: dict[str, Schema] = {
    "displayName": DISPLAY_NAME,
    "comment": COMMENT,
    "properties": PROPERTIES,
}

#: The admin API's answers: always there, null and {} when not set.
ADMIN_FIELDS: dict[str, Schema] = {
    "displayName": {**DISPLAY_NAME, "nullable": True},
    "comment": {**COMMENT, "nullable": True},
    "properties": PROPERTIES,
}

#: What share create and update take; on update null or "" clears a display name or comment.
REQUEST_FIELDS: dict[str, Schema] = {
    "displayName": {**DISPLAY_NAME, "nullable": True},
    "comment": {**COMMENT, "nullable": True},
    "properties": {**PROPERTIES, "description": "Properties to set (others are kept)."},
}
UPDATE_FIELDS: dict[str, Schema] = {
    **REQUEST_FIELDS,
    "unset": {**array(STRING), "description": "Keys of properties to remove."},
}
