"""A restart at provider scale: 11,000 shared tables, of which 100 were read in the last day.

10,000 shares of one table each and one share of 1,000 tables name 100 real
Delta tables (many names, one path); the activity kept says 100 of them were
read an hour ago. A server is started on that store, and on an empty one: time
until it answers and until it is idle, its memory then, and the CPU the server
spends in the two minutes after it settled with nobody reading (the warmer's
work). `python -m bench.run restart`.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake
from sqlalchemy import create_engine, insert

from bench.procfs import settle
from bench.results import record
from bench.servers import Server
from share_store.persistence import ShareStore
from share_store.persistence.activity import ActivityEvent
from share_store.persistence.sql_schema import shares_table, tables_table
from sharing_server.config import load_config
from sharing_server.startup import prepare_disk

SHARES, BIG_SHARE_TABLES, DISTINCT_PATHS, READ = 10_000, 1_000, 100, 100
IDLE_SECONDS = 120


def delta_tables(root: Path) -> None:
    for index in range(DISTINCT_PATHS):
        table = root / "bench" / f"restart/t{index}"
        if not (table / "_delta_log").exists():
            for part in range(3):
                write_deltalake(
                    str(table), pa.table({"id": list(range(part * 100, part * 100 + 100))}), mode="append"
                )


def fill(server: Server) -> None:
    config = load_config(server.config)
    prepare_disk(config)
    url = config.resolved_store_url()
    ShareStore(url).close()  # the schema
    engine = create_engine(url)
    now = datetime.now(UTC)
    ids = [str(uuid.uuid4()) for _ in range(SHARES + 1)]
    shares = [
        {"id": sid, "name": f"s{i:05d}", "name_key": f"s{i:05d}", "created_at": now}
        for i, sid in enumerate(ids)
    ]

    def table(share_id: str, schema: str, name: str, index: int) -> dict[str, object]:
        path = f"restart/t{index % DISTINCT_PATHS}"
        return {"id": str(uuid.uuid4()), "share_id": share_id, "schema_name": schema, "schema_key": schema,
                "name": name, "name_key": name, "format": "delta", "bucket": "bench", "path": path,
                "history_shared": True, "created_at": now}  # fmt: skip

    tables = [table(ids[i], "default", "t", i) for i in range(SHARES)]
    tables += [table(ids[SHARES], "big", f"t{i:04d}", i) for i in range(BIG_SHARE_TABLES)]
    with engine.begin() as conn:
        conn.execute(insert(shares_table), shares)
        for start in range(0, len(tables), 5000):
            conn.execute(insert(tables_table), tables[start : start + 5000])
    engine.dispose()
    store = ShareStore(url)
    try:
        when = now - timedelta(hours=1)
        store.record_activity(
            [ActivityEvent(when, "table_query", 200, None, f"s{i:05d}", "default", "t") for i in range(READ)]
        )
    finally:
        store.close()


def started(server: Server) -> tuple[float, float, float, float]:
    """Seconds to answering, seconds to idle, RSS once idle (MB), CPU seconds in IDLE_SECONDS after."""
    began = time.perf_counter()
    server.start()  # returns once /healthz answers, after 3 s of settling
    serving = time.perf_counter() - began - 3
    assert server.process is not None
    idle = settle(server.process.pid) + 3
    rss = server.rss_mb()
    cpu = server.cpu_seconds()
    time.sleep(IDLE_SECONDS)
    return serving, idle, rss, server.cpu_seconds() - cpu


def bench_restart() -> None:
    print(f"\nRestart: {SHARES + BIG_SHARE_TABLES:,} shared tables, {READ} read in the last day")
    empty = Server("restart-empty")
    loaded = Server("restart", env={"SHARING_CONSOLE_ACTIVITY_RETENTION_HOURS": "168"})
    root = Path(str(load_config(loaded.config).storage["root"]))
    delta_tables(root)
    fill(loaded)
    results = {}
    for name, server in (("empty store", empty), ("11,000 tables", loaded)):
        try:
            results[name] = started(server)
        finally:
            server.stop()
        serving, idle, rss, cpu = results[name]
        print(f"  {name}: serving after {serving:.1f} s, idle after {idle:.1f} s, RSS {rss:.0f} MB, "
              f"CPU {cpu:.1f} s in the {IDLE_SECONDS} s after")  # fmt: skip
    base, big = results["empty store"], results["11,000 tables"]
    growth = big[2] / base[2] - 1
    record("restart, 11,000 tables (100 read): time to serving / to idle", f"{big[0]:.1f} s / {big[1]:.1f} s")
    record("restart, 11,000 tables: RSS once idle vs an empty store", f"{big[2]:.0f} vs {base[2]:.0f} MB "
           f"(+{growth:.0%})", "≤ +10%", "met" if growth <= 0.10 else "missed")  # fmt: skip
    per_ten_minutes = big[3] * 600 / IDLE_SECONDS
    record(f"restart, 11,000 tables: server CPU in the {IDLE_SECONDS} s after idle, nobody reading",
           f"{big[3]:.1f} s", "< 30 s in 10 min", "met" if per_ten_minutes < 30 else "missed")  # fmt: skip
