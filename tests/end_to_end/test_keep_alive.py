"""Keep-alive that does not race a pooled client: the server keeps an idle connection longer than
the pools in front of it (`[limits] keep_alive_timeout`, 75 s by default), and a client idling
past a shorter one loses no request, for the server's close reaches it between requests.

Run as a provider runs it: `sharing-server serve` with a configuration file.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests

from testbed.seaweed import free_port


def serve(tmp_path: Path, config: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    path = tmp_path / "sharing.toml"
    path.write_text(
        f'[server]\nhost = "127.0.0.1"\nport = {port}\ndata_dir = "{tmp_path / "data"}"\n{config}'
    )
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "sharing_server", "--config", str(path), "serve"],
        env={"PATH": "/usr/bin:/bin"}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    for _ in range(150):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process, port
        except httpx.HTTPError:
            time.sleep(0.1)
    process.terminate()
    raise AssertionError("the server did not start: " + (tmp_path / "serve.log").read_text())


@pytest.fixture
def short(tmp_path: Path) -> Iterator[int]:
    process, port = serve(tmp_path, "[limits]\nkeep_alive_timeout = 1\n")
    yield port
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def default(tmp_path: Path) -> Iterator[int]:
    process, port = serve(tmp_path, "")
    yield port
    process.terminate()
    process.wait(timeout=10)


def idle_connection_closed_after(port: int, wait: float) -> bool:
    """Whether a connection that had one request is closed by the server within `wait` seconds idle."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += conn.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        conn.settimeout(wait)
        try:
            while True:
                chunk = conn.recv(4096)
                if not chunk:
                    return True  # the server's FIN
        except TimeoutError:
            return False


def test_an_idle_connection_outlives_a_load_balancers_pool_by_default(default: int) -> None:
    # Hypercorn's own default closed it after 5 s, well within any pool's idle time.
    assert not idle_connection_closed_after(default, 6.5)


def test_a_pooled_client_idling_past_the_servers_timeout_loses_no_request(short: int) -> None:
    assert idle_connection_closed_after(short, 3.0)  # the configured timeout is what closes it
    session = requests.Session()  # as pyiceberg and delta-sharing pool their connections
    base = f"http://127.0.0.1:{short}"
    for round_ in range(3):
        assert session.get(f"{base}/healthz", timeout=5).status_code == 200
        time.sleep(1.6)  # idle past the server's timeout: it closes the pooled connection
        # A POST is not retried by the client: it must go out on a live connection.
        answer = session.post(
            f"{base}/delta-sharing/shares/none/schemas/s/tables/t/query", json={}, timeout=5
        )
        assert answer.status_code == 401, (round_, answer.text)
