"""Restricted tables (issue 50): what a restriction costs a recipient's /query, over local storage.

- a 10,000-file table partitioned by `p` over 4 values, restricted to `p = 0` (decided from
  partition values, no file rewritten, as `region = 'emea'` would be): its cold first /query
  against the same table unrestricted, in rounds of server restarts, the order alternated;
- a table of about 150 MB of Parquet in 30 files, restricted by a row filter on non-partition
  columns and a column list cutting its two text columns, so that every file is derived:
  the cold /query that derives them all (MB of source per second, the server's CPU and peak
  RSS), then warm against the same files unrestricted, then a restart and its first query,
  which must find the derived files in the cache and derive nothing;
- the same table and restriction derived by Spark (`share derive`) before any query: the
  command's time, and the server's first query after it (which derives nothing);
- the same restriction on one file of 76 MB in a single row group: the server's peak RSS.

A request that comes while a version is being derived waits up to
`ANSWER_BUDGET_SECONDS` and is otherwise answered 503; the client here asks again at
once, so the time to the served answer is the derivation's. `python -m bench.run restricted`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path

import httpx

from bench.delta_tables import make_partitioned_table
from bench.paths import BUCKET, QUERY
from bench.procfs import settle
from bench.restricted_tables import make_customer_table
from bench.results import record
from bench.servers import Server
from bench.timing import timed_query
from share_store.tables.options import DEFAULT_CACHE_PREFIX

REGION_FILES, PARTITIONS = 10_000, 4
CUSTOMER_FILES, CUSTOMER_ROWS = 30, 60_000
#: One file of one row group, as writers that target large files make them: derivation decodes
#: a row group at a time, so this is what a derivation's memory grows with.
LARGE_FILE_ROWS = 1_000_000
COLD_ROUNDS, WARM_RUNS = 3, 7
ROW_FILTER = "amount < 400 AND nation <> 'JAPAN'"
COLUMNS = "id,amount,nation"
RSS_GOAL_MB, RATIO_GOAL = 300, 1.2
#: Where the server writes the restricted tables' derived files: the tables' own bucket.
DERIVED = BUCKET / DEFAULT_CACHE_PREFIX / "restricted"
# Cold rows are a table's first query with nothing built before it: warming at start off.
COLD_START = {"SHARING_CACHE_WARM_ON_START": "false"}


def bench_restricted() -> None:
    print(
        f"\nRestricted tables: {REGION_FILES:,}-file partition filter; derivation of {CUSTOMER_FILES} files"
    )
    shutil.rmtree(DERIVED, ignore_errors=True)  # each run's tables are new: earlier runs' files are waste
    bench_partition_filter()
    bench_derivation()
    bench_spark_derivation()
    bench_large_file()
    shutil.rmtree(DERIVED, ignore_errors=True)


def served(client: httpx.Client, path: str) -> tuple[float, float, int, int]:
    """A /query asked again at once after every 503 (derivation pending): seconds from the first ask
    to the served answer's first and last byte, its lines, and the 503s before it."""
    start = time.perf_counter()
    pending = 0
    while True:
        began = time.perf_counter()
        try:
            first, last, lines = timed_query(client, path)
        except httpx.HTTPStatusError as error:
            if error.response.status_code != 503:
                raise
            pending += 1
            continue
        waited = began - start
        return waited + first, waited + last, lines, pending


def ratio_verdict(ratio: float) -> str:
    return "met" if ratio <= RATIO_GOAL else "missed"


