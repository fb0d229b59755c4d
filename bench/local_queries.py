"""The server over local storage: /query of tables of each size, and whole-table reads through it.

Also every page of a paged /query, the first query after a warmed start (bench_s3
takes that on S3 too), and a million-entry log streamed from its checkpoint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
from deltalake import DeltaTable

from bench.client_floor import kernel_read, parquet_path_read
from bench.delta_tables import make_checkpointed_log, make_delta_table, make_readable
from bench.paths import BUCKET, FIRST_COMMIT, QUERY
from bench.procfs import settle
from bench.results import record
from bench.servers import Server, floor_server, limit_producer
from bench.timing import best_of, limit_rows, query_rows, read_ratio, timed_query
from bench.url_lifetimes import lifetime_rows, make_small_files
from share_store.delta.replay import STREAM_THRESHOLD_BYTES
from share_store.tables.snapshot_cache import FILES_CHECK_SECONDS


def bench_server(sizes: list[int], rows_table: pa.Table) -> None:
    """Local storage: /query per table size, a whole-table read against deltalake."""
    for files in sizes:
        make_delta_table(BUCKET / f"t{files // 1000}k", files)
    largest = max(sizes)
    checkpointed = f"c{largest // 1000}k"
    make_delta_table(BUCKET / checkpointed, largest, checkpoint=True)
    readable = BUCKET / "readable"
    make_readable(readable, rows_table)
    make_small_files(BUCKET / "small")
    # Cold rows are a table's first query with nothing built before it: warming at start off.
    server = Server("run", env={"SHARING_CACHE_WARM_ON_START": "false"})
    tables = {f"t{n // 1000}k": f"delta:bench:t{n // 1000}k" for n in sizes}
    tables |= {checkpointed: f"delta:bench:{checkpointed}", "readable": "delta:bench:readable"}
    tables |= {"small": "delta:bench:small"}
    profile, token = server.share(tables)
    with server:
        client = server.client(token)
        assert server.process is not None
        pid = server.process.pid
        for files in sizes:
            # Beyond 1 MB of commits (some 4,000 files) a first reader is answered streamed from the
            # commits, the held snapshot built behind (`streamed_commits`): warm is once that is done.
            query_rows(
                client, f"{files:>7,} files", f"t{files // 1000}k", files, targets=files == 100_000,
                settled=lambda: settle(pid),
            )  # fmt: skip
        query_rows(
            client, f"{largest:>7,} files, checkpointed", checkpointed, largest, settled=lambda: settle(pid)
        )
        paged_rows(client, f"{QUERY}/t{largest // 1000}k/query", largest)
        largest_name = f"t{largest // 1000}k"
        with limit_producer(BUCKET / largest_name / "_delta_log" / FIRST_COMMIT, "local") as limit:
            limit_rows(f"/query {largest:>7,} files", client, f"{QUERY}/{largest_name}/query", limit)
        record("server peak RSS after all /query runs", f"{server.peak_rss_mb():.0f} MB")
        url = f"{profile}#bench.default.readable"

        def direct() -> Any:
            return DeltaTable(str(readable)).to_pandas()

        read_ratio("load_as_pandas 2M rows / 8 files", lambda: delta_sharing.load_as_pandas(url), direct, 2.0)
        # The default call resolves the format and, offering delta first, reads delta-kernel's
        # way ([server] prefer_delta_format); the parquet path is what it took before.
        read_ratio(
            "load_as_pandas, parquet path (use_delta_format=False), 2M rows",
            lambda: delta_sharing.load_as_pandas(url, use_delta_format=False),
            direct,
        )
        client_floor_rows(readable, direct)
        # What the server contributes to such a read: its answer to the client's /query.
        _, answer, _ = timed_query(client, "/shares/bench/schemas/default/tables/readable/query")
        record("of which the server's /query answer (8 files)", f"{answer * 1000:.1f} ms")
        lifetime_rows(client, profile, f"t{largest // 1000}k", largest, "small")
    bench_warmed_start(largest)


def client_floor_rows(readable: Path, direct: Callable[[], Any]) -> None:
    """Each of the client's two paths with a perfect server (bench/client_floor.py), against `direct`."""
    read_ratio(
        "load_as_pandas floor, delta path: its delta-kernel read of the local files, no server",
        lambda: kernel_read(readable),
        direct,
        sides="floor / direct",
    )
    names = [Path(uri).name for uri in DeltaTable(str(readable)).file_uris()]
    with floor_server(readable) as base:
        read_ratio(
            "load_as_pandas floor, parquet path: its per-file reads from a bare sendfile server",
            lambda: parquet_path_read(base, names),
            direct,
            sides="floor / direct",
        )


