"""What `make bench` measures, one function per group of RESULTS.md rows.

Each scenario generates the tables it needs (bench.tables), starts the servers it
measures (bench.harness) and records its rows (bench.results); bench.run calls
them in the order the rows appear.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import delta_sharing
import httpx
import pyarrow as pa
from botocore.config import Config
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from bench.harness import (
    DATA,
    Server,
    best_of,
    close_all,
    connections_held,
    query_rows,
    read_ratio,
    running_seaweed,
    settle,
    stalled_readers,
    status_of,
    timed_query,
)
from bench.results import record
from bench.tables import (
    make_checkpointed_log,
    make_delta_table,
    make_iceberg_tables,
    make_readable,
)
from share_store.delta.replay import STREAM_THRESHOLD_BYTES, list_log
from share_store.storage.s3 import MISSING_CHECK_LIMIT, S3Storage
from share_store.storage.sigv4 import Credentials, S3Presigner
from tests.deltalake_access import deltalake_options
from tests.seaweed import upload_tree

# Where the Delta tables are generated: bucket `bench` of the local storage.
BUCKET = DATA / "buckets" / "bench"


def bench_presign() -> None:
    """Presigning one URL, ours against boto3's, in this process (no server involved)."""
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9000",
        region_name="us-east-1",
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    ours = S3Presigner("http://127.0.0.1:9000", "us-east-1", Credentials("AKIAEXAMPLE", "secret"))
    now = datetime.now(UTC)
    assert ours.presign("b", "k/0.parquet", 3600, now.replace(microsecond=0)) is not None
    n_ours, n_boto = 50_000, 5_000
    start = time.perf_counter()
    for i in range(n_ours):
        ours.presign("bucket", f"table/part-{i:06d}.parquet", 3600)
    per_ours = (time.perf_counter() - start) / n_ours
    start = time.perf_counter()
    for i in range(n_boto):
        client.generate_presigned_url(
            "get_object", Params={"Bucket": "bucket", "Key": f"table/part-{i:06d}.parquet"}, ExpiresIn=3600
        )
    per_boto = (time.perf_counter() - start) / n_boto
    record("presign one URL: ours", f"{per_ours * 1e6:.1f} µs")
    record("presign one URL: boto3 generate_presigned_url", f"{per_boto * 1e6:.1f} µs")
    ratio = per_boto / per_ours
    record("presign speed-up (boto3 / ours)", f"{ratio:.1f}x", ">= 20x", "met" if ratio >= 20 else "missed")


def bench_server(sizes: list[int], rows_table: pa.Table) -> Path:
    """Local storage: /query per table size, a whole-table read against deltalake. The readable table."""
    for files in sizes:
        make_delta_table(BUCKET / f"t{files // 1000}k", files)
    largest = max(sizes)
    checkpointed = f"c{largest // 1000}k"
    make_delta_table(BUCKET / checkpointed, largest, checkpoint=True)
    readable = BUCKET / "readable"
    make_readable(readable, rows_table)
    server = Server("run")
    tables = {f"t{n // 1000}k": f"delta:bench:t{n // 1000}k" for n in sizes}
    tables |= {checkpointed: f"delta:bench:{checkpointed}", "readable": "delta:bench:readable"}
    profile, token = server.share(tables)
    with server:
        client = server.client(token)
        for files in sizes:
            query_rows(client, f"{files:>7,} files", f"t{files // 1000}k", files, targets=files == 100_000)
        query_rows(client, f"{largest:>7,} files, checkpointed", checkpointed, largest)
        record("server peak RSS after all /query runs", f"{server.peak_rss_mb():.0f} MB")
        url = f"{profile}#bench.default.readable"
        read_ratio(
            "load_as_pandas 2M rows / 8 files",
            lambda: delta_sharing.load_as_pandas(url),
            lambda: DeltaTable(str(readable)).to_pandas(),
        )
        read_ratio(
            "load_as_pandas, delta format (kernel), 2M rows",
            lambda: delta_sharing.load_as_pandas(url, use_delta_format=True),
            lambda: DeltaTable(str(readable)).to_pandas(),
        )
        # What the server contributes to such a read: its answer to the client's /query.
        _, answer, _ = timed_query(client, "/shares/bench/schemas/default/tables/readable/query")
        record("of which the server's /query answer (8 files)", f"{answer * 1000:.1f} ms")
    return readable


