"""`make bench`: figures for presigning, /query on large tables, client reads and concurrency.

Every comparison is a ratio measured side by side in the same run, since shared
machines are noisy. Prints a table and writes it to bench/RESULTS.md. Run as
`python -m bench.run` from the project root, which puts `share_store` and `tests`
on sys.path. BENCH_SIZES, BENCH_LOG_ENTRIES, BENCH_ICEBERG_FILES and BENCH_EQUALITY_MB make a shorter run.
"""

from __future__ import annotations

import os

from bench.results import RESULTS, machine, write_results
from bench.scenarios import (
    bench_concurrency,
    bench_equality_deletes,
    bench_iceberg,
    bench_million,
    bench_presign,
    bench_s3,
    bench_server,
)
from bench.tables import readable_rows


def main() -> None:
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
    bench_equality_deletes(int(os.environ.get("BENCH_EQUALITY_MB", "300")))
    write_results(RESULTS)
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
