"""The table page: format, version, size, schema, history and a preview of what recipients read."""

from __future__ import annotations

from sharing_server.console.table_view import cell, details
from sharing_server.console.web import Call, Page


def table_page(call: Call) -> Page:
    share, schema, name = call.param("share"), call.param("schema"), call.param("table")
    table = call.admin.get_table(share, schema, name)
    # The provider's own look: the whole table, whatever its restriction serves recipients.
    reader = call.console.readers.unrestricted(table)
    context = {
        "share": share,
        "table": table,
        "details": details(reader, table),
        "cell": cell,
        "active": "shares",
    }
    return Page("table.html", context)
