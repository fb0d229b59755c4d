"""`make run`'s demo: seeded once, readable by the client, idempotent."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import delta_sharing
import httpx

from testbed.seaweed import free_port


def test_demo_is_idempotent_and_readable(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "SHARING_SERVER_DATA_DIR": str(tmp_path / ".sharing"),
        "SHARING_SERVER_PORT": str(port),
        "PATH": "/usr/bin:/bin",
    }
    first = subprocess.run(
        [sys.executable, "-m", "sharing_server", "demo"], env=env, capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    profile = tmp_path / ".sharing" / "demo.share"
    secret = json.loads(profile.read_text())["bearerToken"]
    second = subprocess.run(
        [sys.executable, "-m", "sharing_server", "demo"], env=env, capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(profile.read_text())["bearerToken"] == secret  # same token, nothing duplicated
    assert "load_as_pandas" in second.stdout

    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "sharing_server", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        for _ in range(200):
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        # The lines `make run` prints work verbatim in a plain shell (no virtualenv on PATH).
        printed = [line.strip() for line in second.stdout.splitlines() if " -c " in line]
        assert len(printed) == 3  # two delta_sharing reads, one pyiceberg read through the catalog
        for line in printed:
            ran = subprocess.run(
                ["bash", "-c", line],
                env={"PATH": "/usr/bin:/bin"},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert ran.returncode == 0, ran.stderr[-2000:]
            assert "rows x" in ran.stdout or len(ran.stdout.splitlines()) > 3
        client = delta_sharing.SharingClient(str(profile))
        assert sorted(t.name for t in client.list_all_tables()) == ["customers", "orders"]
        customers = delta_sharing.load_as_pandas(f"{profile}#demo.sales.customers")
        assert len(customers) == 20 and set(customers["nation"]) == {"FRANCE", "JAPAN", "BRAZIL"}
        assert len(delta_sharing.load_as_pandas(f"{profile}#demo.sales.customers", version=0)) == 10
        url = f"{profile}#demo.sales.orders"
        latest = delta_sharing.load_as_pandas(url)
        assert len(latest) == 38 and set(latest["region"]) == {"amer", "emea", "apac"}
        assert (latest[latest["order_id"] < 5]["status"] == "shipped").all()
        assert len(delta_sharing.load_as_pandas(url, version=0)) == 20
        version = httpx.get(
            f"http://127.0.0.1:{port}/delta-sharing/shares/demo/schemas/sales/tables/orders/version",
            headers={"Authorization": f"Bearer {secret}"},
        )
        assert version.headers["delta-table-version"] == "3"
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
    out = (tmp_path / "server.log").read_text()
    # The audit log is on (stdout by default), one JSON line per request...
    audit = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(r["method"] == "GET" and r["path"].startswith("/delta-sharing/files/demo/") for r in audit)
    assert any(r.get("route") == "table_version" and r.get("share") == "demo" for r in audit)
    assert secret not in out and "X-Amz-Signature" not in out  # ...and holds no secret


def test_serve_demo_prints_the_console_and_a_token_that_signs_in(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "SHARING_SERVER_DATA_DIR": str(tmp_path / ".sharing"),
        "SHARING_SERVER_PORT": str(port),
        "SHARING_SERVER_AUDIT_LOG": "off",
        "PATH": "/usr/bin:/bin",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "sharing_server", "serve", "--demo"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        console = next(line for line in server.stdout if line.startswith("Console:"))
        url, token = re.fullmatch(
            r"Console: (\S+) \(sign in with the demo admin token: (\S+)\)\n", console
        ).groups()
        assert url == f"http://127.0.0.1:{port}/console/"
        assert (tmp_path / ".sharing" / "demo-admin.token").read_text().strip() == token
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(200):
                try:
                    form = client.get("/console/sign-in")
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
            signed_in = client.post("/console/sign-in", data={"csrf": csrf, "token": token})
            assert signed_in.status_code == 303
            assert "demo" in client.get("/console/shares").text
    finally:
        server.terminate()
        server.wait(timeout=30)
