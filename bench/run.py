"""`make bench`: figures for presigning, /query on large tables, client reads and concurrency.

Every comparison is a ratio measured side by side in the same run, since shared
machines are noisy. Prints a table and writes it to bench/RESULTS.md. Run as
`python -m bench.run` from the project root, which puts `share_store` on sys.path.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import httpx
import pyarrow as pa
from botocore.config import Config
from deltalake import DeltaTable

from bench.tables import (
    make_checkpointed_log,
    make_delta_table,
    make_iceberg_tables,
    make_readable,
    readable_rows,
)
from share_store.delta.replay import STREAM_THRESHOLD_BYTES
from share_store.storage.s3 import MISSING_CHECK_LIMIT
from share_store.storage.sigv4 import Credentials, S3Presigner

ROOT = Path(__file__).resolve().parent
DATA = ROOT / ".data"

rows: list[tuple[str, str, str, str]] = []


def record(name: str, figure: str, target: str = "", verdict: str = "") -> None:
    rows.append((name, figure, target, verdict))
    print(f"{name:<58} {figure:>22}  {target:<18} {verdict}", flush=True)


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}, {platform.system()}"


# -- presigning -----------------------------------------------------------------------------


def bench_presign() -> None:
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


LOCAL_STORAGE = f'[storage]\ntype = "local"\nroot = "{DATA / "buckets"}"\n'


class Server:
    """A `sharing-server serve` process of its own, so its peak RSS is its own too."""

    def __init__(self, workdir: Path, storage: str = LOCAL_STORAGE, workers: int = 1) -> None:
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "bench.toml"
        self.config.write_text(
            f'[server]\nhost = "127.0.0.1"\nport = {self.port}\ndata_dir = "{workdir / "state"}"\n'
            f"url_lifetime = 3600\nworkers = {workers}\n\n{storage}"
            # The concurrency run would otherwise measure the rate limiter; the audit log stays on.
            "\n[limits]\nper_token_rps = 0\nglobal_rps = 0\n"
        )
        self.process: subprocess.Popen | None = None

    def share(self, tables: dict[str, str]) -> tuple[Path, str]:
        """Share `{name: spec}` as share `bench`, schema `default`; the profile and its token."""
        specs = ["default"] + [f"{name}:{spec}" for name, spec in tables.items()]
        self.cli("share", "create", "bench", *specs)
        profile = self.config.parent / "bench.share"
        self.cli("token", "create", "bench", "--expires", "1d", "--profile", str(profile))
        return profile, json.loads(profile.read_text())["bearerToken"]

    def client(self, token: str) -> httpx.Client:
        base = f"http://127.0.0.1:{self.port}/delta-sharing"
        return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=600)

    def cli(self, *args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "sharing_server", "--config", str(self.config), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sharing_server", "--config", str(self.config), "serve"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise RuntimeError("server did not start")
        # It answers at once and preloads heavy modules in the background; cold figures
        # are the first query to a server that has settled, as a deployed one has.
        time.sleep(3)

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=30)


def timed_query(client: httpx.Client, path: str) -> tuple[float, float, int]:
    start = time.perf_counter()
    first = None
    lines = 0
    with client.stream("POST", path, json={}) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if first is None:
                first = time.perf_counter() - start
            lines += chunk.count(b"\n")
    return first or 0.0, time.perf_counter() - start, lines


async def concurrent_mix(base: str, token: str, clients: int, requests_each: int) -> tuple[list[float], int]:
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


def concurrency(workers: int, sizes: list[int]) -> None:
    """64 clients on a list/metadata/query mix against a server of `workers` processes."""
    workdir = DATA / f"run-workers-{workers}"
    shutil.rmtree(workdir, ignore_errors=True)
    server = Server(workdir, workers=workers)
    _, token = server.share({"t1k": "delta:bench:t1k"})
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}/delta-sharing"
        latencies, errors = asyncio.run(concurrent_mix(base, token, clients=64, requests_each=10))
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        label = f"64 clients x 10 requests, {workers} worker{'s' if workers > 1 else ''}"
        record(f"{label}: p50 / p99", f"{p50:.0f} / {p99:.0f} ms")
        record(f"{label}: errors", f"{errors} of {len(latencies)}")
    finally:
        server.stop()


def bench_server(sizes: list[int], rows_table: pa.Table) -> Path:
    """Local storage: /query per table size, a whole-table read against deltalake. The readable table."""
    import delta_sharing

    for files in sizes:
        make_delta_table(DATA / "buckets" / "bench" / f"t{files // 1000}k", files)
    largest = max(sizes)
    checkpointed = f"c{largest // 1000}k"
    make_delta_table(DATA / "buckets" / "bench" / checkpointed, largest, checkpoint=True)
    readable = DATA / "buckets" / "bench" / "readable"
    make_readable(readable, rows_table)
    workdir = DATA / "run"
    shutil.rmtree(workdir, ignore_errors=True)
    server = Server(workdir)
    tables = {f"t{n // 1000}k": f"delta:bench:t{n // 1000}k" for n in sizes}
    tables |= {checkpointed: f"delta:bench:{checkpointed}", "readable": "delta:bench:readable"}
    profile, token = server.share(tables)
    server.start()
    try:
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
    finally:
        server.stop()
    return readable


def query_rows(client: httpx.Client, label: str, name: str, files: int, targets: bool = False) -> None:
    """Cold and warm /query of one table: first byte, last byte, lines per second."""
    path = f"/shares/bench/schemas/default/tables/{name}/query"
    cold_first, cold_last, lines = timed_query(client, path)
    warm_first, warm_last, _ = timed_query(client, path)
    assert lines == files + 2, (lines, files)
    record(
        f"/query {label}: first byte (cold / warm)",
        f"{cold_first * 1000:.0f} / {warm_first * 1000:.0f} ms",
        "<= 100 ms, warm" if targets else "",
        ("met" if warm_first <= 0.1 else "missed") if targets else "",
    )
    record(
        f"/query {label}: last byte (cold / warm)",
        f"{cold_last:.2f} / {warm_last:.2f} s",
        "<= 1.5 s, warm" if targets else "",
        ("met" if warm_last <= 1.5 else "missed") if targets else "",
    )
    record(f"/query {label}: lines per second (warm)", f"{lines / warm_last:,.0f}")


def read_ratio(label: str, shared: Any, direct: Any) -> None:
    """Time `load_as_pandas` through the share against a direct read, side by side."""
    start = time.perf_counter()
    through = shared()
    through_time = time.perf_counter() - start
    start = time.perf_counter()
    expected = direct()
    direct_time = time.perf_counter() - start
    assert len(through) == len(expected), (len(through), len(expected))
    ratio = through_time / direct_time
    record(f"{label}: through share / direct", f"{through_time:.2f} / {direct_time:.2f} s")
    record(f"{label}: ratio", f"{ratio:.2f}x", "<= 1.2x", "met" if ratio <= 1.2 else "missed")


def bench_million(files: int) -> None:
    """A log of a million entries, streamed from its checkpoint by a fresh server process."""
    name = f"log{files}"
    make_checkpointed_log(DATA / "buckets" / "bench" / name, files)
    checkpoint = DATA / "buckets" / "bench" / name / "_delta_log" / "00000000000000000001.checkpoint.parquet"
    if checkpoint.stat().st_size <= STREAM_THRESHOLD_BYTES:
        # Its data files do not exist, so only a streamed snapshot (which does not
        # look them up) can serve it; a held one answers that files are missing.
        print(f"skipped the {files:,}-entry log: its checkpoint is too small to be streamed")
        return
    workdir = DATA / "run-million"
    shutil.rmtree(workdir, ignore_errors=True)
    server = Server(workdir)
    _, token = server.share({"million": f"delta:bench:{name}"})
    server.start()
    try:
        query_rows(server.client(token), f"{files:,}-entry log (streamed)", "million", files)
        rss = server.peak_rss_mb()
        record(
            f"server peak RSS, {files:,}-entry log",
            f"{rss:.0f} MB",
            "<= 300 MB",
            "met" if rss <= 300 else "missed",
        )
    finally:
        server.stop()


def bench_s3(readable: Path, sizes: list[int]) -> None:
    """The same tables in SeaweedFS: listings and reads over S3, URLs signed with SigV4."""
    import delta_sharing

    from tests.seaweed import start_seaweed

    shutil.rmtree(DATA / "seaweed", ignore_errors=True)
    seaweed = start_seaweed(DATA / "seaweed")
    try:
        client = seaweed.client()
        client.create_bucket(Bucket="bench")
        largest = max(sizes)
        name = f"t{largest // 1000}k"
        # Beyond 10,000 files the server does not look each file up: the log is enough.
        table_dir = DATA / "buckets" / "bench" / name
        uploads = (
            table_dir.rglob("*") if largest <= MISSING_CHECK_LIMIT else (table_dir / "_delta_log").iterdir()
        )
        for item in uploads:
            if item.is_file():
                client.upload_file(str(item), "bench", f"{name}/{item.relative_to(table_dir).as_posix()}")
        for item in readable.rglob("*"):
            if item.is_file():
                client.upload_file(str(item), "bench", f"readable/{item.relative_to(readable).as_posix()}")
        freshness_check(seaweed, client)
        storage = (
            f'[storage]\ntype = "s3"\nendpoint = "{seaweed.endpoint}"\nregion = "{seaweed.region}"\n'
            f'access_key = "{seaweed.access_key}"\nsecret_key = "{seaweed.secret_key}"\npath_style = true\n'
        )
        workdir = DATA / "run-s3"
        shutil.rmtree(workdir, ignore_errors=True)
        server = Server(workdir, storage)
        profile, token = server.share({name: f"delta:bench:{name}", "readable": "delta:bench:readable"})
        server.start()
        try:
            query_rows(server.client(token), f"{largest:>7,} files on S3", name, largest)
            options = {
                "AWS_ENDPOINT_URL": seaweed.endpoint,
                "AWS_REGION": seaweed.region,
                "AWS_ACCESS_KEY_ID": seaweed.access_key,
                "AWS_SECRET_ACCESS_KEY": seaweed.secret_key,
                "AWS_ALLOW_HTTP": "true",
            }
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
        finally:
            server.stop()
    finally:
        seaweed.stop()


def freshness_check(seaweed: Any, client: Any, commits: int = 3000) -> None:
    """What each query pays to learn a table's latest version, on a log of `commits` files on S3."""
    from concurrent.futures import ThreadPoolExecutor

    from share_store.delta.replay import list_log
    from share_store.storage.s3 import S3Storage

    def put(version: int) -> None:
        client.put_object(Bucket="bench", Key=f"longlog/_delta_log/{version:020d}.json", Body=b"{}\n")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(commits)))
    storage = S3Storage(seaweed.settings())
    prefix = "longlog/_delta_log/"

    def best(action: Any) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            action()
            times.append(time.perf_counter() - start)
        return min(times)

    full = best(lambda: list_log(storage, "bench", prefix))
    tail = best(lambda: list_log(storage, "bench", prefix, after=commits - 1))
    record(f"latest-version check, {commits:,}-commit log on S3: full listing", f"{full * 1000:.0f} ms")
    record(f"latest-version check, {commits:,}-commit log on S3: tail listing", f"{tail * 1000:.1f} ms")


