"""The Activity page: who read what over a chosen time range, from the events kept in the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from share_store.persistence.activity import ActivityRow
from sharing_server.console.chart import hourly
from sharing_server.console.web import Call, Page

RANGES = {"1h": 1, "24h": 24, "7d": 168}
DEFAULT_RANGE = "24h"
MAX_RANGE = timedelta(days=31)


def _moment(text: str | None) -> datetime | None:
    """A `datetime-local` field's value, taken as UTC; None if empty or malformed."""
    try:
        return datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None
    except ValueError:
        return None


def time_range(params: dict[str, str], now: datetime) -> tuple[str, datetime, datetime]:
    """The range asked for: `from` and `to` (UTC) if both are given and in order, else a preset."""
    start, end = _moment(params.get("from")), _moment(params.get("to"))
    if start is not None and end is not None and start < end:
        # One bar an hour: a month at most.
        return "custom", max(start, end - MAX_RANGE), end
    chosen = params.get("range", DEFAULT_RANGE)
    if chosen not in RANGES:
        chosen = DEFAULT_RANGE
    return chosen, now - timedelta(hours=RANGES[chosen]), now


def by_recipient(tokens: list[ActivityRow], names: dict[str, str]) -> list[ActivityRow]:
    """The token summary regrouped by named recipient (requests of its tokens on all its shares).
    Versions are not added up: the same version read through two tokens is one version."""
    grouped: dict[str, list[ActivityRow]] = {}
    for row in tokens:
        token_id = row.key[0]
        if token_id in names:
            grouped.setdefault(names[token_id], []).append(row)
    rows = [
        ActivityRow(
            key=(name,),
            requests=sum(r.requests for r in rows),
            versions=max(r.versions for r in rows),
            files=sum(r.files for r in rows),
            bytes=sum(r.bytes for r in rows),
            errors=sum(r.errors for r in rows),
            last=max(r.last for r in rows),
        )
        for name, rows in grouped.items()
    ]
    return sorted(rows, key=lambda row: (-row.requests, row.key))


def activity_page(call: Call) -> Page:
    chosen, since, until = time_range(dict(call.request.query_params), datetime.now(UTC))
    admin = call.admin
    summaries = admin.activity_summaries(since, until)
    context = {
        "ranges": list(RANGES),
        "chosen": chosen,
        "since": since,
        "until": until,
        "shares": summaries["share"],
        "tables": summaries["table"],
        "tokens": summaries["token"],
        "recipients": by_recipient(
            summaries["token"],
            admin.store.recipients_of_tokens([row.key[0] for row in summaries["token"] if row.key[0]]),
        ),
        "recent": admin.recent_activity(since, until, 50),
        "admin_events": admin.admin_events(since, until, 50),
        "chart": hourly(admin.activity_per_hour(since, until), since, until),
        "retention": call.console.activity_retention_hours,
        "active": "activity",
    }
    return Page("activity.html", context)
