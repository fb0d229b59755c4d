"""Start a throwaway PostgreSQL cluster on loopback for the test session.

`initdb` writes a fresh cluster into a temp dir and `pg_ctl` starts it on a free
port of 127.0.0.1 only, with its unix socket inside that dir and durability off
for speed. PostgreSQL refuses to run as root, so under root (as in CI) every
server command runs as the Debian package's `postgres` user through `runuser`.

Besides `stop()`, a watchdog process holds a pipe from this process: if the test
session dies without stopping the cluster (SIGKILL, a crash), the pipe closes and
the watchdog stops the server and removes the temp dir.

Run `python -m tests.postgres` to start a cluster, print its timing and stop it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from testbed.seaweed import free_port

SUPERUSER = "postgres"
ROOT = Path(__file__).resolve().parents[1]
# Speed over durability: the cluster lives for one test session.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "32MB",
    "log_min_messages": "warning",
}
# With listen_addresses above, nothing but loopback can reach the host line.
PG_HBA = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"


def pg_bin_dir() -> Path:
    """Debian's newest /usr/lib/postgresql/<version>/bin, else wherever `initdb` is on PATH."""

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parent.parent.name))

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=version)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if not initdb:
        raise RuntimeError("PostgreSQL 'initdb' not found: run `make postgres` (apt-get install postgresql)")
    return Path(initdb).resolve().parent


def _as_server_user(args: list[str]) -> list[str]:
    # initdb, pg_ctl and postgres exit with "cannot be run as root".
    if os.geteuid() == 0:
        return ["runuser", "-u", SUPERUSER, "--", *args]
    return args


