"""`make bench`: figures for presigning, /query on large tables, client reads and concurrency.

Every comparison is a ratio measured side by side in the same run, since shared
machines are noisy. Prints a table and writes it to bench/RESULTS.md. Run as
`python -m bench.run` from the project root, which puts `share_store` and `tests`
on sys.path. BENCH_SIZES, BENCH_LOG_ENTRIES and BENCH_ICEBERG_FILES make a shorter run.

`python -m bench.run NAME ...` runs only the scenarios named (see STANDALONE) and
prints their rows without touching bench/RESULTS.md, which holds whole runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from bench.results import RESULTS, machine, write_results
from bench.scenarios import (
    bench_concurrency,
    bench_iceberg,
    bench_million,
    bench_presign,
    bench_s3,
    bench_server,
    bench_stalled_streams,
)
from bench.tables import readable_rows


def stalled_streams() -> None:
    bench_stalled_streams(int(os.environ.get("BENCH_STALLED", "1000")))


# Scenarios that need nothing from the others, runnable by name.
STANDALONE: dict[str, Callable[[], None]] = {"stalled-streams": stalled_streams}


def main(names: list[str]) -> None:
    if names:
        unknown = [name for name in names if name not in STANDALONE]
        if unknown:
            sys.exit(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(STANDALONE)}")
        print(f"Machine: {machine()}\n")
        for name in names:
            STANDALONE[name]()
        return
    sizes = [int(s) for s in os.environ.get("BENCH_SIZES", "1000,10000,100000").split(",")]
    million = int(os.environ.get("BENCH_LOG_ENTRIES", "1000000"))
    iceberg_files = int(os.environ.get("BENCH_ICEBERG_FILES", "10000"))
    print(f"Machine: {machine()}\n")
    bench_presign()
    rows_table = readable_rows()
    readable = bench_server(sizes, rows_table)
    for workers in (1, 2):
        bench_concurrency(workers)
    bench_million(million)
    bench_s3(readable, sizes)
    bench_iceberg(rows_table, iceberg_files)
    stalled_streams()
    write_results(RESULTS)
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main(sys.argv[1:])
