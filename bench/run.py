"""`make bench`: presigning, /query on large tables, client reads, concurrency, hints, hostile use, Spark.

Every comparison is a ratio measured side by side in the same run, since shared
machines are noisy. Prints a table and writes it to bench/RESULTS.md. Run as
`python -m bench.run` from the project root, which puts `share_store` and `testbed`
on sys.path. BENCH_SIZES, BENCH_LOG_ENTRIES, BENCH_ICEBERG_FILES, BENCH_HINT_FILES,
BENCH_EQUALITY_MB, BENCH_STALLED and BENCH_WAREHOUSE=small make a shorter run;
`python -m bench.run hints s3` runs only the scenarios named (printed, not written:
RESULTS.md holds whole runs).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import cache

from bench.activity import bench_activity
from bench.cold_reads import bench_cold_local
from bench.concurrency import bench_concurrency, bench_stalled_streams
from bench.equality import bench_equality_deletes
from bench.hints import bench_hints
from bench.hostile import bench_rate_limit_tricks, bench_writer_commits
from bench.iceberg_queries import bench_iceberg, bench_iceberg_deletes
from bench.iceberg_rest import bench_iceberg_rest
from bench.idempotent_commits import bench_idempotent_commits
from bench.local_queries import bench_million, bench_server
from bench.maintenance import bench_maintenance
from bench.maintenance_budget import bench_maintenance_budget
from bench.presign import bench_presign
from bench.restart import bench_restart
from bench.restricted import bench_restricted
from bench.results import RESULTS, machine, write_results
from bench.rows import readable_rows
from bench.s3_queries import bench_s3
from bench.scale import bench_scale
from bench.scan_planning import bench_scan_planning
from bench.spark_reads import bench_spark
from bench.warehouse_catalog import bench_warehouse
from bench.warehouse_delegation import bench_delegation, bench_signing_keys


def scenarios() -> dict[str, Callable[[], None]]:
    """Every scenario by name, in the order a whole run takes them."""
    sizes = [int(s) for s in os.environ.get("BENCH_SIZES", "1000,10000,100000").split(",")]
    million = int(os.environ.get("BENCH_LOG_ENTRIES", "1000000"))
    iceberg_files = int(os.environ.get("BENCH_ICEBERG_FILES", "10000"))
    hint_files = int(os.environ.get("BENCH_HINT_FILES", "10000"))
    rows = cache(readable_rows)  # 2M rows, made once for the scenarios that read them

    return {
        "presign": bench_presign,
        "server": lambda: bench_server(sizes, rows()),
        "cold": bench_cold_local,
        "concurrency": bench_concurrency,
        "million": lambda: bench_million(million),
        "s3": lambda: bench_s3(rows(), sizes),
        "iceberg": lambda: bench_iceberg(rows(), iceberg_files),
        "iceberg-deletes": lambda: bench_iceberg_deletes(iceberg_files),
        "iceberg-rest": lambda: bench_iceberg_rest(iceberg_files),
        "warehouse": bench_warehouse,
        "idempotency": bench_idempotent_commits,
        "scan-planning": bench_scan_planning,
        "delegation": bench_delegation,
        "signing-keys": bench_signing_keys,
        "maintenance": bench_maintenance,
        "maintenance-budget": bench_maintenance_budget,
        "hints": lambda: bench_hints(hint_files),
        "equality": lambda: bench_equality_deletes(int(os.environ.get("BENCH_EQUALITY_MB", "300"))),
        "writer": bench_writer_commits,
        "rate-limits": bench_rate_limit_tricks,
        "spark": lambda: bench_spark(rows()),
        "activity": bench_activity,
        "scale": bench_scale,
        "restart": bench_restart,
        "restricted": bench_restricted,
        "stalled-streams": lambda: bench_stalled_streams(int(os.environ.get("BENCH_STALLED", "1000"))),
    }


def main(names: list[str]) -> None:
    available = scenarios()
    unknown = [name for name in names if name not in available]
    if unknown:
        sys.exit(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    print(f"Machine: {machine()}\n")
    for name, run in available.items():
        if not names or name in names:
            run()
    if names:
        print("\nonly some scenarios ran: RESULTS.md is left as it was")
        return
    write_results(RESULTS)
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main(sys.argv[1:])
