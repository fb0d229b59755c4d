"""What `make bench` measures, one function per group of RESULTS.md rows.

Each scenario generates the tables it needs (bench.tables), starts the servers it
measures (bench.harness) and records its rows (bench.results); bench.run calls
them in the order the rows appear.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable
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

from bench.client_floor import kernel_read, parquet_path_read
from bench.harness import (
    DATA,
    Answer,
    Server,
    answer,
    best_of,
    close_all,
    connections_held,
    floor_server,
    limit_producer,
    limit_rows,
    query_rows,
    read_ratio,
    running_seaweed,
    settle,
    spark_ratio,
    spark_session,
    stalled_readers,
    status_of,
    timed_query,
    upload_all,
)
from bench.results import record
from bench.spark_floor import minimal_source
from bench.tables import (
    EQUALITY_FILE_ROWS,
    READABLE_ROWS,
    SparkUnavailable,
    make_checkpointed_log,
    make_delta_table,
    make_equality_data,
    make_iceberg_tables,
    make_partitioned_table,
    make_readable,
    make_readable_with_dvs,
    spark_iceberg_deletes,
)
from share_store.delta.predicates import MAX_NODES
from share_store.delta.replay import STREAM_THRESHOLD_BYTES, list_log
from share_store.delta.snapshot import FILES_CHECK_SECONDS
from share_store.storage.s3 import S3Storage
from share_store.storage.sigv4 import Credentials, S3Presigner
from testbed.deltalake_access import deltalake_options
from testbed.seaweed import upload_tree

# Where the Delta tables are generated: bucket `bench` of the local storage.
BUCKET = DATA / "buckets" / "bench"
QUERY = "/shares/bench/schemas/default/tables"
FIRST_COMMIT = f"{0:020d}.json"


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


def bench_server(sizes: list[int], rows_table: pa.Table) -> None:
    """Local storage: /query per table size, a whole-table read against deltalake."""
    for files in sizes:
        make_delta_table(BUCKET / f"t{files // 1000}k", files)
    largest = max(sizes)
    checkpointed = f"c{largest // 1000}k"
    make_delta_table(BUCKET / checkpointed, largest, checkpoint=True)
    readable = BUCKET / "readable"
    make_readable(readable, rows_table)
    # Cold rows are a table's first query with nothing built before it: warming at start off.
    server = Server("run", env={"SHARING_CACHE_WARM_ON_START": "false"})
    tables = {f"t{n // 1000}k": f"delta:bench:t{n // 1000}k" for n in sizes}
    tables |= {checkpointed: f"delta:bench:{checkpointed}", "readable": "delta:bench:readable"}
    profile, token = server.share(tables)
    with server:
        client = server.client(token)
        for files in sizes:
            query_rows(client, f"{files:>7,} files", f"t{files // 1000}k", files, targets=files == 100_000)
        query_rows(client, f"{largest:>7,} files, checkpointed", checkpointed, largest)
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


async def concurrent_mix(
    base: str, token: str | list[str], clients: int, requests_each: int
) -> tuple[list[float], int]:
    """`clients` at once, each sending `requests_each` list/metadata/query requests: latencies, errors.

    With several tokens, client n uses token n modulo their number.
    """
    tokens = [token] if isinstance(token, str) else token
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
            base_url=base, headers={"Authorization": f"Bearer {tokens[worker % len(tokens)]}"}, timeout=60
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

    It queries the 1,000-file table bench_server generates. The clients are 8 recipients
    of 8 clients each (a token each): one token's 64 clients at once would meet the
    per-token cap on streams (`streams_per_token`, 16), which is there to stop that.
    """
    make_delta_table(BUCKET / "t1k", 1000)
    server = Server(f"run-workers-{workers}", workers=workers)
    _, token = server.share({"t1k": "delta:bench:t1k"})
    tokens = [token, *(server.token() for _ in range(7))]
    with server:
        latencies, errors = asyncio.run(concurrent_mix(server.base_url, tokens, clients=64, requests_each=10))
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        label = f"64 clients (8 tokens) x 10 requests, {workers} worker{'s' if workers > 1 else ''}"
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
    attacker = server.token()
    path = f"/shares/bench/schemas/default/tables/{table}/query"

    def others(runs: int = 3) -> tuple[float, int]:
        """The p99 of the mix, the median of `runs` runs (this machine is shared), and its errors."""
        results = [asyncio.run(concurrent_mix(server.base_url, token, 4, 50)) for _ in range(runs)]
        p99 = statistics.median(p99_ms(latencies) for latencies, _ in results)
        return p99, sum(errors for _, errors in results)

    with server:
        assert server.process
        pid = server.process.pid
        timed_query(server.client(token), path)  # its snapshot is cached, as a busy server's is
        idle_p99, _ = others()
        before = server.rss_mb()
        with ThreadPoolExecutor(1) as pool:
            # One run, begun with the flood of connections: the median of three hid it, or not,
            # depending on whether a second run still met the flood.
            connecting = pool.submit(others, 1)
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
        f"{label}: others' p99 idle / while they stall",
        f"{idle_p99:.0f} / {stalled_p99:.0f} ms",
        "<= 2x idle",
        "met" if stalled_p99 <= 2 * idle_p99 and not errors else "missed",
    )
    # Not the target, which is of the stalled state: 1,000 requests in a second or two
    # from one token are a flood, answered in the order they came, the others' among them.
    record(f"{label}: others' p99 as the 1,000 connect (one run)", f"{connecting_p99:.0f} ms")
    record(f"{label}: others' errors", f"{errors} of 800")  # four runs of 200 requests
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
            query_rows(client, f"{largest:>7,} files on S3", name, largest)
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