def bench_partition_filter() -> None:
    """Row 1: the cold first /query, restricted by partition against unrestricted, per round.

    A third table, restricted alike, is asked after those two in each round: cold too, but in
    a process that has already parsed a row filter (the parser's import is a first-use cost).
    """
    for name in ("regions-a", "regions-b", "regions-c"):
        make_partitioned_table(BUCKET / name, REGION_FILES, PARTITIONS)
    server = Server("run-restricted-regions", env=COLD_START)
    tables = {"regions": "regions-a", "regions_whole": "regions-b", "regions_later": "regions-c"}
    server.share({name: f"delta:bench:{path}" for name, path in tables.items()})
    for name in ("regions", "regions_later"):
        server.cli("share", "restrict", "bench", f"default/{name}", "--where", "p = 0")
    token = server.token()
    cold: dict[str, list[tuple[float, float]]] = {name: [] for name in tables}
    warm: dict[str, list[float]] = {"regions": [], "regions_whole": []}
    served_lines = REGION_FILES // PARTITIONS + 2
    expected = {"regions": served_lines, "regions_whole": REGION_FILES + 2, "regions_later": served_lines}
    for round_ in range(COLD_ROUNDS):
        order = ["regions", "regions_whole"] if round_ % 2 == 0 else ["regions_whole", "regions"]
        with server, server.client(token) as client:
            for name in [*order, "regions_later"]:
                first, last, lines, pending = served(client, f"{QUERY}/{name}/query")
                assert lines == expected[name] and not pending, (name, lines, pending)
                cold[name].append((first, last))
            if round_ == 0:
                assert server.process is not None
                settle(server.process.pid)
                for _ in range(WARM_RUNS):
                    for name in order:
                        warm[name].append(timed_query(client, f"{QUERY}/{name}/query")[1])
    label = f"/query {REGION_FILES:,} files, partitioned by p, restricted to p = 0 (2,500 served as is)"
    for index, side in ((0, "first byte"), (1, "last byte")):
        restricted, whole, later = (statistics.median(t[index] for t in cold[name]) for name in tables)
        record(
            f"{label}: cold {side}, restricted / unrestricted (medians of {COLD_ROUNDS} starts)",
            f"{restricted * 1000:.0f} / {whole * 1000:.0f} ms",
        )
        ratio = restricted / whole
        record(f"{label}: cold {side} ratio", f"{ratio:.2f}x", f"<= {RATIO_GOAL}x", ratio_verdict(ratio))
        record(
            f"{label}: cold {side}, a restricted table asked after another (filter parser loaded)",
            f"{later * 1000:.0f} ms ({later / whole:.2f}x unrestricted)",
        )
    restricted, whole = statistics.median(warm["regions"]), statistics.median(warm["regions_whole"])
    record(
        f"{label}: warm last byte, restricted / unrestricted (medians of {WARM_RUNS})",
        f"{restricted * 1000:.0f} / {whole * 1000:.0f} ms ({restricted / whole:.2f}x)",
    )


def derived_files() -> dict[Path, float]:
    """Every derived file and sidecar in the cache, with its modification time."""
    return {path: path.stat().st_mtime for path in DERIVED.rglob("*") if path.is_file()}


def bench_derivation() -> None:
    """Rows 2 to 4: a cold /query deriving every file, then warm, then after a restart."""
    source_bytes = make_customer_table(BUCKET / "customers", CUSTOMER_FILES, CUSTOMER_ROWS)
    mb = source_bytes / 1e6
    server = Server("run-restricted-derive", env=COLD_START)
    server.share({"customers": "delta:bench:customers", "customers_whole": "delta:bench:customers"})
    server.cli("share", "restrict", "bench", "default/customers", "--where", ROW_FILTER, "--columns", COLUMNS)
    token = server.token()
    restricted_path, whole_path = f"{QUERY}/customers/query", f"{QUERY}/customers_whole/query"
    label = f"restricted {CUSTOMER_FILES} files / {mb:.0f} MB (row filter, 3 of 5 cols)"
    with server, server.client(token) as client:
        assert server.process is not None
        settle(server.process.pid)
        rss_before, cpu_before = server.rss_mb(), server.cpu_seconds()
        first, last, lines, pending = served(client, restricted_path)
        cpu = server.cpu_seconds() - cpu_before
        peak = server.peak_rss_mb()
        made = derived_files()
        parquet = [path for path in made if path.suffix == ".parquet"]
        assert lines == CUSTOMER_FILES + 2 and len(parquet) == CUSTOMER_FILES, (lines, len(parquet))
        derived_mb = sum(path.stat().st_size for path in parquet) / 1e6
        threads = min(2, os.cpu_count() or 1)
        record(
            f"{label}: cold /query deriving every file, first / last byte ({pending} answers 503 first)",
            f"{first:.2f} / {last:.2f} s",
        )
        record(
            f"{label}: source MB per second, wall / per core (wall / min(2, cores) = {threads})",
            f"{mb / last:.0f} / {mb / last / threads:.0f} MB/s",
        )
        record(
            f"{label}: source MB per server CPU second (derived output {derived_mb:.1f} MB)",
            f"{mb / cpu:.0f} MB/s ({cpu:.1f} CPU s)",
        )
        record(
            f"{label}: server peak RSS (RSS {rss_before:.0f} MB before the query)",
            f"{peak:.0f} MB",
            f"<= {RSS_GOAL_MB} MB",
            "met" if peak <= RSS_GOAL_MB else "missed",
        )
        timed_query(client, whole_path)  # the unrestricted side's snapshot, built once
        restricted_times, whole_times = [], []
        for _ in range(WARM_RUNS):
            restricted_times.append(timed_query(client, restricted_path)[1])
            whole_times.append(timed_query(client, whole_path)[1])
        restricted, whole = statistics.median(restricted_times), statistics.median(whole_times)
        record(
            f"{label}: warm /query once derived, last byte, restricted / whole (medians of {WARM_RUNS})",
            f"{restricted * 1000:.1f} / {whole * 1000:.1f} ms",
        )
        ratio = restricted / whole
        record(f"{label}: warm ratio", f"{ratio:.2f}x", f"<= {RATIO_GOAL}x", ratio_verdict(ratio))
    with server, server.client(token) as client:
        assert server.process is not None
        settle(server.process.pid)
        cpu_before = server.cpu_seconds()
        first, last, lines, pending = served(client, restricted_path)
        cpu = server.cpu_seconds() - cpu_before
        _, whole_last, _ = timed_query(client, whole_path)
        after = derived_files()
        rewritten = sum(1 for path, mtime in after.items() if made.get(path) != mtime)
        assert lines == CUSTOMER_FILES + 2 and not pending, (lines, pending)
        record(
            f"{label}: after a restart, first /query, first / last byte (unrestricted's first: last byte)",
            f"{first * 1000:.0f} / {last * 1000:.0f} ms ({whole_last * 1000:.0f} ms)",
        )
        record(
            f"{label}: after a restart, derived files written again / server CPU of the query",
            f"{rewritten} of {len(after)} / {cpu:.2f} s",
            "0 written",
            "met" if rewritten == 0 else "missed",
        )


