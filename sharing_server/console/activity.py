"""The Activity page: who read what over a chosen time range, from the events kept in the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sharing_server.console.chart import hourly
from sharing_server.console.web import Call, Page

RANGES = {"1h": 1, "24h": 24, "7d": 168}
DEFAULT_RANGE = "24h"


def activity_page(call: Call) -> Page:
    chosen = call.request.query_params.get("range", DEFAULT_RANGE)
    if chosen not in RANGES:
        chosen = DEFAULT_RANGE
    until = datetime.now(UTC)
    since = until - timedelta(hours=RANGES[chosen])
    admin = call.admin
    context = {
        "ranges": list(RANGES),
        "chosen": chosen,
        "since": since,
        "until": until,
        "shares": admin.activity("share", since, until),
        "tables": admin.activity("table", since, until),
        "tokens": admin.activity("token", since, until),
        "recent": admin.recent_activity(since, until, 50),
        "chart": hourly(admin.activity_times(since, until), since, until),
        "retention": call.request.app.state.options.activity_retention_hours,
        "active": "activity",
    }
    return Page("activity.html", context)
