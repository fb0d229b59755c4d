"""Start moto's AWS mock server on loopback for the test session: a Glue Data Catalog to share from.

The server runs in a child process (`python -m tests.glue_server PORT`) that serves
moto's `ThreadedMotoServer` on 127.0.0.1 until its stdin closes: `stop()` closes it,
and so does the test process dying, so the server never outlives the session.

Run `python -m tests.glue_server` to start one, print its timing and stop it.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from testbed.seaweed import free_port

ROOT = Path(__file__).resolve().parents[1]
REGION = "us-east-1"
#: moto takes any keys; these only have to look like keys to botocore.
ACCESS_KEY = "AKIAMOTOTESTACCESS00"
SECRET_KEY = "moto-test-secret-key-0123456789abcdefghij"


@dataclass
class GlueServer:
    """A running moto server; `endpoint` is its URL for `glue.endpoint`."""

    port: int
    process: subprocess.Popen[bytes]
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def catalog_properties(self, with_keys: bool = True) -> dict[str, str]:
        """pyiceberg's `glue.*` properties for this server (keys left out: the AWS provider chain's)."""
        props = {"type": "glue", "glue.endpoint": self.endpoint, "glue.region": REGION}
        if with_keys:
            props |= {"glue.access-key-id": ACCESS_KEY, "glue.secret-access-key": SECRET_KEY}
        return props

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # type: ignore[union-attr]
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def start_glue(timeout: float = 60.0) -> GlueServer:
    """Start moto on a free loopback port; raise if it does not listen within `timeout`."""
    started = time.monotonic()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.glue_server", "--serve", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        start_new_session=True,
    )
    server = GlueServer(port, process)
    deadline = started + timeout
    while not _listening(port):
        if process.poll() is not None:
            error = process.stderr.read().decode(errors="replace")[-3000:]  # type: ignore[union-attr]
            raise RuntimeError(f"moto server exited early:\n{error}")
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"moto server not listening on 127.0.0.1:{port} after {timeout:.0f}s")
        time.sleep(0.1)
    server.startup_seconds = time.monotonic() - started
    return server


def _serve(port: int) -> None:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        sys.stdin.buffer.read()  # returns at EOF: stop() was called or the test process died
    finally:
        server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        _serve(int(sys.argv[2]))
    else:
        glue = start_glue()
        try:
            print(f"moto up in {glue.startup_seconds:.2f}s at {glue.endpoint}")
        finally:
            glue.stop()
