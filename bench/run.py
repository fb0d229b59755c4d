"""`make bench`: figures for presigning, /query on large tables, client reads and concurrency.

Every comparison is a ratio measured side by side in the same run, since shared
machines are noisy. Prints a table and writes it to bench/RESULTS.md.
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

import boto3
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from botocore.config import Config

ROOT = Path(__file__).resolve().parent
DATA = ROOT / ".data"
sys.path.insert(0, str(ROOT.parent))

from share_store.storage.sigv4 import Credentials, S3Presigner

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


# -- tables ---------------------------------------------------------------------------------------


def make_delta_table(location: Path, files: int) -> None:
    """A Delta table whose log holds `files` adds; the data files are hard links to one file."""
    if (location / "_delta_log" / "00000000000000000000.json").exists():
        return
    shutil.rmtree(location, ignore_errors=True)
    (location / "_delta_log").mkdir(parents=True)
    sample = pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"x{i}" for i in range(100)]})
    # File systems cap hard links per inode (ext4: 65,000), so each template serves 50,000 files.
    templates = [location / f"template-{index}.parquet" for index in range(files // 50_000 + 1)]
    for template in templates:
        pq.write_table(sample, template)
    size = templates[0].stat().st_size
    schema = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "v", "type": "string", "nullable": True, "metadata": {}},
            ],
        }
    )
    with open(location / "_delta_log" / "00000000000000000000.json", "w") as log:
        log.write(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}) + "\n")
        log.write(
            json.dumps(
                {
                    "metaData": {
                        "id": "bench",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": schema,
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": 0,
                    }
                }
            )
            + "\n"
        )
        for i in range(files):
            name = f"part-{i:07d}.parquet"
            os.link(templates[i // 50_000], location / name)
            stats = json.dumps(
                {
                    "numRecords": 100,
                    "minValues": {"id": 0, "v": "x0"},
                    "maxValues": {"id": 99, "v": "x99"},
                    "nullCount": {"id": 0, "v": 0},
                }
            )
            log.write(
                json.dumps(
                    {
                        "add": {
                            "path": name,
                            "partitionValues": {},
                            "size": size,
                            "modificationTime": 0,
                            "dataChange": True,
                            "stats": stats,
                        }
                    }
                )
                + "\n"
            )
    for template in templates:
        template.unlink()


BENCH_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "v", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def make_checkpointed_log(location: Path, files: int) -> None:
    """A table as a long-lived one looks: a checkpoint of `files` adds, then one small commit.

    Only the log is written (the data files need not exist): this measures what
    the server does with a million-entry log, streaming it from the checkpoint.
    """
    log = location / "_delta_log"
    if (log / "_last_checkpoint").exists():
        return
    shutil.rmtree(location, ignore_errors=True)
    log.mkdir(parents=True)
    string_map = pa.map_(pa.string(), pa.string())
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", string_map),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("stats", pa.string()),
            ("tags", string_map),
        ]
    )
    meta_type = pa.struct(
        [
            ("id", pa.string()),
            ("format", pa.struct([("provider", pa.string()), ("options", string_map)])),
            ("schemaString", pa.string()),
            ("partitionColumns", pa.list_(pa.string())),
            ("configuration", string_map),
            ("createdTime", pa.int64()),
        ]
    )
    protocol_type = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
    protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    metadata = {
        "id": "bench-million",
        "format": {"provider": "parquet", "options": []},
        "schemaString": BENCH_SCHEMA,
        "partitionColumns": [],
        "configuration": [],
        "createdTime": 0,
    }
    path = log / "00000000000000000001.checkpoint.parquet"
    columns = {"add": add_type, "metaData": meta_type, "protocol": protocol_type}
    schema = pa.schema(list(columns.items()))
    with pq.ParquetWriter(path, schema) as writer:
        head = {"add": [None, None], "metaData": [None, metadata], "protocol": [protocol, None]}
        writer.write_table(pa.table({k: pa.array(v, columns[k]) for k, v in head.items()}, schema=schema))
        chunk = 100_000
        for first in range(0, files, chunk):
            count = min(chunk, files - first)
            adds = [
                {
                    "path": f"part-{i:07d}-c000.snappy.parquet",
                    "partitionValues": [],
                    "size": 1_000_000 + i % 1000,
                    "modificationTime": 1_700_000_000_000 + i,
                    "dataChange": False,
                    "stats": f'{{"numRecords":100,"minValues":{{"id":{i * 100},"v":"x0"}},'
                    f'"maxValues":{{"id":{i * 100 + 99},"v":"x99"}},"nullCount":{{"id":0,"v":0}}}}',
                    "tags": None,
                }
                for i in range(first, first + count)
            ]
            batch = {"add": adds, "metaData": [None] * count, "protocol": [None] * count}
            writer.write_table(
                pa.table({k: pa.array(v, columns[k]) for k, v in batch.items()}, schema=schema)
            )
    (log / "_last_checkpoint").write_text(json.dumps({"version": 1, "size": files + 2}))
    # Commits 0 and 1 were cleaned up after the checkpoint, as log retention does.
    with open(log / "00000000000000000002.json", "w") as commit:
        commit.write(
            json.dumps({"commitInfo": {"operation": "WRITE", "timestamp": 1_700_000_000_000}}) + "\n"
        )
        add = {
            "path": "part-late-c000.snappy.parquet",
            "partitionValues": {},
            "size": 1234,
            "modificationTime": 1_700_000_000_001,
            "dataChange": True,
        }
        commit.write(json.dumps({"add": add}) + "\n")
        remove = {"path": "part-0000000-c000.snappy.parquet", "deletionTimestamp": 1, "dataChange": True}
        commit.write(json.dumps({"remove": remove}) + "\n")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.config = workdir / "bench.toml"
        self.config.write_text(
            f'[server]\nhost = "127.0.0.1"\nport = {self.port}\ndata_dir = "{workdir / "state"}"\n'
            f'url_lifetime = 3600\n\n[storage]\ntype = "local"\nroot = "{DATA / "buckets"}"\n'
            # The concurrency run would otherwise measure the rate limiter; the audit log stays on.
            "\n[limits]\nper_token_rps = 0\nglobal_rps = 0\n"
        )
        self.process: subprocess.Popen | None = None

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
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("server did not start")

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


def bench_server(sizes: list[int]) -> None:
    import delta_sharing
    from deltalake import DeltaTable

    workdir = DATA / "run"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    for files in sizes:
        make_delta_table(DATA / "buckets" / "bench" / f"t{files // 1000}k", files)
    readable = DATA / "buckets" / "bench" / "readable"
    if not readable.exists():
        from deltalake import write_deltalake

        table = pa.table(
            {
                "id": pa.array(range(2_000_000), pa.int64()),
                "amount": pa.array([i * 0.5 for i in range(2_000_000)]),
                "name": pa.array([f"customer-{i % 50000}" for i in range(2_000_000)]),
            }
        )
        for part in range(8):
            write_deltalake(str(readable), table.slice(part * 250_000, 250_000), mode="append")
    server = Server(workdir)
    specs = (
        ["default"]
        + [f"t{n // 1000}k:delta:bench:t{n // 1000}k" for n in sizes]
        + ["readable:delta:bench:readable"]
    )
    server.cli("share", "create", "bench", *specs)
    profile = workdir / "bench.share"
    server.cli("token", "create", "bench", "--expires", "1d", "--profile", str(profile))
    token = json.loads(profile.read_text())["bearerToken"]
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}/delta-sharing"
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=300)
        for files in sizes:
            name = f"t{files // 1000}k"
            path = f"/shares/bench/schemas/default/tables/{name}/query"
            cold_first, cold_last, lines = timed_query(client, path)
            warm_first, warm_last, _ = timed_query(client, path)
            assert lines == files + 2, (lines, files)
            record(
                f"/query {files:>7,} files: first byte (cold / warm)",
                f"{cold_first * 1000:.0f} / {warm_first * 1000:.0f} ms",
                "<= 100 ms" if files == 100_000 else "",
                "met" if files != 100_000 or warm_first <= 0.1 else "missed",
            )
            record(
                f"/query {files:>7,} files: last byte (cold / warm)",
                f"{cold_last:.2f} / {warm_last:.2f} s",
                "<= 1.5 s" if files == 100_000 else "",
                "met" if files != 100_000 or warm_last <= 1.5 else "missed",
            )
            record(f"/query {files:>7,} files: lines per second (warm)", f"{lines / warm_last:,.0f}")
        record("server peak RSS after all /query runs", f"{server.peak_rss_mb():.0f} MB")

        url = f"{profile}#bench.default.readable"
        start = time.perf_counter()
        shared = delta_sharing.load_as_pandas(url)
        through_share = time.perf_counter() - start
        start = time.perf_counter()
        direct = DeltaTable(str(readable)).to_pandas()
        direct_time = time.perf_counter() - start
        assert len(shared) == len(direct) == 2_000_000
        ratio = through_share / direct_time
        record("load_as_pandas 2M rows / 8 files: through share", f"{through_share:.2f} s")
        record("load_as_pandas 2M rows / 8 files: deltalake direct", f"{direct_time:.2f} s")
        record(
            "load_as_pandas ratio (share / direct)",
            f"{ratio:.2f}x",
            "<= 1.2x",
            "met" if ratio <= 1.2 else "missed",
        )

        latencies, errors = asyncio.run(concurrent_mix(base, token, clients=64, requests_each=10))
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        record("64 clients x 10 requests (list/metadata/query 1k)", f"p50 {p50:.0f} ms, p99 {p99:.0f} ms")
        record("64 clients: errors", f"{errors} of {len(latencies)}")
    finally:
        server.stop()


def main() -> None:
    sizes = [int(s) for s in os.environ.get("BENCH_SIZES", "1000,10000,100000").split(",")]
    print(f"Machine: {machine()}\n")
    bench_presign()
    bench_server(sizes)
    lines = [
        "# Benchmark results",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M UTC} on: {machine()}.",
        "",
        "Local storage, Delta tables; one server process (Hypercorn, 1 worker). Ratios are measured",
        "side by side in the same run.",
        "",
        "| measure | figure | target | |",
        "|---|---|---|---|",
    ] + [f"| {name} | {figure} | {target} | {verdict} |" for name, figure, target, verdict in rows]
    (ROOT / "RESULTS.md").write_text("\n".join(lines) + "\n")
    print(f"\nwritten to {ROOT / 'RESULTS.md'}")


if __name__ == "__main__":
    main()
