"""The console's Activity page at the retention cap: 100,000 events over 7 days, on SQLite and PostgreSQL.

What the page asks the store for (three summaries, the hourly chart, the recent
list) is timed for the 24-hour, 7-day and 31-day views, median of five, against
the issue's target of 200 ms of server time.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.results import record
from share_store.persistence import ShareStore, sqlite_url
from share_store.persistence.activity import ActivityEvent

EVENTS = 100_000
TARGET_MS = 200.0
VIEWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "31d": timedelta(days=31)}


def events(count: int, now: datetime, seed: int = 7) -> Iterator[ActivityEvent]:
    """`count` requests spread over the last week: 50 shares of 6 tables, 4 tokens each; each table's
    version moves on every 6 hours."""
    rng = random.Random(seed)
    routes = ["query", "metadata", "version", "list_tables", "changes"]
    for _ in range(count):
        token = rng.randrange(200)
        share = token % 50
        age = rng.uniform(0, 7 * 86400)
        yield ActivityEvent(
            time=now - timedelta(seconds=age),
            route=rng.choice(routes),
            status=rng.choice([200] * 19 + [404]),
            token_id=f"token{token:04d}",
            share_name=f"share{share:02d}",
            schema_name="default",
            table_name=f"table{rng.randrange(6)}",
            version=int((7 * 86400 - age) // (6 * 3600)),
            files=rng.randrange(100),
            bytes=rng.randrange(10**8),
            duration_ms=rng.uniform(1, 50),
        )


def page_queries(store: ShareStore, since: datetime, until: datetime) -> None:
    store.activity_summaries(since, until)
    store.activity_per_hour(since, until)
    store.recent_activity(since, until, 50)


def timed(call: Callable[[], None], repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def fill(store: ShareStore, now: datetime) -> None:
    batch: list[ActivityEvent] = []
    for event in events(EVENTS, now):
        batch.append(event)
        if len(batch) == 5000:
            store.record_activity(batch)
            batch = []
    if batch:
        store.record_activity(batch)


@contextmanager
def stores() -> Iterator[Iterator[tuple[str, ShareStore]]]:
    with tempfile.TemporaryDirectory() as tmp:
        postgres = None

        def opened() -> Iterator[tuple[str, ShareStore]]:
            nonlocal postgres
            store = ShareStore(sqlite_url(Path(tmp) / "activity.db"))
            try:
                yield "SQLite", store
            finally:
                store.close()
            try:
                from tests.postgres import start_postgres

                postgres = start_postgres()
            except (OSError, RuntimeError) as error:
                print(f"  PostgreSQL not measured: {error}")
                return
            store = ShareStore(postgres.create_database("activity"))
            try:
                yield "PostgreSQL", store
            finally:
                store.close()

        try:
            yield opened()
        finally:
            if postgres is not None:
                postgres.stop()


def bench_activity() -> None:
    print(f"\nActivity page at {EVENTS:,} events over 7 days (median of 5, ms)")
    now = datetime.now(UTC)
    with stores() as opened:
        for name, store in opened:
            started = time.perf_counter()
            fill(store, now)
            print(f"  {name}: {EVENTS:,} events written in {time.perf_counter() - started:.1f} s")
            # A fresh process: no settled day's summaries kept yet.
            cold = ShareStore(store.engine.url.render_as_string(hide_password=False))
            try:
                ms = timed(lambda cold=cold: page_queries(cold, now - VIEWS["7d"], now), repeats=1)
            finally:
                cold.close()
            verdict = "ok" if ms <= TARGET_MS else "over"
            print(f"  {name} 7d, first view after a start: {ms:.0f} ms ({verdict})")
            record(
                f"activity page 7d first view, {name}, 100k events",
                f"{ms:.0f} ms",
                f"≤ {TARGET_MS:.0f} ms",
                verdict,
            )
            for view, span in VIEWS.items():
                ms = timed(lambda span=span, store=store: page_queries(store, now - span, now))
                verdict = "ok" if ms <= TARGET_MS else "over"
                print(f"  {name} {view}: {ms:.0f} ms ({verdict})")
                record(
                    f"activity page {view}, {name}, 100k events",
                    f"{ms:.0f} ms",
                    f"≤ {TARGET_MS:.0f} ms",
                    verdict,
                )
