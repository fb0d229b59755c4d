"""Sharing servers and SeaweedFS for the benchmarks, and the timings taken against them.

Each sharing server is a `sharing-server serve` process of its own rather than the
tests' in-process LiveServer, so that its peak RSS is its own and it can run several
Hypercorn workers. Free ports and SeaweedFS come from the tests' helpers.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sized
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.results import record
from testbed.seaweed import SeaweedS3, free_port, start_seaweed

# Generated tables, server state and SeaweedFS data; kept between runs (and out of git)
# so that a second run need not generate the large tables again.
DATA = Path(__file__).resolve().parent / ".data"


def local_storage() -> dict[str, str]:
    """`[storage]` settings for local storage over the buckets the tables are generated in."""
    return {"type": "local", "root": str(DATA / "buckets")}


def storage_section(settings: Mapping[str, str]) -> str:
    return section("storage", settings)


def section(name: str, settings: Mapping[str, str]) -> str:
    # Strings throughout, as SeaweedS3.storage_config() gives them: the server reads
    # booleans and numbers from strings too, since environment overrides are strings.
    return f"[{name}]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())


class Server:
    """A `sharing-server serve` process, its config and state in bench/.data/`name` (cleared first).

    Share tables with `share()` before starting it; `with server:` starts it and stops it,
    and may do so again: a restarted server keeps its state.
    """

    def __init__(
        self,
        name: str,
        storage: Mapping[str, str] | None = None,
        workers: int = 1,
        limits: Mapping[str, float] | None = None,
        iceberg: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.workdir = DATA / name
        self.state = self.workdir / "state"
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        self.config = self.workdir / "bench.toml"
        # Unless asked for, no rate limits: the concurrency run would otherwise measure
        # the rate limiter. The audit log stays on.
        limits = limits if limits is not None else {"per_token_rps": 0, "global_rps": 0}
        self.config.write_text(
            f'[server]\nhost = "127.0.0.1"\nport = {self.port}\ndata_dir = "{self.state}"\n'
            f"url_lifetime = 3600\nworkers = {workers}\n\n{storage_section(storage or local_storage())}"
            "\n[limits]\n"
            + "".join(f"{key} = {value}\n" for key, value in limits.items())
            + ("\n" + section("iceberg", iceberg) if iceberg else "")
        )
        # Settings given as SHARING_* variables: a server that does not know one ignores it,
        # so the same scenario runs against older code for a before-and-after comparison.
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/delta-sharing"

    def share(self, tables: dict[str, str]) -> tuple[Path, str]:
        """Share `{name: spec}` as share `bench`, schema `default`; the profile and its token."""
        specs = ["default"] + [f"{name}:{spec}" for name, spec in tables.items()]
        self.cli("share", "create", "bench", *specs)
        profile = self.workdir / "bench.share"
        self.cli("token", "create", "bench", "--expires", "1d", "--profile", str(profile))
        return profile, json.loads(profile.read_text())["bearerToken"]

    def token(self) -> str:
        """Another bearer token of share `bench` (made by `share()`)."""
        out = self.cli("token", "create", "bench", "--expires", "1d")
        return next(line.split()[-1] for line in out.splitlines() if line.startswith("Token:"))

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=600)

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
            env=self.env,
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

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far, user and system, all threads."""
        assert self.process, "the server is not running"
        # Fields 14 and 15 of /proc/PID/stat, after the parenthesised command name.
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        return self._status_mb("VmHWM")

    def rss_mb(self) -> float:
        """The server's resident memory now."""
        return self._status_mb("VmRSS")

    def _status_mb(self, field: str) -> float:
        assert self.process, "the server is not running"
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process:
            self.process.terminate()
            self.process.wait(timeout=30)

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def running_seaweed() -> Iterator[SeaweedS3]:
    """A SeaweedFS S3 server on loopback, its data in bench/.data/seaweed (cleared first)."""
    shutil.rmtree(DATA / "seaweed", ignore_errors=True)
    seaweed = start_seaweed(DATA / "seaweed")
    try:
        yield seaweed
    finally:
        seaweed.stop()