def bench_equality_deletes(megabytes: int, keys: int = 100_000) -> None:
    """Equality deletes resolved to row positions (in this process): time per GB of data files scanned.

    `keys` deleted keys, half of them in the data, against some `megabytes` of Parquet
    data files of ten columns, on a bigint column, a string column, and both.
    """
    import io

    import numpy as np
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField, StringType

    from share_store.iceberg.equality import Deadline, EqualityDelete, EqualityIndex, EqualityResolver

    files = make_equality_data(DATA / "equality", megabytes)
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    chosen = np.random.default_rng(3).choice(2 * len(files) * EQUALITY_FILE_ROWS, keys, replace=False)
    columns = {
        1: pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        2: pa.field("name", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    }
    values = {1: pa.array(chosen), 2: pa.array([f"n-{k % 100_000}" for k in chosen])}

    def data_file(
        path: str, content: DataFileContent, rows: int, size: int, ids: list[int] | None
    ) -> DataFile:
        file = DataFile.from_args(
            content=content, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
            record_count=rows, file_size_in_bytes=size, equality_ids=ids,
        )  # fmt: skip
        file.spec_id = 0
        return file

    data = [
        data_file(str(p), DataFileContent.DATA, EQUALITY_FILE_ROWS, p.stat().st_size, None) for p in files
    ]
    for label, ids in (("a bigint column", [1]), ("a string column", [2]), ("bigint + string", [1, 2])):
        sink = io.BytesIO()
        table = pa.Table.from_arrays([values[i] for i in ids], schema=pa.schema([columns[i] for i in ids]))
        pq.write_table(table, sink)
        content = sink.getvalue()
        delete = data_file("keys.parquet", DataFileContent.EQUALITY_DELETES, keys, len(content), ids)
        resolver = EqualityResolver(
            EqualityIndex([EqualityDelete(delete, 2, is_global=True)], schema),
            {file.file_path: 1 for file in data},
            lambda _path, content=content: content,
            lambda path: open(path, "rb"),  # the resolver closes it
            Deadline(600),
        )
        wall, cpu = time.perf_counter(), time.process_time()
        deleted = sum(len(resolver.positions(file)) for file in data)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        gigabytes = resolver.resolution.bytes_scanned / 1e9
        assert deleted == resolver.resolution.rows_deleted > 0
        record(
            f"equality deletes, {keys:,} keys on {label}: per GB scanned",
            f"{wall / gigabytes:.2f} s ({cpu / gigabytes:.2f} s CPU)",
        )
    rows = len(data) * EQUALITY_FILE_ROWS
    record("of which data scanned", f"{gigabytes:.2f} GB, {rows / 1e6:.1f}M rows")


# -- predicate hints ----------------------------------------------------------------------------

HINT_PARTITIONS = 100
HINT_MAX_NODES = MAX_NODES  # the widest hints below stay within the default node cap


def _leaf(op: str, column: str, value: int) -> dict[str, Any]:
    return {
        "op": op,
        "children": [
            {"op": "column", "name": column, "valueType": "int"},
            {"op": "literal", "value": str(value), "valueType": "int"},
        ],
    }


def _any(children: list[dict[str, Any]]) -> dict[str, Any]:
    return {"op": "or", "children": children}


def hint_shapes(files: int, max_nodes: int) -> list[tuple[str, dict[str, Any]]]:
    """Hints of growing cost on `make_partitioned_table`'s table, the widest just within `max_nodes`.

    An OR of comparisons has 1 + 3 nodes per child; of ranges (an AND of two), 1 + 7.
    """
    wide = (max_nodes - 1) // 3
    ranges = (max_nodes - 1) // 7

    def on_ids(count: int) -> list[int]:
        # One id in each of `count` files spread over the table (file i holds ids i*100..i*100+99).
        step = max(files // count, 1)
        return [(k * step % files) * 100 + 50 for k in range(count)]

    def range_of(value: int) -> dict[str, Any]:
        return {
            "op": "and",
            "children": [_leaf("greaterThanOrEqual", "id", value), _leaf("lessThanOrEqual", "id", value + 9)],
        }

    return [
        ("60-way OR, partition column", _any([_leaf("equal", "p", k) for k in range(60)])),
        ("60-way OR, stats column", _any([_leaf("equal", "id", i) for i in on_ids(60)])),
        (f"{wide:,}-way OR, partition column", _any([_leaf("equal", "p", k + 50) for k in range(wide)])),
        (f"{wide:,}-way OR, stats column", _any([_leaf("equal", "id", i) for i in on_ids(wide)])),
        (f"{ranges:,}-way OR of id ranges", _any([range_of(i) for i in on_ids(ranges)])),
    ]


def query_cpu(server: Server, client: httpx.Client, path: str, body: dict[str, Any]) -> tuple[float, int]:
    """Server CPU seconds per request (the mean of up to 10, fewer once they take seconds) and lines."""
    spent = 0.0
    count = 0
    lines = 0
    while count < 10 and (spent < 2.0 or count == 0):
        before = server.cpu_seconds()
        with client.stream("POST", path, json=body) as response:
            response.raise_for_status()
            lines = sum(chunk.count(b"\n") for chunk in response.iter_bytes())
        spent += server.cpu_seconds() - before
        count += 1
    return spent / count, lines


def bench_hints(files: int) -> None:
    """Server CPU per /query with wide predicate hints, against a plain /query of the same table."""
    name = f"p{files // 1000}k"
    make_partitioned_table(BUCKET / name, files, HINT_PARTITIONS)
    server = Server("run-hints")
    _, token = server.share({name: f"delta:bench:{name}"})
    path = f"/shares/bench/schemas/default/tables/{name}/query"
    with server:
        client = server.client(token)
        query_cpu(server, client, path, {})  # the snapshot is cached from here on
        plain, lines = query_cpu(server, client, path, {})
        assert lines == files + 2, (lines, files)
        record(f"/query {files:,} partitioned files: server CPU, plain", f"{plain * 1000:.0f} ms")
        for label, tree in hint_shapes(files, HINT_MAX_NODES):
            cpu, lines = query_cpu(server, client, path, {"jsonPredicateHints": json.dumps(tree)})
            ratio = cpu / plain
            record(
                f"  with a {label} ({lines - 2:,} files)",
                f"{cpu * 1000:,.0f} ms, {ratio:.1f}x",
                "<= 2x plain",
                "met" if ratio <= 2 else "missed",
            )
        # One comparison more than the node cap allows: refused before any table work.
        width = HINT_MAX_NODES // 3 + 1
        over = {"jsonPredicateHints": json.dumps(_any([_leaf("equal", "id", i) for i in range(width)]))}
        before = server.cpu_seconds()
        refused = [client.post(path, json=over).status_code for _ in range(10)]
        assert refused == [400] * 10, refused
        cpu = (server.cpu_seconds() - before) / 10
        record(
            f"  with a {width:,}-way OR, over the node cap (400)", f"{cpu * 1000:,.0f} ms, {cpu / plain:.1f}x"
        )


# The delta response format with what Iceberg deletes need; without it, the parquet format.
DELTA_FORMAT = {
    "delta-sharing-capabilities": "responseformat=delta;readerfeatures=deletionvectors,columnmapping"
}
DELETE_KINDS = {"pos_v2": ("v2", "position deletes"), "dv_v3": ("v3", "deletion vectors")}
CACHE_BUCKET = "bench-cache"
CACHE_PREFIX = ".delta-sharing-cache"


def bench_iceberg_deletes(files: int) -> None:
    """Spark-written Iceberg tables of `files` data files, a tenth of them with row-level deletes.

    Against each table's snapshot before its DELETE (no deletes): /query in the delta
    format, cold (planning reads manifests and delete files and builds the vectors)
    and warm; cold again after a restart, the vectors read from the index; with every
    vector a DV file in the cache; and in the parquet format, cold materializing a copy
    of each file with deletes. Each setting starts with an empty cache.
    """
    try:
        base = spark_iceberg_deletes(files)
    except SparkUnavailable as error:
        record(f"/query {files:,} files, Iceberg with deletes", f"skipped: {error}")
        return
    summary = json.loads((base / "summary.json").read_text())
    tables: dict[str, dict[str, Any]] = summary["tables"]
    cache = base / "buckets" / CACHE_BUCKET / CACHE_PREFIX
    server, token = deletes_server(base, tables)
    with server:
        baseline = {name: cold_warm(server.client(token), name, files, {"version": 0}) for name in tables}
    server, token = deletes_server(base, tables)
    with server:
        deleted = {name: cold_warm(server.client(token), name, files) for name in tables}
    with server:  # a second process over the same state and cache: its index is there
        restarted = {name: cold_warm(server.client(token), name, files) for name in tables}
    server, token = deletes_server(base, tables, {"inline_dv_bytes": "0"})
    with server:
        filed = {name: cold_warm(server.client(token), name, files) for name in tables}
    dv_files = count_files(cache / "dv")
    server, token = deletes_server(base, tables, {"deletes_in_parquet": "materialize"})
    with server:
        parquet = {name: cold_warm(server.client(token), name, files, headers={}) for name in tables}
    copies = count_files(cache / "data")
    shutil.rmtree(base / "buckets" / CACHE_BUCKET, ignore_errors=True)

    seconds = summary["seconds"]
    record(
        f"Spark writing the 2 Iceberg tables of {files:,} files with deletes (once, then cached)",
        f"{sum(seconds.values()):.0f} s",
    )
    entries = {name: int(table["delete_entries"]) for name, table in tables.items()}
    assert dv_files == sum(entries.values()) and copies == dv_files, (dv_files, copies, entries)
    for name, (version, kind) in DELETE_KINDS.items():
        # None before the DELETE; inline by default (each a few dozen bytes); DV files with 0.
        assert all(vectors(a) == {} for a in baseline[name]), name
        assert all(vectors(a) == {"i": entries[name]} for a in deleted[name] + restarted[name]), name
        assert all(vectors(a) == {"p": entries[name]} for a in filed[name]), name
        label = f"{files:>7,} files, Iceberg {version}"
        with_deletes = f"{label}, {entries[name]:,} with {kind}"
        cold_warm_rows(f"{label}, no deletes (before the DELETE)", baseline[name])
        cold_warm_rows(with_deletes, deleted[name], baseline[name])
        cold_warm_rows(f"{with_deletes}, restarted (index)", restarted[name], baseline[name])
        cold_warm_rows(f"{with_deletes}, all DV files", filed[name], baseline[name])
        cold_warm_rows(f"{with_deletes}, parquet, materialized", parquet[name], baseline[name])


def deletes_server(
    base: Path, tables: dict[str, dict[str, Any]], iceberg: dict[str, str] | None = None
) -> tuple[Server, str]:
    """A server of the Spark-written tables, registered in its embedded catalog; its cache emptied."""
    shutil.rmtree(base / "buckets" / CACHE_BUCKET, ignore_errors=True)
    server = Server(
        "run-iceberg-deletes",
        {"type": "local", "root": str(base / "buckets")},
        iceberg={"cache_bucket": CACHE_BUCKET, **(iceberg or {})},
    )
    # Where a local-storage server without [catalogs] opens its embedded `default` catalog.
    server.state.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("default", uri=f"sqlite:///{server.state / 'iceberg.db'}")
    catalog.create_namespace("bench")
    for name, table in tables.items():
        catalog.register_table(("bench", name), table["metadata"])
    _, token = server.share({name: f"uniform:default:bench:{name}" for name in tables})
    return server, token


def cold_warm(
    client: httpx.Client,
    name: str,
    files: int,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] = DELTA_FORMAT,
) -> list[Answer]:
    """The first /query of a table on this server (cold), then the fastest of the next three (warm).

    The best of three, as this shared machine's load comes and goes within a second.
    """
    path = f"/shares/bench/schemas/default/tables/{name}/query"
    answers = [answer(client, path, body, headers) for _ in range(4)]
    assert all(a.lines == files + 2 for a in answers), [a.lines for a in answers]
    return [answers[0], min(answers[1:], key=lambda a: a.last)]


def vectors(found: Answer) -> dict[str, int]:
    """How many files of a delta-format answer have a deletion vector, by storage type."""
    counts: dict[str, int] = {}
    for line in found.body.splitlines():
        add = json.loads(line).get("file", {}).get("deltaSingleAction", {}).get("add") or {}
        if add.get("deletionVector"):
            kind = add["deletionVector"]["storageType"]
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def count_files(directory: Path) -> int:
    return sum(1 for path in directory.rglob("*") if path.is_file())


def cold_warm_rows(label: str, answers: list[Answer], baseline: list[Answer] | None = None) -> None:
    """First and last byte, cold and warm; against `baseline`, the last byte's ratios in brackets."""
    cold, warm = answers
    record(
        f"/query {label}: first byte (cold / warm)", f"{cold.first * 1000:.0f} / {warm.first * 1000:.0f} ms"
    )
    last = f"{cold.last:.2f} / {warm.last:.2f} s"
    if baseline:
        last += f" ({cold.last / baseline[0].last:.1f}x / {warm.last / baseline[1].last:.1f}x)"
    record(f"/query {label}: last byte (cold / warm)", last)


def bench_spark(rows_table: pa.Table) -> None:
    """Spark reads through the pure-PySpark `deltaSharing` source against `spark.read.parquet`.

    The 2M-row, 8-file table, then the same files with deletion vectors dropping
    a tenth of the rows. Each read is a `noop` write of every column, so Spark
    decodes every row; the direct read is of the very files the share serves.
    """
    readable = BUCKET / "readable"
    make_readable(readable, rows_table)
    with_dvs = BUCKET / "readable_dv"
    make_readable_with_dvs(with_dvs, readable)
    files = [uri.removeprefix("file://") for uri in DeltaTable(str(readable)).file_uris()]
    server = Server("run-spark")
    profile, _ = server.share({"readable": "delta:bench:readable", "readable_dv": "delta:bench:readable_dv"})
    with server, spark_session() as spark:
        assert server.process is not None
        # The JVM (its Python workers below it) and the sharing server.
        processes = [spark.sparkContext._gateway.proc.pid, server.process.pid]
        direct = spark.read.parquet(*files)
        plain = spark.read.format("deltaSharing").load(f"{profile}#bench.default.readable")
        assert plain.count() == READABLE_ROWS
        spark_ratio(
            "Spark deltaSharing source, 2M rows / 8 files, vs spark.read.parquet",
            plain,
            direct,
            1.3,
            processes,
        )
        # The floor: a Python source that only reads the same local files with pyarrow.
        spark.dataSource.register(minimal_source(files))
        parts = str(spark.sparkContext.defaultParallelism)  # as many tasks as the source makes
        minimal = spark.read.format("minimalParquet").option("parts", parts).load()
        spark_ratio(
            "Spark minimal pyarrow Python source (the floor), 2M rows / 8 files, vs spark.read.parquet",
            minimal,
            direct,
            1.3,
            processes,
        )
        deleted = spark.read.format("deltaSharing").load(f"{profile}#bench.default.readable_dv")
        assert deleted.count() == READABLE_ROWS - READABLE_ROWS // 10
        label = "Spark deltaSharing source, 10% deleted by DVs"
        # Issue 14's target for DVs is against the plain table's read, below; this row is for scale.
        spark_ratio(f"{label}, vs spark.read.parquet", deleted, direct, None, processes)
        spark_ratio(f"{label}, vs the plain table through it", deleted, plain, 1.5, processes)