async def concurrent_mix(base: str, token: str, clients: int, requests_each: int) -> tuple[list[float], int]:
    """`clients` at once, each sending `requests_each` list/metadata/query requests: latencies, errors."""
    latencies: list[float] = []
    errors = 0
    paths = [
        ("GET", "/shares"),
        ("GET", "/shares/bench/all-tables"),
        ("GET", "/shares/bench/schemas/default/tables/t1k/metadata"),
        ("POST", "/shares/bench/schemas/default/tables/t1k/query"),
    ]

    async def one(worker: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as client:
            for i in range(requests_each):
                method, path = paths[(worker + i) % len(paths)]
                start = time.perf_counter()
                response = await client.request(method, path, json={} if method == "POST" else None)
                latencies.append(time.perf_counter() - start)
                errors += response.status_code >= 400

    await asyncio.gather(*(one(w) for w in range(clients)))
    return latencies, errors


def bench_concurrency(workers: int) -> None:
    """64 clients on a list/metadata/query mix against a server of `workers` processes.

    It queries the 1,000-file table bench_server generates.
    """
    server = Server(f"run-workers-{workers}", workers=workers)
    _, token = server.share({"t1k": "delta:bench:t1k"})
    with server:
        latencies, errors = asyncio.run(concurrent_mix(server.base_url, token, clients=64, requests_each=10))
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        label = f"64 clients x 10 requests, {workers} worker{'s' if workers > 1 else ''}"
        record(f"{label}: p50 / p99", f"{p50:.0f} / {p99:.0f} ms")
        record(f"{label}: errors", f"{errors} of {len(latencies)}")


def p99_ms(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1000


# How long the server waits on a stalled reader by default; the scenario waits past it.
STREAM_SEND_TIMEOUT = 30


def bench_stalled_streams(stalled: int, files: int = 10_000) -> None:
    """`stalled` clients ask for a `files`-file /query and never read: what do they cost the server?

    Twice: with the default limits, then with the stream caps out of the way, so that
    every stalled stream is held and the second run shows what each costs by itself.
    (Code without these settings ignores them, and runs the same way twice.)
    """
    name = f"t{files // 1000}k"
    make_delta_table(BUCKET / name, files)
    make_delta_table(BUCKET / "t1k", 1000)
    uncapped = {"SHARING_LIMITS_STREAMS_PER_TOKEN": "0", "SHARING_LIMITS_STREAMS_PER_PROCESS": "0"}
    for variant, env in (("default limits", {}), ("no stream caps", uncapped)):
        label = f"{stalled:,} stalled /query of {files // 1000}k files, {variant}"
        stalled_run(label, Server("run-stalled", env=env), name, stalled)


def stalled_run(label: str, server: Server, table: str, stalled: int) -> None:
    """One run of bench_stalled_streams against `server`, its rows headed `label`.

    The stalled readers have a token of their own; other clients, with another,
    run the list/metadata/query mix of bench_concurrency: idle, while the stalled
    readers connect, and once the server has settled with them.
    """
    _, token = server.share({"t1k": "delta:bench:t1k", table: f"delta:bench:{table}"})
    attacker = server.token(server.workdir / "stalled.share")
    path = f"/shares/bench/schemas/default/tables/{table}/query"

    def others() -> tuple[float, int]:
        """The p99 of the mix, the median of three runs (this machine is shared), and its errors."""
        runs = [asyncio.run(concurrent_mix(server.base_url, token, 4, 50)) for _ in range(3)]
        p99 = statistics.median(p99_ms(latencies) for latencies, _ in runs)
        return p99, sum(errors for _, errors in runs)

    with server:
        assert server.process
        pid = server.process.pid
        timed_query(server.client(token), path)  # its snapshot is cached, as a busy server's is
        idle_p99, _ = others()
        before = server.rss_mb()
        with ThreadPoolExecutor(1) as pool:
            connecting = pool.submit(others)
            sockets = stalled_readers(server.port, f"/delta-sharing{path}", attacker, stalled)
            connecting_p99, connecting_errors = connecting.result()
        try:
            settled = settle(pid)
            held = server.rss_mb() - before
            stalled_p99, errors = others()
            errors += connecting_errors
            statuses = Counter(status_of(sock) for sock in sockets)
            time.sleep(max(STREAM_SEND_TIMEOUT + 15 - settled, 0))
            after_timeout = server.rss_mb() - before
            still_held = connections_held(server.port)
        finally:
            close_all(sockets)
        settle(pid)
        time.sleep(3)
        gone = server.rss_mb() - before
    record(f"{label}: server RSS growth", f"{held:.0f} MB", "<= 200 MB", "met" if held <= 200 else "missed")
    record(
        f"{label}: others' p99 idle / as they connect / stalled",
        f"{idle_p99:.0f} / {connecting_p99:.0f} / {stalled_p99:.0f} ms",
        "<= 2x idle",
        "met" if max(connecting_p99, stalled_p99) <= 2 * idle_p99 and not errors else "missed",
    )
    record(f"{label}: others' errors", f"{errors} of 1,200")
    answers = ", ".join(f"{count} {status}" for status, count in statuses.most_common())
    record(f"{label}: stalled readers' answers", answers)
    wait = STREAM_SEND_TIMEOUT + 15
    record(f"{label}: connections still held {wait} s on", f"{still_held} of {stalled}")
    record(f"{label}: RSS growth {wait} s on / once they left", f"{after_timeout:.0f} / {gone:.0f} MB")


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
        query_rows(server.client(token), f"{files:,}-entry log (streamed)", "million", files)
        rss = server.peak_rss_mb()
        record(
            f"server peak RSS, {files:,}-entry log",
            f"{rss:.0f} MB",
            "<= 300 MB",
            "met" if rss <= 300 else "missed",
        )


def bench_s3(readable: Path, sizes: list[int]) -> None:
    """The same tables in SeaweedFS: listings and reads over S3, URLs signed with SigV4."""
    with running_seaweed() as seaweed:
        client = seaweed.client()
        client.create_bucket(Bucket="bench")
        largest = max(sizes)
        name = f"t{largest // 1000}k"
        # Beyond 10,000 files the server does not look each file up: the log is enough.
        if largest <= MISSING_CHECK_LIMIT:
            upload_tree(client, BUCKET / name, "bench", name)
        else:
            upload_tree(client, BUCKET / name / "_delta_log", "bench", f"{name}/_delta_log")
        upload_tree(client, readable, "bench", "readable")
        storage = S3Storage(seaweed.settings())
        freshness_check(storage, client)
        server = Server("run-s3", seaweed.storage_config(path_style="true"))
        profile, token = server.share({name: f"delta:bench:{name}", "readable": "delta:bench:readable"})
        with server:
            query_rows(server.client(token), f"{largest:>7,} files on S3", name, largest)
            options = deltalake_options(storage)
            url = f"{profile}#bench.default.readable"
            read_ratio(
                "load_as_pandas 2M rows / 8 files on S3",
                lambda: delta_sharing.load_as_pandas(url),
                lambda: DeltaTable("s3://bench/readable", storage_options=options).to_pandas(),
            )
            read_ratio(
                "load_as_pandas, delta format (kernel), on S3",
                lambda: delta_sharing.load_as_pandas(url, use_delta_format=True),
                lambda: DeltaTable("s3://bench/readable", storage_options=options).to_pandas(),
            )


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


def bench_iceberg(rows_table: pa.Table, files: int) -> None:
    """Iceberg tables in the embedded SQL catalog: one of `files` data files, one of 2M rows."""
    warehouse = DATA / "buckets" / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)
    server = Server("run-iceberg")
    # Where a local-storage server without [catalogs] opens its embedded `default` catalog.
    server.state.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        "default", uri=f"sqlite:///{server.state / 'iceberg.db'}", warehouse=warehouse.as_uri()
    )
    make_iceberg_tables(catalog, warehouse, rows_table, files)
    profile, token = server.share(
        {"readable": "uniform:default:bench:readable", "many": "uniform:default:bench:many"}
    )
    with server:
        query_rows(server.client(token), f"{files:>7,} files, Iceberg", "many", files)
        read_ratio(
            "load_as_pandas 2M rows / 8 files, Iceberg",
            lambda: delta_sharing.load_as_pandas(f"{profile}#bench.default.readable"),
            lambda: catalog.load_table("bench.readable").scan().to_pandas(),
        )
