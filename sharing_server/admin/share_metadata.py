"""A share's metadata in the admin operations: the change asked, its JSON shape, its audit text.

What may be kept is decided by the store (`share_store.persistence.share_metadata`);
here the admin's words become a `MetadataChange`, a share becomes the admin API's
`displayName`, `comment` and `properties`, and a change becomes the line its admin
event keeps.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from share_store.model import Share
from share_store.persistence import ShareStore
from share_store.persistence.share_metadata import MetadataChange
from sharing_server import paths
from sharing_server.admin.changes import record_change

#: How much of a comment or a property's value an admin event shows: the change, not a copy of it.
SHOWN = 64


def metadata_change(
    display_name: str | None = None,
    comment: str | None = None,
    properties: dict[str, str] | None = None,
    unset: list[str] | None = None,
) -> MetadataChange:
    """What an operation asks: None leaves a field as it is, "" clears it (the store checks it all)."""
    return MetadataChange(display_name, comment, dict(properties or {}), tuple(unset or ()))


def metadata_entry(share: Share) -> dict[str, Any]:
    """The admin API's fields of a share's metadata: null and {} for what is not set."""
    return {"displayName": share.display_name, "comment": share.comment, "properties": dict(share.properties)}


def _shown(text: str) -> str:
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def change_text(change: MetadataChange) -> str:
    """What `change` set, for its admin event: names and values, long ones cut."""
    parts: list[str] = []
    for label, value in (("display name", change.display_name), ("comment", change.comment)):
        if value == "":
            parts.append(f"{label} cleared")
        elif value is not None:
            parts.append(f"{label} {_shown(value)}")
    sets = [f"{key[:SHOWN]}={_shown(value)[1:-1]}" for key, value in sorted(change.properties.items())]
    unsets = [f"-{key[:SHOWN]}" for key in change.unset]
    if sets or unsets:
        parts.append("properties " + ", ".join(sets + unsets))
    return "; ".join(parts)


def record_metadata_change(store: ShareStore, method: str, share: str, change: MetadataChange) -> None:
    """`change` of `share` as its admin event (nothing asked: nothing recorded here)."""
    if change.is_empty:
        return
    if method == "POST":
        path = paths.ADMIN_SHARES
    else:
        path = paths.ADMIN_SHARE.replace("{share}", urllib.parse.quote(share, safe=""))
    record_change(store, method, path, f"share {share}: {change_text(change)}")
