"""Recent activity in the store, on SQLite and PostgreSQL: summaries, last use, bounded retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from share_store.persistence import ShareStore, sqlite_url
from share_store.persistence.activity import ActivityEvent


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path):
    url = (
        sqlite_url(tmp_path / "store.db")
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    store = ShareStore(url)
    yield store
    store.close()


NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def event(minutes_ago: float, **fields) -> ActivityEvent:
    base = {"route": "table_query", "status": 200, "token_id": "t1", "share_name": "s"}
    return ActivityEvent(time=NOW - timedelta(minutes=minutes_ago), **{**base, **fields})


def test_summaries_group_requests_by_share_table_and_token(store: ShareStore) -> None:
    store.record_activity(
        [
            event(5, schema_name="a", table_name="x", version=1, files=3, bytes=100),
            event(4, schema_name="a", table_name="x", version=2, files=4, bytes=50),
            event(3, schema_name="a", table_name="x", version=2, status=404, error_code="NOT_FOUND"),
            event(2, token_id="t2", schema_name="a", table_name="y", version=7, files=1, bytes=10),
            event(120, schema_name="a", table_name="x"),  # outside the range asked for
        ]
    )
    since, until = NOW - timedelta(hours=1), NOW
    tables = {row.key: row for row in store.activity_summary("table", since, until)}
    x = tables[("s", "a", "x")]
    assert (x.requests, x.versions, x.files, x.bytes, x.errors) == (3, 2, 7, 150, 1)
    assert x.last == NOW - timedelta(minutes=3)
    tokens = [(row.key, row.requests) for row in store.activity_summary("token", since, until)]
    assert tokens == [(("t1", "s"), 3), (("t2", "s"), 1)]
    assert [row.requests for row in store.activity_summary("share", since, until)] == [4]
    assert sum(store.activity_per_hour(since, until).values()) == 4
    assert store.token_last_use(["t1", "t2", "t3"]) == {
        "t1": NOW - timedelta(minutes=3),
        "t2": NOW - timedelta(minutes=2),
    }


def test_requests_per_hour_are_counted_by_the_store_in_utc_hours(store: ShareStore) -> None:
    # NOW is 12:00 UTC: 1, 59 and 60 minutes before it fall in 11:00; 61 and 119 in 10:00; 180 outside.
    store.record_activity([event(minutes) for minutes in (1, 59, 60, 61, 119, 180)])
    hours = store.activity_per_hour(NOW - timedelta(hours=2), NOW)
    assert hours == {NOW - timedelta(hours=1): 3, NOW - timedelta(hours=2): 2}
    assert all(hour.tzinfo is not None and hour.utcoffset() == timedelta(0) for hour in hours)


def test_prune_keeps_the_retention_and_the_row_cap(store: ShareStore) -> None:
    store.record_activity([event(minutes) for minutes in (500, 400, 30, 20, 10)])
    # Older than 5 hours go, then all but the newest two.
    assert store.prune_activity(NOW - timedelta(hours=5), max_events=2) == 3
    left = store.recent_activity(NOW - timedelta(days=1), NOW)
    assert [row["time"] for row in left] == [NOW - timedelta(minutes=10), NOW - timedelta(minutes=20)]
    assert store.prune_activity(NOW - timedelta(hours=5), max_events=2) == 0


def test_the_recorder_keeps_recipients_requests_only(tmp_path: Path) -> None:
    from sharing_server.observability.activity import ActivityRecorder

    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    recorder = ActivityRecorder(store, ("/delta-sharing", "/iceberg"), timedelta(hours=1), 100)
    now = datetime.now(UTC)
    base = {"time": now.isoformat(), "status": 200, "bytes": 900}
    query = {
        **base,
        "route": "table_query",
        "token_id": "t1",
        "share": "s",
        "schema": "a",
        "table": "x",
        "version": 3,
        "files": 2,
        "file_bytes": 5000,
    }
    recorder.offer("/delta-sharing/shares/s/schemas/a/tables/x/query", query)
    recorder.offer("/delta-sharing/files/b/k", {**base, "route": "serve_file"})  # a signed URL: no token
    recorder.offer("/admin/v1/shares", {**base, "route": "admin_list_shares"})
    recorder.offer("/console/shares", {**base, "route": "console_list_shares"})
    signing = {**base, "route": "iceberg_s3_sign", "token_id": "t1", "share": "s", "table": "x"}
    recorder.offer("/iceberg/v1/aws/s3/sign", signing)  # an Iceberg client reading the same share
    recorder.flush()
    event, signed = sorted(
        store.recent_activity(now - timedelta(minutes=1), now + timedelta(minutes=1)),
        key=lambda e: e["route"],
    )[::-1]
    assert (signed["route"], signed["token_id"], signed["share_name"]) == ("iceberg_s3_sign", "t1", "s")
    assert (event["route"], event["token_id"], event["version"], event["files"]) == (
        "table_query",
        "t1",
        3,
        2,
    )
    assert event["bytes"] == 5000  # the data files handed out, not the response's 900 bytes
    store.close()


def expected_summaries(events: list[ActivityEvent], since: datetime, until: datetime) -> dict:
    """What the summaries must be, straight from the events."""
    keys = {
        "share": lambda e: (e.share_name,),
        "table": lambda e: (e.share_name, e.schema_name, e.table_name),
        "token": lambda e: (e.token_id, e.share_name),
    }
    result: dict = {}
    for group, key_of in keys.items():
        sums: dict = {}
        for e in events:
            if since <= e.time < until:
                s = sums.setdefault(key_of(e), [0, set(), 0, 0, 0, e.time])
                s[0] += 1
                if e.version is not None:
                    s[1].add(e.version)
                s[2] += e.files
                s[3] += e.bytes
                s[4] += e.status >= 400
                s[5] = max(s[5], e.time)
        result[group] = {k: (v[0], len(v[1]), v[2], v[3], v[4], v[5]) for k, v in sums.items()}
    return result


def test_week_and_month_views_read_day_sums_and_equal_the_events(store: ShareStore) -> None:
    import random

    rng = random.Random(3)
    now = datetime.now(UTC).replace(microsecond=0)
    events = [
        ActivityEvent(
            time=now - timedelta(seconds=rng.randrange(10 * 86400)),
            route="table_query",
            status=rng.choice([200, 200, 200, 404]),
            token_id=rng.choice(["t1", "t2", "t3", None]),
            share_name=rng.choice(["s1", "s2"]),
            schema_name="db",
            table_name=rng.choice(["a", "b", None]),
            version=rng.choice([1, 2, 3, None]),
            files=rng.randrange(5),
            bytes=rng.randrange(1000),
        )
        for _ in range(3000)
    ]
    store.record_activity(events[:1500])
    store.record_activity(events[1500:])  # a second batch adds to the same days
    for since, until in (
        (now - timedelta(days=7), now),
        (now - timedelta(days=31), now),
        (now - timedelta(hours=30), now - timedelta(hours=3)),
        (now - timedelta(days=3, hours=5), now - timedelta(days=1, hours=2)),
    ):
        for _ in range(2):  # the second read comes from the settled days kept in memory
            got = store.activity_summaries(since, until)
            want = expected_summaries(events, since, until)
            for group in ("share", "table", "token"):
                rows = {
                    r.key: (r.requests, r.versions, r.files, r.bytes, r.errors, r.last) for r in got[group]
                }
                assert rows == want[group], (group, since, until)
    # A day not yet settled (today) is read again each time: a new event shows at once.
    late = ActivityEvent(
        time=now - timedelta(seconds=1), route="q", status=200, token_id="t9", share_name="s9"
    )
    store.record_activity([late])
    tokens = {
        r.key for r in store.activity_summaries(now - timedelta(days=7), now + timedelta(seconds=1))["token"]
    }
    assert ("t9", "s9") in tokens
