"""The server over SeaweedFS: /query, whole-table reads and the latest-version check over S3."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import delta_sharing
import pyarrow as pa
from deltalake import DeltaTable

from bench.cold_reads import bench_cold_s3
from bench.delta_tables import make_delta_table, make_readable
from bench.local_queries import bench_warmed_start
from bench.paths import BUCKET, FIRST_COMMIT, QUERY
from bench.procfs import settle
from bench.results import record
from bench.servers import Server, limit_producer, running_seaweed, upload_all
from bench.timing import best_of, limit_rows, query_rows, read_ratio, timed_query
from share_store.delta.log_listing import list_log
from share_store.storage.s3 import S3Storage
from testbed.deltalake_access import deltalake_options
from testbed.seaweed import upload_tree


def bench_s3(rows_table: pa.Table, sizes: list[int]) -> None:
    """The same tables in SeaweedFS: listings and reads over S3, URLs signed with SigV4."""
    largest = max(sizes)
    name = f"t{largest // 1000}k"
    make_delta_table(BUCKET / name, largest)
    make_delta_table(BUCKET / "t10k", 10_000)
    readable = BUCKET / "readable"
    make_readable(readable, rows_table)
    with running_seaweed() as seaweed:
        client = seaweed.client()
        client.create_bucket(Bucket="bench")
        # Every data file too: a query looks each one up, however many.
        for table in {name, "t10k"}:
            upload_all(client, BUCKET / table, "bench", table)
        upload_tree(client, readable, "bench", "readable")
        storage = S3Storage(seaweed.settings())
        freshness_check(storage, client)
        server = Server("run-s3", seaweed.storage_config(path_style="true"))
        profile, token = server.share(
            {name: f"delta:bench:{name}", "t10k": "delta:bench:t10k", "readable": "delta:bench:readable"}
        )
        with server:
            client = server.client(token)
            cold_first, _, _ = timed_query(client, f"{QUERY}/t10k/query")
            record(
                "/query  10,000 files on S3: cold first byte (files looked up)",
                f"{cold_first * 1000:.0f} ms",
                "<= 200 ms",
                "met" if cold_first <= 0.2 else "missed",
            )
            assert server.process is not None
            pid = server.process.pid
            # Its first reader is answered streamed from its one commit (`streamed_commits`), the
            # held snapshot built behind: warm is the query once that is done.
            query_rows(client, f"{largest:>7,} files on S3", name, largest, settled=lambda: settle(pid))
            commit = BUCKET / name / "_delta_log" / FIRST_COMMIT
            with limit_producer(commit, "s3", seaweed.endpoint) as limit:
                limit_rows(f"/query {largest:>7,} files on S3", client, f"{QUERY}/{name}/query", limit)
            options = deltalake_options(storage)
            url = f"{profile}#bench.default.readable"
            read_ratio(
                "load_as_pandas 2M rows / 8 files on S3",
                lambda: delta_sharing.load_as_pandas(url),
                lambda: DeltaTable("s3://bench/readable", storage_options=options).to_pandas(),
            )
            read_ratio(
                "load_as_pandas, parquet path (use_delta_format=False), on S3",
                lambda: delta_sharing.load_as_pandas(url, use_delta_format=False),
                lambda: DeltaTable("s3://bench/readable", storage_options=options).to_pandas(),
            )
        bench_warmed_start(largest, seaweed.storage_config(path_style="true"), " on S3")
        if largest == 100_000:
            bench_cold_s3(seaweed)


def freshness_check(storage: S3Storage, client: Any, commits: int = 3000) -> None:
    """What each query pays to learn a table's latest version, on a log of `commits` files on S3."""

    def put(version: int) -> None:
        client.put_object(Bucket="bench", Key=f"longlog/_delta_log/{version:020d}.json", Body=b"{}\n")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(commits)))
    prefix = "longlog/_delta_log/"
    full = best_of(lambda: list_log(storage, "bench", prefix))
    tail = best_of(lambda: list_log(storage, "bench", prefix, after=commits - 1))
    record(f"latest-version check, {commits:,}-commit log on S3: full listing", f"{full * 1000:.0f} ms")
    record(f"latest-version check, {commits:,}-commit log on S3: tail listing", f"{tail * 1000:.1f} ms")
