"""Server-side scan planning (issue 52) against pyiceberg's own planning, of one table of
`BENCH_PLAN_FILES` (10,000) data files in 10 manifests, on our `/_iceberg` over SeaweedFS.

The table's files are entries made for the bench (one real Parquet file's statistics under
10,000 names, committed with pyiceberg's fast append in 10 commits): planning reads only the
manifest list and the manifests, never a data file, so the files need not be there.

Per mode, the best of three: wall time of `plan_files()` of the whole table and of a filter on
`id` that keeps 1% of the files (pruned by the files' bounds), and the bytes moved: for server
planning the HTTP bodies pyiceberg sends and receives (plan, plan tasks), for client planning
the manifest list and manifests it reads from S3 (their sizes in the metadata).
`BENCH_WAREHOUSE=small` makes a table of 2,000 files.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record
from pyiceberg.types import LongType

from bench.results import record
from bench.servers import running_seaweed
from bench.timing import ratio_row
from bench.warehouse_catalog import create
from bench.warehouse_sides import NAMESPACE, our_side

COMMITS = 10
PREFIX = "scan planning"


def files(start: int, count: int, location: str) -> list[DataFile]:
    """`count` data files of 100 rows each, ids [100 i, 100 i + 99], with bounds to prune by."""
    made = []
    for i in range(start, start + count):
        low, high = to_bytes(LongType(), i * 100), to_bytes(LongType(), i * 100 + 99)
        made.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=f"{location}/data/bench-{i:06d}.parquet",
                file_format=FileFormat.PARQUET,
                partition=Record(),
                record_count=100,
                file_size_in_bytes=4096,
                column_sizes={1: 800, 2: 1200},
                value_counts={1: 100, 2: 100},
                null_value_counts={1: 0, 2: 0},
                lower_bounds={1: low},
                upper_bounds={1: high},
                split_offsets=[4],
            )
        )
    return made


def wide_table(catalog: Catalog, total: int) -> Table:
    table = create(catalog, f"planned_{uuid.uuid4().hex[:6]}")
    per_commit = total // COMMITS
    for n in range(COMMITS):
        with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
            for data_file in files(n * per_commit, per_commit, table.location()):
                append.append_data_file(data_file)
    return table


class Bytes:
    """The HTTP bytes a pyiceberg catalog's session sends and receives from the moment it counts."""

    def __init__(self, catalog: Catalog) -> None:
        self.sent = self.received = 0
        session = catalog._session  # type: ignore[attr-defined]
        session.hooks["response"].append(self._count)

    def _count(self, response: Any, *_: Any, **__: Any) -> None:
        self.sent += len(response.request.body or b"")
        self.received += len(response.content)

    def reset(self) -> None:
        self.sent = self.received = 0


def manifest_bytes(table: Table) -> int:
    """What a client's planning reads: the manifest list and every data manifest."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    listed = table.io.new_input(snapshot.manifest_list)
    return len(listed) + sum(m.manifest_length for m in snapshot.manifests(table.io))


def best(action: Callable[[], int], runs: int = 3) -> tuple[float, int]:
    """The best wall time of `runs`, and what the action counted."""
    times, counted = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        counted = action()
        times.append(time.perf_counter() - started)
    return min(times), counted


def planning(table: Table, row_filter: str) -> Callable[[], int]:
    """Plans a scan of `table` with `row_filter`: how many files it plans."""
    return lambda: len(list(table.scan(row_filter=row_filter).plan_files()))


def bench_scan_planning(total: int | None = None) -> None:
    small = os.environ.get("BENCH_WAREHOUSE", "") == "small"
    total = total or (2_000 if small else int(os.environ.get("BENCH_PLAN_FILES", "10000")))
    with running_seaweed() as seaweed, our_side(seaweed, name="run-scan-planning") as (ours, _):
        writer = ours.connect()
        started = time.perf_counter()
        name = f"{NAMESPACE}.{wide_table(writer, total).name()[-1]}"
        made = time.perf_counter() - started
        record(f"{PREFIX}: a table of {total:,} files in {COMMITS} commits, made in", f"{made:.1f} s")
        server = ours.connect(**{"scan-planning-mode": "server"})
        assert server.supports_server_side_planning()
        counted = Bytes(server)
        cases = (("whole table", "true", total), ("1% of files by id", f"id < {total}", total // 100))
        for label, row_filter, expected in cases:
            local = writer.load_table(name)
            client_s, planned = best(planning(local, row_filter))
            assert planned == expected, (planned, expected)
            remote = server.load_table(name)
            counted.reset()
            server_s, planned = best(planning(remote, row_filter), runs=1)  # the bytes of one plan
            assert planned == expected, (planned, expected)
            http = counted.sent + counted.received
            server_s = min(server_s, best(planning(remote, row_filter))[0])
            what = f"{PREFIX} of {total:,} files, {label}"
            record(
                f"{what}: client (pyiceberg) / server", f"{client_s * 1000:.0f} / {server_s * 1000:.0f} ms"
            )
            mb = f"{manifest_bytes(local) / 1e6:.2f} / {http / 1e6:.2f} MB"
            record(f"{what}: bytes, manifests read by the client / HTTP of the server's", mb)
            ratio_row(f"{what}: wall, server / client", server_s / client_s, None)
