"""The processes the benchmarks start and stop: sharing servers, SeaweedFS, bench.limit, a file server.

Each sharing server is a `sharing-server serve` process of its own rather than the
tests' in-process LiveServer, so that its peak RSS is its own and it can run several
Hypercorn workers. Free ports and SeaweedFS come from the tests' helpers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.paths import DATA
from testbed.seaweed import SeaweedS3, free_port, start_seaweed


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


def upload_all(
    client: Any, source: Path, bucket: str, prefix: str, paths: Iterable[Path] | None = None
) -> None:
    """Every file under `source` (or only `paths`, files under it) to `bucket` under `prefix`, 16 at a
    time: 100,000 take a minute or two."""
    files = [path for path in source.rglob("*") if path.is_file()] if paths is None else list(paths)

    def put(path: Path) -> None:
        client.put_object(
            Bucket=bucket, Key=f"{prefix}/{path.relative_to(source).as_posix()}", Body=path.read_bytes()
        )

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))
