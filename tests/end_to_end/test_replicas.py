"""Two server processes on one PostgreSQL store behave as one server.

Both start together on an empty database (they take turns migrating it), then
every change made through one is seen by the other at once: no cache to wait
for, no restart.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import delta_sharing
import httpx
import pytest
from sqlalchemy import create_engine

from share_store.authentication.tokens import hash_secret
from share_store.migrate import current_revision, head_revision
from testbed.seaweed import free_port
from tests.conftest import TESTDATA_BUCKET
from tests.served import served

ADMIN_TOKEN = "dsa_replica-admin-token-0123456789abcdef"
TABLE = "delta-0.8.0-partitioned"


class Replica:
    def __init__(
        self, name: str, tmp: Path, store_url: str, root: Path, settings: dict[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"{name}.log"
        env = {
            **os.environ,
            "SHARING_STORE_URL": store_url,
            "SHARING_SERVER_SECRET_KEY": "replicas-share-this-signing-key-0123456789",
            "SHARING_SERVER_PORT": str(self.port),
            "SHARING_SERVER_PUBLIC_URL": self.url,
            "SHARING_SERVER_DATA_DIR": str(tmp / name),
            "SHARING_SERVER_AUDIT_LOG": str(tmp / f"{name}-audit.log"),
            "SHARING_STORAGE_TYPE": "local",
            "SHARING_STORAGE_ROOT": str(root),
            "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
            **(settings or {}),
        }
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sharing_server", "serve"], env=env, stdout=self._log, stderr=self._log
        )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"replica exited: {self.log_path.read_text()[-2000:]}")
            try:
                httpx.get(self.url + "/healthz", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"replica did not start: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._log.close()

    def admin(self, method: str, path: str, **kwargs) -> httpx.Response:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        response = httpx.request(method, f"{self.url}/admin/v1{path}", headers=headers, **kwargs)
        assert response.status_code < 300, response.text
        return response

    def get(self, path: str, token: str) -> httpx.Response:
        return httpx.get(f"{self.url}/delta-sharing{path}", headers={"Authorization": f"Bearer {token}"})


@contextmanager
def replicas(
    tmp: Path, store_url: str, root: Path, settings: dict[str, str] | None = None
) -> Iterator[tuple[Replica, Replica]]:
    started: list[Replica] = []
    try:
        for name in ("a", "b"):
            started.append(Replica(name, tmp, store_url, root, settings))
        for replica in started:
            replica.wait_ready()
        yield started[0], started[1]
    finally:
        for replica in started:
            replica.stop()


@pytest.fixture
def root(tmp_path: Path, testdata: Path) -> Path:
    root = tmp_path / "buckets"
    shutil.copytree(testdata / TABLE, root / TESTDATA_BUCKET / TABLE)
    return root


def test_two_replicas_on_one_postgresql_act_as_one(tmp_path: Path, postgres_url: str, root: Path) -> None:
    with replicas(tmp_path, postgres_url, root) as (a, b):
        engine = create_engine(postgres_url)
        assert current_revision(engine) == head_revision()  # migrated once, by whichever came first
        engine.dispose()

        a.admin(
            "POST", "/shares", json={"name": "shared", "tables": ["s", f"t1:delta:{TESTDATA_BUCKET}:{TABLE}"]}
        )
        issued = a.admin("POST", "/shares/shared/tokens", json={"expires": "1h"}).json()
        token = issued["token"]
        # A token made through A opens B at once.
        assert b.get("/shares", token).json()["items"][0]["name"] == "shared"
        profile = tmp_path / "b.share"
        profile.write_text(json.dumps({**issued["profile"], "endpoint": b.url + "/delta-sharing"}))
        assert len(delta_sharing.load_as_pandas(f"{profile}#shared.s.t1")) > 0
        _console_sees_the_read_on_the_other_replica(a, b, issued["id"])

        # A share edit made through B is what A lists next.
        b.admin("PATCH", "/shares/shared", json={"add": [f"s:t2:delta:{TESTDATA_BUCKET}:{TABLE}"]})
        names = [t["name"] for t in a.get("/shares/shared/all-tables", token).json()["items"]]
        assert names == ["t1", "t2"]
        # Page tokens signed by one replica are honoured by the other.
        first = a.get("/shares/shared/all-tables?maxResults=1", token).json()
        second = b.get(f"/shares/shared/all-tables?maxResults=1&pageToken={first['nextPageToken']}", token)
        assert second.json()["items"][0]["name"] == "t2"

        # Rotation through A: B accepts both tokens in the grace period; revocation through B: A refuses.
        rotated = a.admin("POST", f"/shares/shared/tokens/{issued['id']}/rotate", json={"grace": "1h"}).json()
        assert b.get("/shares", token).status_code == 200
        assert b.get("/shares", rotated["token"]).status_code == 200
        b.admin("DELETE", f"/shares/shared/tokens/{issued['id']}")
        assert a.get("/shares", token).status_code == 401

        # An OAuth client made on A gets its access token from B and reads through A.
        client = a.admin("POST", "/shares/shared/oauth-clients", json={}).json()
        access = httpx.post(
            f"{b.url}/delta-sharing/oauth/token",
            auth=(client["clientId"], client["clientSecret"]),
            data={"grant_type": "client_credentials"},
        ).json()
        assert access["expires_in"] >= 3600
        assert a.get("/shares/shared/schemas", access["access_token"]).json()["items"] == [
            {"name": "s", "share": "shared"}
        ]

        a.admin("DELETE", "/shares/shared")
        assert b.get("/shares", rotated["token"]).status_code == 401
        for replica in (a, b):
            assert "Traceback" not in replica.log_path.read_text()


def test_an_async_query_made_on_one_replica_is_polled_on_the_other(
    tmp_path: Path, postgres_url: str, root: Path
) -> None:
    """The query and its key are in the store: B answers A's query, and a retry of its submission
    on B finds it. A budget of 0 s makes every submission pending."""
    with replicas(tmp_path, postgres_url, root, {"SHARING_LIMITS_ASYNC_QUERY_BUDGET": "0"}) as (a, b):
        a.admin(
            "POST", "/shares", json={"name": "jobs", "tables": ["s", f"t:delta:{TESTDATA_BUCKET}:{TABLE}"]}
        )
        token = a.admin("POST", "/shares/jobs/tokens", json={"expires": "1h"}).json()["token"]
        headers = {"Authorization": f"Bearer {token}", "delta-sharing-capabilities": "asyncquery=true"}
        path = "/delta-sharing/shares/jobs/schemas/s/tables/t"
        body = {"idempotencyKey": "replica-key-1"}
        submitted = httpx.post(f"{a.url}{path}/query", json=body, headers=headers).json()
        query_id = submitted["queryStatus"]["queryId"]
        retried = httpx.post(f"{b.url}{path}/query", json=body, headers=headers)
        first = json.loads(retried.text.splitlines()[0])
        assert first.get("queryStatus", {"queryId": query_id})["queryId"] == query_id
        deadline = time.monotonic() + 30
        while True:
            polled = httpx.post(f"{b.url}{path}/queries/{query_id}", json={}, headers=headers)
            assert polled.status_code == 200, polled.text
            lines = [json.loads(line) for line in polled.text.splitlines()]
            if "queryStatus" not in lines[0]:
                break
            assert lines[0]["queryStatus"]["status"] == "pending" and time.monotonic() < deadline
            time.sleep(0.1)
        sync = httpx.post(f"{a.url}{path}/query", json={}, headers={"Authorization": f"Bearer {token}"})
        assert polled.headers["Delta-Table-Version"] == sync.headers["Delta-Table-Version"]
        files = sorted(line["file"]["id"] for line in lines if "file" in line)
        assert files and files == sorted(json.loads(x)["file"]["id"] for x in sync.text.splitlines()[2:])
        for replica in (a, b):
            assert "Traceback" not in replica.log_path.read_text()


def _console_sees_the_read_on_the_other_replica(a: Replica, b: Replica, token_id: str) -> None:
    """The read went through B; A's console lists it, and a session signed in on A works on B
    until it signs out there (the end is kept in the store)."""
    console = httpx.Client(base_url=a.url)
    form = console.get("/console/sign-in").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form).group(1)
    assert console.post("/console/sign-in", data={"csrf": csrf, "token": ADMIN_TOKEN}).status_code == 303
    deadline = time.monotonic() + 15
    while token_id not in (activity := console.get("/console/activity").text) and time.monotonic() < deadline:
        time.sleep(0.3)  # each replica writes its requests to the store about once a second
    assert token_id in activity and "t1" in activity
    cookie = console.cookies["console_session"]
    assert httpx.get(b.url + "/console/shares", cookies={"console_session": cookie}).status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', console.get("/console/shares").text).group(1)
    console.post("/console/sign-out", data={"csrf": csrf})
    assert httpx.get(b.url + "/console/shares", cookies={"console_session": cookie}).status_code == 303


def test_serve_with_several_workers(tmp_path: Path, root: Path) -> None:
    """`[server] workers = 2`: Hypercorn runs two processes, each building the app from the config."""
    config = tmp_path / "sharing.toml"
    port = free_port()
    config.write_text(
        f'[server]\nport = {port}\nworkers = 2\ndata_dir = "{tmp_path / "data"}"\n'
        f'[storage]\ntype = "local"\nroot = "{root}"\n'
    )
    base = ["--config", str(config)]
    from sharing_server.cli import main

    assert main([*base, "share", "create", "w", "s", f"t:delta:{TESTDATA_BUCKET}:{TABLE}"]) == 0
    assert main([*base, "token", "create", "w", "--profile", str(tmp_path / "w.share")]) == 0
    with served(config, port, tmp_path / "serve.log") as process:
        workers = [status for status in Path("/proc").glob("[0-9]*/status") if _ppid(status) == process.pid]
        assert len(workers) >= 2
        for _ in range(3):
            assert len(delta_sharing.load_as_pandas(f"{tmp_path / 'w.share'}#w.s.t")) > 0
        # Twenty connections spread over the workers; /metrics, from any of them, counts all.
        token = json.loads((tmp_path / "w.share").read_text())["bearerToken"]
        for _ in range(20):
            response = httpx.get(
                f"http://127.0.0.1:{port}/delta-sharing/shares", headers={"Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 200
        for _ in range(4):
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            listed = re.search(
                r'sharing_requests_total\{method="GET",route="list_shares",status="200"\} (\S+)', metrics
            )
            assert listed and float(listed.group(1)) == 20, metrics


def _ppid(status: Path) -> int | None:
    try:
        for line in status.read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
