"""A share as `/shares` and `/shares/{share}` say it: `name`, `id`, and the 2026-02 protocol's
`displayName`, `comment` and `properties` where the provider set them.

What is not set is left out, not sent as null or {}: the protocol's fields are optional,
and clients before 2026-02 (the Python client's `Share.from_json` reads only `name`;
the JVM connector's Jackson mapper ignores unknown fields) see what they always saw.
"""

from __future__ import annotations

from typing import Any

from share_store.model import Share


def share_item(share: Share) -> dict[str, Any]:
    item: dict[str, Any] = {"name": share.name, "id": share.id}
    if share.display_name:
        item["displayName"] = share.display_name
    if share.comment:
        item["comment"] = share.comment
    if share.properties:
        item["properties"] = dict(share.properties)
    return item