def bench_iceberg(rows_table: pa.Table, files: int) -> None:
    """Iceberg tables in the embedded SQL catalog: one of `files` data files, one of 2M rows."""
    import delta_sharing
    from pyiceberg.catalog.sql import SqlCatalog

    workdir = DATA / "run-iceberg"
    shutil.rmtree(workdir, ignore_errors=True)
    warehouse = DATA / "buckets" / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)
    server = Server(workdir)
    (workdir / "state").mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        "default", uri=f"sqlite:///{workdir / 'state' / 'iceberg.db'}", warehouse=warehouse.as_uri()
    )
    make_iceberg_tables(catalog, warehouse, rows_table, files)
    profile, token = server.share(
        {"readable": "uniform:default:bench:readable", "many": "uniform:default:bench:many"}
    )
    server.start()
    try:
        query_rows(server.client(token), f"{files:>7,} files, Iceberg", "many", files)
        read_ratio(
            "load_as_pandas 2M rows / 8 files, Iceberg",
            lambda: delta_sharing.load_as_pandas(f"{profile}#bench.default.readable"),
            lambda: catalog.load_table("bench.readable").scan().to_pandas(),
        )
    finally:
        server.stop()


def main() -> None:
    sizes = [int(s) for s in os.environ.get("BENCH_SIZES", "1000,10000,100000").split(",")]
    million = int(os.environ.get("BENCH_LOG_ENTRIES", "1000000"))
    iceberg_files = int(os.environ.get("BENCH_ICEBERG_FILES", "10000"))
    print(f"Machine: {machine()}\n")
    bench_presign()
    rows_table = readable_rows()
    readable = bench_server(sizes, rows_table)
    for workers in (1, 2):
        concurrency(workers, sizes)
    bench_million(million)
    bench_s3(readable, sizes)
    bench_iceberg(rows_table, iceberg_files)
    lines = [
        "# Benchmark results",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M UTC} on: {machine()}.",
        "",
        "One server process per group of rows (Hypercorn, 1 worker unless said), the client on the",
        "same machine; local storage unless the row says S3 (SeaweedFS on loopback) or Iceberg (the",
        "embedded SQL catalog). Cold is a table's first request (the server started and settled,",
        "with no snapshot of it cached), warm the next; ratios are measured side by side in the same",
        "run. Figures vary by a third between runs on this shared machine (compare boto3's presign).",
        "",
        "| measure | figure | target | |",
        "|---|---|---|---|",
    ] + [f"| {name} | {figure} | {target} | {verdict} |" for name, figure, target, verdict in rows]
    (ROOT / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print(f"\nwritten to {ROOT / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
