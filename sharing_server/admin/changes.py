"""What an admin change set, for the admin audit: noted on the request, or kept by the CLI itself.

Through the admin API and the console, the request's audit record becomes the
admin event (`observability.activity.admin_event_of`): the change's text is
noted on it as `change`. The CLI on the store's host makes no request, so it
keeps the event itself, as from the client "cli". Texts hold names, restrictions
and properties, never a secret.
"""

from __future__ import annotations

from datetime import UTC, datetime

from share_store.persistence import ShareStore
from share_store.persistence.admin_events import AdminEvent
from sharing_server import paths
from sharing_server.observability.audit import current_fields


def record_change(store: ShareStore, method: str, path: str, change: str) -> None:
    """`change` (what was set) as this change's admin event: `path` is the admin API's, under its
    prefix, so that a change reads alike whichever way it was made."""
    fields = current_fields.get()
    if fields is not None:
        fields["change"] = change
        return
    event = AdminEvent(datetime.now(UTC), "cli", method, paths.ADMIN_PREFIX + path, 200, detail=change)
    store.record_admin_events([event])
