"""The OpenAPI document says a share's metadata (issue 51) as it is served and taken, with the
store's bounds."""

from __future__ import annotations

from sharing_server.openapi import admin, delta_sharing


def test_the_protocol_s_share_has_the_optional_metadata_fields() -> None:
    share = delta_sharing.area().schemas["Share"]
    assert share["required"] == ["name"]
    fields = share["properties"]
    assert fields["displayName"]["maxLength"] == 255 and fields["comment"]["maxLength"] == 65_536
    assert fields["properties"]["maxProperties"] == 50
    assert fields["properties"]["additionalProperties"]["type"] == "string"


def test_the_admin_api_s_shares_take_and_show_the_metadata() -> None:
    schemas = admin.area().schemas
    for name in ("AdminShare", "ShareInfo", "CreatedShare", "UpdatedShare"):
        fields = schemas[name]["properties"]
        assert fields["displayName"]["nullable"] and fields["comment"]["nullable"], name
        assert {"displayName", "comment", "properties"} <= set(schemas[name]["required"]), name
    assert {"displayName", "comment", "properties"} <= set(schemas["CreateShareRequest"]["properties"])
    update = schemas["UpdateShareRequest"]["properties"]
    assert update["unset"]["items"]["type"] == "string" and "displayName" in update