def stalled_readers(port: int, path: str, token: str, count: int) -> list[socket.socket]:
    """`count` connections that each POST a /query to `path` and then never read the answer.

    A small receive buffer, set before connecting, keeps the advertised window small,
    so the server's sends block once its own socket buffer is full. Opened a batch
    at a time: Hypercorn's listen backlog is 100.
    """
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    ).encode()
    sockets = []
    try:
        for index in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", port))
            sock.sendall(request)
            if index % 50 == 49:
                time.sleep(0.05)
    except BaseException:
        close_all(sockets)
        raise
    return sockets


def close_all(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        sock.close()


def status_of(sock: socket.socket, timeout: float = 5.0) -> str:
    """The status code a stalled reader's response starts with, or how its connection ended."""
    sock.settimeout(timeout)
    try:
        head = sock.recv(64)
    except TimeoutError:
        return "nothing"
    except ConnectionError:
        return "reset"
    return head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/1.1 ") else "closed"


def connections_held(port: int) -> int:
    """Established TCP connections whose local end is `port`: the server's ends (Linux)."""
    ours = f":{port:04X}"
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, _, state = line.split()[1:4]
            count += local.endswith(ours) and state == "01"
    return count


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pid: int, limit: float = 300.0) -> float:
    """Wait until a process stays nearly idle for two seconds; the seconds it took."""
    start = time.perf_counter()
    used = cpu_seconds(pid)
    while time.perf_counter() - start < limit:
        time.sleep(2)
        now = cpu_seconds(pid)
        if now - used < 0.1:
            break
        used = now
    return time.perf_counter() - start


def timed_query(client: httpx.Client, path: str) -> tuple[float, float, int]:
    """One POST to a /query path: seconds to first and last byte, lines received."""
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


@dataclass(frozen=True)
class Answer:
    """One /query answer: seconds to its first and last byte, and its body."""

    first: float
    last: float
    body: bytes

    @property
    def lines(self) -> int:
        return self.body.count(b"\n")


def answer(
    client: httpx.Client,
    path: str,
    body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """One POST to a /query path, kept whole (for answers of thousands of lines, not millions)."""
    start = time.perf_counter()
    first = None
    chunks = []
    with client.stream("POST", path, json=dict(body or {}), headers=dict(headers or {})) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if first is None:
                first = time.perf_counter() - start
            chunks.append(chunk)
    return Answer(first or 0.0, time.perf_counter() - start, b"".join(chunks))


def query_rows(client: httpx.Client, label: str, name: str, files: int, targets: bool = False) -> float:
    """Cold and warm /query of one table: first byte, last byte, lines per second; the warm last byte."""
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
    return warm_last


#: Interleaved runs of each side of a `read_ratio`.
READ_RUNS = 5


def read_ratio(
    label: str,
    shared: Callable[[], Sized],
    direct: Callable[[], Sized],
    target: float | None = None,
    runs: int = READ_RUNS,
    sides: str = "through share / direct",
) -> None:
    """Time `load_as_pandas` through the share against a direct read, side by side.

    One untimed read of each first (imports, the server's snapshot, the page cache),
    then `runs` of each, interleaved; the ratio is of the medians. A single pair
    of reads swung from 1.5x to 2.4x between runs on this 2-core machine.
    """
    assert len(shared()) == len(direct())
    through_times, direct_times = [], []
    for _ in range(runs):
        for action, times in ((shared, through_times), (direct, direct_times)):
            start = time.perf_counter()
            action()
            times.append(time.perf_counter() - start)
    through_time, direct_time = statistics.median(through_times), statistics.median(direct_times)
    ratio = through_time / direct_time
    timing = f"{through_time:.2f} / {direct_time:.2f} s"
    record(f"{label}: {sides} (medians of {runs})", timing)
    ratio_row(f"{label}: ratio", ratio, target)


def ratio_row(name: str, ratio: float, target: float | None) -> None:
    """A ratio's row, judged against `target` where an issue sets one."""
    if target is None:
        record(name, f"{ratio:.2f}x")
    else:
        record(name, f"{ratio:.2f}x", f"<= {target}x", "met" if ratio <= target else "missed")


def best_of(action: Callable[[], object], times: int = 5) -> float:
    """The fastest of `times` runs of `action`, in seconds: the least disturbed by other load."""
    durations = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        durations.append(time.perf_counter() - start)
    return min(durations)


@contextmanager
def spark_session() -> Iterator[Any]:
    """A local Spark session on every core, its Python workers this interpreter (which has the source)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[*]")
        .appName("sharing-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU seconds spent so far by `roots` and every process below them (Linux /proc).

    On a shared machine, wall time swings with other load; the CPU a read costs
    (the JVM, its Python workers, the sharing server) hardly does.
    """
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        # utime, stime, and cutime, cstime: workers that have exited count too.
        times[pid] = sum(int(value) for value in fields[11:15]) / tick
    wanted = set(roots)
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in wanted} - wanted
        grew = bool(below)
        wanted |= below
    return sum(times.get(pid, 0.0) for pid in wanted)


