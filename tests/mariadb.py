"""Start a throwaway MariaDB server on loopback for the test session (Debian's `mariadb-server`).

A keeper process (`python -m tests.mariadb --serve WORKDIR PORT`) writes a fresh data dir
with `mariadb-install-db` (root logs in without a password), runs `mariadbd` on a free
port of 127.0.0.1 only, its socket in the same temp dir, and waits on its stdin: at EOF
(`stop()`, or the test process dying) it stops the server and deletes the dir. Under root
(as in CI) the server runs as root (`--user=root`), which needs no other account.

Run `python -m tests.mariadb` to start one, print its timing and stop it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from testbed.seaweed import free_port

ROOT = Path(__file__).resolve().parents[1]
# Speed over durability: the server lives for one test session.
SERVER_OPTIONS = (
    "--bind-address=127.0.0.1",
    "--skip-name-resolve",
    "--innodb-buffer-pool-size=32M",
    "--innodb-flush-log-at-trx-commit=0",
    "--skip-log-bin",
)


def binary(*names: str) -> str:
    """The first of `names` on PATH or in /usr/sbin, else a hint to `make mariadb`."""
    for name in names:
        found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
        if found:
            return found
    raise RuntimeError(f"MariaDB {names[0]!r} not found: run `make mariadb` (apt-get install mariadb-server)")


def _as_root_flag() -> list[str]:
    # mariadbd refuses to run as root unless told to; any other user runs it as itself.
    return ["--user=root"] if os.geteuid() == 0 else []


@dataclass
class MariaDB:
    """A running throwaway server; `url(db)` is a SQLAlchemy URL for PyMySQL."""

    workdir: Path
    port: int
    keeper: subprocess.Popen[bytes]
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    def url(self, database: str) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{database}"

    def connect(self) -> pymysql.connections.Connection:
        return pymysql.connect(
            host="127.0.0.1", port=self.port, user="root", autocommit=True, connect_timeout=5
        )

    def create_database(self, name: str) -> str:
        """Create an empty database `name` (a plain identifier) and return its URL."""
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{name}`")
        return self.url(name)

    def drop_database(self, name: str) -> None:
        with self.connect() as conn, conn.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return (self.workdir / "server.log").read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"(no server log: {exc})"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with contextlib.suppress(OSError):
            self.keeper.stdin.close()  # type: ignore[union-attr]
        try:
            self.keeper.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.keeper.kill()
            self.keeper.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_mariadb(timeout: float = 60.0) -> MariaDB:
    """Start the keeper and wait until root logs in over TCP; raise with the server log tail if not."""
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="sharing-maria-"))
    port = free_port()
    keeper = subprocess.Popen(
        [sys.executable, "-m", "tests.mariadb", "--serve", str(workdir), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        start_new_session=True,  # a Ctrl-C of the test run reaches pytest's teardown, not the keeper
    )
    server = MariaDB(workdir, port, keeper)
    deadline = started + timeout
    while True:
        try:
            with server.connect() as conn, conn.cursor() as cursor:
                cursor.execute("SELECT 1")
            break
        except pymysql.err.OperationalError as exc:
            if keeper.poll() is not None or time.monotonic() > deadline:
                tail = server.log_tail()
                server.stop()
                raise RuntimeError(f"MariaDB not up on 127.0.0.1:{port} ({exc}); log tail:\n{tail}") from None
            time.sleep(0.1)
    server.startup_seconds = time.monotonic() - started
    return server


def _serve(workdir: Path, port: int) -> None:
    """The keeper: install, run until stdin closes, stop the server and delete `workdir`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    data = workdir / "data"
    with (workdir / "server.log").open("ab") as log:
        installed = subprocess.run(
            [
                binary("mariadb-install-db", "mysql_install_db"),
                "--no-defaults",
                f"--datadir={data}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                *_as_root_flag(),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
        if installed.returncode != 0:
            sys.exit(1)  # the parent reads the log tail, then deletes the dir
        server = subprocess.Popen(
            [
                binary("mariadbd", "mysqld"),
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={workdir / 'mariadb.sock'}",
                f"--pid-file={workdir / 'mariadb.pid'}",
                f"--port={port}",
                *SERVER_OPTIONS,
                *_as_root_flag(),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            sys.stdin.buffer.read()  # returns at EOF: stop() was called or the test process died
        finally:
            server.terminate()  # SIGTERM: a normal shutdown
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        _serve(Path(sys.argv[2]), int(sys.argv[3]))
    else:
        maria = start_mariadb()
        try:
            print(f"MariaDB up in {maria.startup_seconds:.2f}s at {maria.url('mysql')}")
        finally:
            maria.stop()