def _env() -> dict[str, str]:
    # A locale that always exists, so initdb and the server never trip over the caller's.
    return {**os.environ, "LC_ALL": "C", "LANG": "C"}


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    # pg_ctl start detaches the postmaster into its own session (setsid), away from Ctrl-C.
    return subprocess.run(
        _as_server_user(args),
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # The postmaster's parent is init, which in a container may never reap it: a zombie is gone.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def shutdown(bin_dir: Path, workdir: Path) -> None:
    """Stop the cluster in `workdir` (fast, then immediate, then SIGKILL) and delete it."""
    data = workdir / "data"
    pid = _postmaster_pid(data)
    if pid is not None and _alive(pid):
        for mode in ("fast", "immediate"):
            with contextlib.suppress(subprocess.TimeoutExpired):
                _run(
                    [str(bin_dir / "pg_ctl"), "stop", "-D", str(data), "-m", mode, "-w", "-t", "10"],
                    workdir,
                    15,
                )
            if not _alive(pid):
                break
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
    shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class Postgres:
    """A running throwaway cluster; `url(db)` is a SQLAlchemy URL for the psycopg 3 driver."""

    bin_dir: Path
    workdir: Path
    port: int
    password: str
    watchdog: subprocess.Popen[bytes] | None = None
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def socket_dir(self) -> Path:
        return self.workdir / "socket"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=SUPERUSER,
            password=self.password,
            dbname=database,
            autocommit=True,
            connect_timeout=5,
        )

    def create_database(self, name: str) -> str:
        """Create an empty database `name` and return its URL."""
        with self.connect() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def dump(self, database: str) -> str:
        """`pg_dump` of `database`: schema and data as SQL text."""
        result = _run(
            [
                str(self.bin_dir / "pg_dump"),
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                SUPERUSER,
                database,
            ],
            self.workdir,
            60,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pg_dump {database} failed: {result.stderr}")
        return result.stdout

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"(no server log: {exc})"

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            shutdown(self.bin_dir, self.workdir)
        finally:
            if self.watchdog is not None:
                # EOF tells the watchdog we are done; it finds nothing left to stop.
                with contextlib.suppress(OSError):
                    self.watchdog.stdin.close()  # type: ignore[union-attr]
                try:
                    self.watchdog.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.watchdog.kill()
                    self.watchdog.wait()


def _start_watchdog(bin_dir: Path, workdir: Path) -> subprocess.Popen[bytes]:
    # Its own session, so a Ctrl-C of the test run reaches pytest's teardown, not the watchdog.
    return subprocess.Popen(
        [sys.executable, "-m", "tests.postgres", "--watchdog", str(bin_dir), str(workdir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        start_new_session=True,
    )


def _init_cluster(server: Postgres) -> None:
    workdir = server.workdir
    pwfile = workdir / "pwfile"
    pwfile.write_text(server.password + "\n")
    server.socket_dir.mkdir()
    if os.geteuid() == 0:
        for path in (workdir, pwfile, server.socket_dir):
            shutil.chown(path, SUPERUSER, SUPERUSER)
    result = _run(
        [
            str(server.bin_dir / "initdb"),
            "-D",
            str(server.data_dir),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ],
        workdir,
        120,
    )
    pwfile.unlink()
    if result.returncode != 0:
        raise RuntimeError(f"initdb failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    (server.data_dir / "pg_hba.conf").write_text(PG_HBA)
    settings = {**SETTINGS, "unix_socket_directories": str(server.socket_dir)}
    with (server.data_dir / "postgresql.conf").open("a") as conf:
        conf.write("\n# tests/postgres.py\n")
        conf.writelines(f"{name} = '{value}'\n" for name, value in settings.items())


def _start_server(server: Postgres, timeout: float) -> None:
    """pg_ctl start on `server.port`, then wait until a TCP login succeeds."""
    deadline = time.monotonic() + timeout
    result = _run(
        [
            str(server.bin_dir / "pg_ctl"),
            "start",
            "-D",
            str(server.data_dir),
            "-l",
            str(server.log_path),
            "-o",
            f"-p {server.port}",
            "-w",
            "-t",
            str(max(1, int(timeout))),
        ],
        server.workdir,
        timeout + 10,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"PostgreSQL did not come up on 127.0.0.1:{server.port} (waited up to {timeout:.0f}s; "
            f"pg_ctl: {result.stdout.strip()} {result.stderr.strip()}); server log tail:\n{server.log_tail()}"
        )
    while True:
        try:
            with server.connect() as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL on 127.0.0.1:{server.port} refuses logins after {timeout:.0f}s ({exc}); "
                    f"server log tail:\n{server.log_tail()}"
                ) from None
            time.sleep(0.1)


def start_postgres(timeout: float = 30.0, attempts: int = 3) -> Postgres:
    """initdb + pg_ctl start; raises with the server log tail if it is not up within `timeout`."""
    started = time.monotonic()
    bin_dir = pg_bin_dir()
    # Not under pytest's tmp dir: its parents are private to root, the server user must reach it.
    workdir = Path(tempfile.mkdtemp(prefix="sharing-pg-"))
    server = Postgres(bin_dir, workdir, free_port(), secrets.token_hex(16))
    server.watchdog = _start_watchdog(bin_dir, workdir)
    try:
        _init_cluster(server)
        for attempt in range(1, attempts + 1):
            try:
                _start_server(server, timeout)
                break
            except RuntimeError:
                # Someone took the free port between picking and binding: try another one.
                if attempt == attempts or "already in use" not in server.log_tail():
                    raise
                server.port = free_port()
    except BaseException:
        server.stop()
        raise
    server.startup_seconds = time.monotonic() - started
    return server


def _watchdog(bin_dir: str, workdir: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stdin.buffer.read()  # returns at EOF: stop() was called or the test process died
    shutdown(Path(bin_dir), Path(workdir))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--watchdog"]:
        _watchdog(sys.argv[2], sys.argv[3])
    else:
        pg = start_postgres()
        try:
            print(f"PostgreSQL up in {pg.startup_seconds:.2f}s at {pg.url()} ({pg.bin_dir})")
        finally:
            pg.stop()