def spark_ratio(
    label: str, shared: Any, direct: Any, target: float | None, processes: list[int], runs: int = 7
) -> None:
    """Read two DataFrames whole (a `noop` write), alternately, `runs` times: the best of each.

    Wall time is the target's measure; the CPU seconds of `processes` and their
    children (the JVM with its Python workers, the sharing server) are steadier.
    """
    figures: dict[str, tuple[list[float], list[float]]] = {"shared": ([], []), "direct": ([], [])}
    for _ in range(runs):
        for name, frame in (("shared", shared), ("direct", direct)):
            cpu = tree_cpu_seconds(processes)
            start = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            figures[name][0].append(time.perf_counter() - start)
            figures[name][1].append(tree_cpu_seconds(processes) - cpu)
    (wall, cpu), (direct_wall, direct_cpu) = figures["shared"], figures["direct"]
    ratio = min(wall) / min(direct_wall)
    cpu_ratio = min(cpu) / min(direct_cpu)
    record(f"{label}: through share / direct", f"{min(wall):.2f} / {min(direct_wall):.2f} s")
    ratio_row(f"{label}: ratio", ratio, target)
    record(f"{label}: CPU through share / direct", f"{min(cpu):.2f} / {min(direct_cpu):.2f} s")
    record(f"{label}: CPU ratio", f"{cpu_ratio:.2f}x")


@contextmanager
def bench_process(args: list[str], ready: Callable[[], object], name: str) -> Iterator[None]:
    """`python -m *args` for the length of the block, from once `ready()` raises no HTTP error."""
    process = subprocess.Popen(
        [sys.executable, "-m", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(200):
            try:
                ready()
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"{name} did not start")
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def limit_producer(log: Path, kind: str, endpoint: str = "") -> Iterator[httpx.Client]:
    """bench.limit serving the table whose one commit is `log`; a client of it.

    `kind` is `local` (HMAC-signed URLs) or `s3` (SigV4 for `endpoint`).
    """
    port = free_port()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:

        def ready() -> object:
            return client.post("/", json={}).raise_for_status()

        args = ["bench.limit", str(log), str(port), kind, endpoint]
        with bench_process(args, ready, "the minimal producer"):
            yield client


@contextmanager
def floor_server(root: Path) -> Iterator[str]:
    """bench.client_floor's bare file server over `root`; its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    any_file = next(root.glob("*.parquet")).name

    def ready() -> object:
        return httpx.head(f"{base}/{any_file}").raise_for_status()

    with bench_process(["bench.client_floor", str(root), str(port)], ready, "the floor's file server"):
        yield base


def limit_rows(label: str, ours: httpx.Client, path: str, limit: httpx.Client, runs: int = 5) -> None:
    """Warm /query of `path` against the minimal producer's same answer, interleaved: medians, ratio."""
    timed_query(ours, path)  # warm: the snapshot is cached
    ours_times, limit_times = [], []
    for _ in range(runs):
        ours_times.append(timed_query(ours, path)[1])
        limit_times.append(timed_query(limit, "/")[1])
    mine, best = statistics.median(ours_times), statistics.median(limit_times)
    ratio = mine / best
    record(f"{label}: warm last byte, ours / minimal producer", f"{mine:.2f} / {best:.2f} s")
    ratio_row(f"{label}: warm /query over the limit (medians of {runs}, interleaved)", ratio, 1.2)


def upload_all(client: Any, source: Path, bucket: str, prefix: str) -> None:
    """Every file under `source` to `bucket` under `prefix`, 16 at a time: 100,000 take a minute or two."""
    paths = [path for path in source.rglob("*") if path.is_file()]

    def put(path: Path) -> None:
        client.put_object(
            Bucket=bucket, Key=f"{prefix}/{path.relative_to(source).as_posix()}", Body=path.read_bytes()
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, paths))