def paged_rows(client: httpx.Client, path: str, files: int, pages: int = 10) -> None:
    """Every page of a warm paged /query (maxFiles = files / pages): the whole listing's time."""

    def all_pages() -> None:
        token, received = None, 0
        while True:
            body = {"maxFiles": files // pages} | ({"pageToken": token} if token else {})
            response = client.post(path, json=body)
            response.raise_for_status()
            lines = response.content.splitlines()
            received += len(lines) - 3  # protocol, metadata, endStreamAction
            token = json.loads(lines[-1])["endStreamAction"].get("nextPageToken")
            if not token:
                break
        assert received == files, received

    took = best_of(all_pages, times=3)
    record(f"/query {files:>7,} files in {pages} pages (maxFiles): all pages, warm", f"{took:.2f} s")


def read_before_the_start(server: Server, table: str) -> None:
    """A recipient read `table` an hour ago, as the activity kept in the store says: a start warms
    the tables read lately (`[cache] warm_window_hours`), not every table shared."""
    from datetime import UTC, datetime, timedelta

    from share_store.persistence import ShareStore
    from share_store.persistence.activity import ActivityEvent
    from sharing_server.config import load_config

    store = ShareStore(load_config(server.config).resolved_store_url())
    try:
        when = datetime.now(UTC) - timedelta(hours=1)
        store.record_activity([ActivityEvent(when, "table_query", 200, None, "bench", "default", table)])
    finally:
        store.close()


def bench_warmed_start(files: int, storage: dict[str, str] | None = None, where: str = "") -> None:
    """A recipient's first query after a start with the defaults: the server built its tables'
    snapshots in the background ([cache] warm_on_start) before anyone asked.

    Asked once the server has settled and then stayed idle for twice `[cache]
    files_check_seconds`: a first byte that waited only because the query came
    while the start's work was still trusted would not say what a recipient
    arriving later gets.
    """
    name = f"t{files // 1000}k"
    server = Server("run-warmed" + where.replace(" ", "-"), storage)
    _, token = server.share({name: f"delta:bench:{name}"})
    read_before_the_start(server, name)
    with server:
        assert server.process is not None
        waited = settle(server.process.pid)
        idle = 2 * FILES_CHECK_SECONDS
        time.sleep(idle)
        path = f"/shares/bench/schemas/default/tables/{name}/query"
        first, _, lines = timed_query(server.client(token), path)
        assert lines == files + 2
        record(
            f"/query {files:>7,} files{where}: first byte, first query after start and settle (warmed)",
            f"{first * 1000:.0f} ms (settled after {waited:.0f} s, then {idle:.0f} s idle)",
            "<= 100 ms",
            "met" if first <= 0.1 else "missed",
        )


def bench_million(files: int) -> None:
    """A log of a million entries, streamed from its checkpoint by a fresh server process."""
    name = f"log{files}"
    make_checkpointed_log(BUCKET / name, files)
    checkpoint = BUCKET / name / "_delta_log" / "00000000000000000001.checkpoint.parquet"
    if checkpoint.stat().st_size <= STREAM_THRESHOLD_BYTES:
        # Its data files do not exist, so only a streamed snapshot (which does not
        # look them up) can serve it; a held one answers that files are missing.
        print(f"skipped the {files:,}-entry log: its checkpoint is too small to be streamed")
        return
    server = Server("run-million")
    _, token = server.share({"million": f"delta:bench:{name}"})
    with server:
        warm = query_rows(server.client(token), f"{files:,}-entry log (streamed)", "million", files)
        record(
            f"/query {files:,}-entry log (streamed): warm last byte",
            f"{warm:.2f} s",
            "<= 4 s",
            "met" if warm <= 4 else "missed",
        )
        rss = server.peak_rss_mb()
        record(
            f"server peak RSS, {files:,}-entry log",
            f"{rss:.0f} MB",
            "<= 250 MB",
            "met" if rss <= 250 else "missed",
        )
