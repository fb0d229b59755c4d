"""`[server] workers = 2`: connections opened together are spread over both workers.

Hypercorn handed every worker the same listening socket, and asyncio accepts a
backlog's worth at each wake: 64 connections opened at once went 46/18 or
60/4, and clients that keep their connections kept that split. Each worker now
listens on a socket of its own (SO_REUSEPORT; `sharing_server.serving`).
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from pathlib import Path

import pytest

from testbed.seaweed import free_port
from tests.served import served

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")


def test_connections_spread_over_workers(tmp_path: Path) -> None:
    config = tmp_path / "sharing.toml"
    port = free_port()
    config.write_text(
        f'[server]\nhost = "127.0.0.1"\nport = {port}\nworkers = 2\ndata_dir = "{tmp_path / "data"}"\n'
        f'[storage]\ntype = "local"\nroot = "{tmp_path / "buckets"}"\n'
    )
    clients: list[socket.socket] = []
    with served(config, port, tmp_path / "serve.log") as process:
        try:
            deadline = time.monotonic() + 60
            # Each worker answers once it listens: the first may well answer alone for a while.
            while len(listening := _sockets(_children(process.pid), port, "0A")) < 2:
                assert time.monotonic() < deadline, listening
                time.sleep(0.2)
            workers = list(listening)
            for _ in range(64):
                client = socket.create_connection(("127.0.0.1", port))
                client.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
                clients.append(client)
            for client in clients:
                assert client.recv(1024).startswith(b"HTTP/1.1 200")
            held = _sockets(workers, port, "01")
            assert sum(held.values()) == 64 and min(held[pid] for pid in workers) >= 8, held
        finally:
            for client in clients:
                client.close()


def _children(pid: int) -> list[int]:
    """The worker processes `pid` spawned (not multiprocessing's resource tracker)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            command = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields["PPid"]) == pid and b"spawn_main" in command:
            found.append(int(status.parent.name))
    return found


def _sockets(pids: list[int], port: int, state: str) -> Counter[int]:
    """How many TCP sockets on local `port` in `state` ("0A" listening, "01" established) each of
    `pids` holds, by their inodes."""
    owner = {}
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = fd.readlink().name
            except OSError:
                continue
            if target.startswith("socket:["):
                owner[target[8:-1]] = pid
    held: Counter[int] = Counter()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] == state and fields[9] in owner:
            held[owner[fields[9]]] += 1
    return held