def bench_spark_derivation() -> None:
    """The same table and restriction derived by Spark (`share derive`, local[2]) before any
    query, then the server's first /query, which must derive nothing."""
    source_bytes = make_customer_table(BUCKET / "customers-spark", CUSTOMER_FILES, CUSTOMER_ROWS)
    mb = source_bytes / 1e6
    server = Server("run-restricted-spark", env=COLD_START)
    server.share({"spark": "delta:bench:customers-spark"})
    server.cli("share", "restrict", "bench", "default/spark", "--where", ROW_FILTER, "--columns", COLUMNS)
    token = server.token()
    started = time.perf_counter()
    server.cli("share", "derive", "bench", "default/spark", "--master", "local[2]")
    seconds = time.perf_counter() - started
    label = f"restricted {CUSTOMER_FILES} files / {mb:.0f} MB derived by Spark (share derive, local[2])"
    made = [path for path in derived_files() if path.suffix == ".parquet" and "spark" not in path.name]
    with server, server.client(token) as client:
        assert server.process is not None
        settle(server.process.pid)
        cpu_before = server.cpu_seconds()
        _, last, lines, pending = served(client, f"{QUERY}/spark/query")
        cpu = server.cpu_seconds() - cpu_before
        assert lines == CUSTOMER_FILES + 2 and not pending, (lines, pending)
    record(
        f"{label}: the command's wall time, Spark's start included (source MB per second)",
        f"{seconds:.1f} s ({mb / seconds:.0f} MB/s)",
    )
    record(
        f"{label}: the server's first /query after it, last byte / server CPU ({len(made)} cached)",
        f"{last * 1000:.0f} ms / {cpu:.2f} s",
    )


def bench_large_file() -> None:
    """The derivation's peak RSS when the source is one large file of one row group."""
    source_bytes = make_customer_table(BUCKET / "customers-large", 1, LARGE_FILE_ROWS)
    server = Server("run-restricted-large", env=COLD_START)
    server.share({"large": "delta:bench:customers-large"})
    server.cli("share", "restrict", "bench", "default/large", "--where", ROW_FILTER, "--columns", COLUMNS)
    token = server.token()
    with server, server.client(token) as client:
        assert server.process is not None
        settle(server.process.pid)
        rss_before = server.rss_mb()
        _, last, lines, _ = served(client, f"{QUERY}/large/query")
        assert lines == 3, lines
        peak = server.peak_rss_mb()
    record(
        f"restricted 1 file / {source_bytes / 1e6:.0f} MB in one row group: cold /query deriving it, "
        f"server peak RSS (RSS {rss_before:.0f} MB before; the query {last:.2f} s)",
        f"{peak:.0f} MB",
        f"<= {RSS_GOAL_MB} MB",
        "met" if peak <= RSS_GOAL_MB else "missed",
    )
