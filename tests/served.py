"""`sharing-server serve` in a process of its own, for the tests of what only a real serve shows
(several workers, their sockets): started from a config file, ready once `/healthz` answers,
stopped after."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


@contextmanager
def served(config: Path, port: int, log: Path, timeout: float = 60) -> Iterator[subprocess.Popen[bytes]]:
    """`serve` with `config` (which names `port`), its output in `log`; the process once it answers."""
    with log.open("wb") as output:
        command = [sys.executable, "-m", "sharing_server", "--config", str(config), "serve"]
        process = subprocess.Popen(command, stdout=output, stderr=output)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).raise_for_status()
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline and process.poll() is None, log.read_text()
                    time.sleep(0.2)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
