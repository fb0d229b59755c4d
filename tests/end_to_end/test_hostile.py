"""Hostile recipients, and a hostile disk, replayed against live servers and the real CLI.

Each test replays one finding of the review "Hostile recipients cannot hurt the
server" (its item number in the test's name), so that a regression of any of
them fails here: 500s while delta-rs commits (3), header tricks around the
per-token rate limit (4), tracebacks in the server log (5), bodies that gave
500s (6), files deleted after a first query (7), tracebacks from `serve` and
the CLI on an unwritable or full disk (10), names with a trailing newline (11)
and snapshot caches that grew with every table queried (12).

A full disk is real where the machine allows it: a 1 MB tmpfs mounted in a
mount namespace of its own (`unshare --user --map-root-user --mount`, no
privileges needed where user namespaces are enabled). Everywhere, a file size
limit (RLIMIT_FSIZE) in the CLI's process stands in for it.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from share_store.authentication.tokens import hash_secret
from testbed.seaweed import free_port
from tests.conftest import TESTDATA_BUCKET, Deployment, audit_records, deploy

ADMIN_TOKEN = "dsa_hostile-admin-token-abcdefghijklmnopqrstuvwxyz"
TABLE = "delta-0.8.0-partitioned"  # 6 data files, one version
# Room for two snapshots of TABLE's copies (6 files each), not three.
SNAPSHOT_FILES = 15
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
CORRUPT_SCHEMA = [
    {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
    {
        "metaData": {
            "id": "corrupt",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": "{",  # not JSON: reading it raises inside the server
            "partitionColumns": [],
            "configuration": {},
        }
    },
]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("hostile")
    bucket = tmp / "buckets" / TESTDATA_BUCKET
    tables = {"t": TABLE, "gone": "gone", **{f"p{i}": f"p{i}" for i in range(4)}}
    shutil.copytree(testdata / TABLE, bucket / TABLE)
    for name in ["gone", *(f"p{i}" for i in range(4))]:
        shutil.copytree(testdata / TABLE, bucket / name)
    log = bucket / "corrupt" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in CORRUPT_SCHEMA))
    write_deltalake(str(bucket / "live"), ROWS)
    deployment = deploy(
        tmp,
        {"type": "local", "root": str(tmp / "buckets")},
        env={
            "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
            "SHARING_LIMITS_PER_TOKEN_RPS": "0",
            "SHARING_LIMITS_GLOBAL_RPS": "0",
            "SHARING_CACHE_FILES_CHECK_SECONDS": "0",
            "SHARING_CACHE_SNAPSHOT_FILES": str(SNAPSHOT_FILES),
            # No refresh rounds: one landing amid test 12's queries (a loaded CI run) re-put a table
            # it refreshed, and the cache's order of use was no longer the recipients' alone.
            "SHARING_CACHE_REFRESH_SECONDS": "0",
        },
    )
    deployment.share_tables("s", {**tables, "corrupt": "corrupt", "live": "live"}, schema="x")
    yield deployment
    deployment.server.stop()
    deployment.store.close()


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("hostile-limited")
    deployment = deploy(
        tmp,
        {"type": "local", "root": str(tmp / "buckets")},
        env={"SHARING_LIMITS_PER_TOKEN_RPS": "5", "SHARING_LIMITS_GLOBAL_RPS": "0"},
    )
    deployment.store.create_share("limited")
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def table_url(server: Deployment, table: str, what: str = "query") -> str:
    return f"{server.endpoint}/shares/s/schemas/x/tables/{table}/{what}"


def bearer(server: Deployment) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token('s')}"}


def data_lines(response: httpx.Response) -> list[dict]:
    return [line for line in map(json.loads, response.text.splitlines()) if "file" in line]


# -- 3: a delta-rs writer committing while recipients query -------------------------------


def test_3_queries_while_delta_rs_commits_get_one_whole_version_each(hostile: Deployment) -> None:
    location = hostile.storage.root / TESTDATA_BUCKET / "live"  # type: ignore[attr-defined]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            while not stop.is_set():
                write_deltalake(str(location), ROWS, mode="append")  # one file per commit
        except BaseException as error:  # surfaced below
            errors.append(error)

    thread = threading.Thread(target=writer, daemon=True)
    statuses: Counter[int] = Counter()
    torn: list[tuple[int, int]] = []
    versions: set[int] = set()
    thread.start()
    try:
        with httpx.Client(headers=bearer(hostile), timeout=30) as client:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                query = client.post(table_url(hostile, "live"), json={})
                statuses[query.status_code] += 1
                if query.status_code == 200:
                    version = int(query.headers["delta-table-version"])
                    versions.add(version)
                    if len(data_lines(query)) != version + 1:  # version N holds N + 1 appends
                        torn.append((version, len(data_lines(query))))
                for what in ("version", "metadata"):
                    statuses[client.get(table_url(hostile, "live", what)).status_code] += 1
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors
    assert set(statuses) == {200}, statuses
    assert not torn
    assert len(versions) > 1  # the writer did commit while the queries ran


# -- 4: one token, one bucket, however the header is spelled ------------------------------


@pytest.mark.parametrize("order", ["junk-last", "junk-first", "twice"])
def test_4_several_authorization_headers_are_refused(limited: Deployment, order: str) -> None:
    token = f"Bearer {limited.token('limited')}"
    headers = {
        "junk-last": [("Authorization", token), ("Authorization", "junk")],
        "junk-first": [("Authorization", "junk"), ("Authorization", token)],
        "twice": [("Authorization", token), ("Authorization", token)],
    }[order]
    response = httpx.get(limited.endpoint + "/shares", headers=headers)
    assert response.status_code == 400
    assert response.json()["errorCode"] == "MALFORMED_REQUEST"
    assert "one Authorization header" in response.json()["message"]


def test_4_no_spelling_of_a_token_gets_past_its_limit(limited: Deployment) -> None:
    secret = limited.token("limited")
    spellings = [f"Bearer {secret}", f"bearer  {secret}", f"BEARER   {secret}", f"Bearer     {secret}"]
    admitted = 0
    with httpx.Client() as client:
        start = time.monotonic()
        for i in range(60):
            response = client.get(limited.endpoint + "/shares", headers={"Authorization": spellings[i % 4]})
            assert response.status_code in (200, 429), response.text
            admitted += response.status_code == 200
        elapsed = time.monotonic() - start
    # A burst of 5, then 5 a second, for all spellings together.
    assert admitted <= 5 + 5 * elapsed + 1, (admitted, elapsed)


# -- 5: the server log names an error's type, never its traceback or message -------------


def test_5_an_internal_error_is_logged_by_its_type_alone(
    hostile: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with httpx.Client(headers=bearer(hostile)) as client:
        response = client.post(table_url(hostile, "corrupt"), json={})
        # On the same connection, so that the server is done with the first request
        # (and whatever it logs about it) before it answers this one.
        client.get(hostile.server.url + "/healthz")
    assert response.status_code == 500, response.text
    assert response.json()["errorCode"] == "INTERNAL_ERROR"
    logged = [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    path = "/delta-sharing/shares/s/schemas/x/tables/corrupt/query"
    assert logged == [("sharing_server", logging.ERROR, f"internal error on POST {path}: JSONDecodeError")]
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def test_5_a_malformed_chunked_body_is_no_internal_error(
    hostile: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    path = f"/delta-sharing/shares/s/schemas/x/tables/chunked-{uuid.uuid4().hex[:8]}/query"
    with socket.create_connection(("127.0.0.1", hostile.server.port), timeout=10) as connection:
        connection.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n".encode()
        )
        assert connection.recv(100).startswith(b"HTTP/1.1 400")  # Hypercorn's own answer
    deadline = time.monotonic() + 10
    while not (found := [r for r in audit_records(hostile) if r["path"] == path]):
        assert time.monotonic() < deadline, "no audit line"
        time.sleep(0.02)
    assert found[0]["status"] == 400 and found[0]["error_code"] == "MALFORMED_REQUEST"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]


# -- 6: bodies the parser or the validators reject are 400s --------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"predicateHints":["\\ud800"]}',
        b'{"jsonPredicateHints":"\\ud800"}',
        b'{"timestamp":"\\ud800"}',
        b"[" * 200_000,
    ],
    ids=["predicateHints", "jsonPredicateHints", "timestamp", "200,000 ["],
)
def test_6_unusable_query_bodies_are_400s(hostile: Deployment, body: bytes) -> None:
    response = httpx.post(table_url(hostile, "t"), content=body, headers=bearer(hostile))
    assert response.status_code == 400, response.text
    assert response.json()["errorCode"] == "MALFORMED_REQUEST"


def test_6_an_admin_body_with_a_lone_surrogate_is_a_400(hostile: Deployment) -> None:
    response = httpx.post(
        hostile.server.url + "/admin/v1/shares/s/tokens",
        content=b'{"description":"\\udfff"}',
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["errorCode"] == "MALFORMED_REQUEST"


# -- 7: files deleted after a first query are noticed -------------------------------------


def test_7_a_file_deleted_after_the_first_query_is_noticed(hostile: Deployment) -> None:
    headers = bearer(hostile)
    first = httpx.post(table_url(hostile, "gone"), json={}, headers=headers)
    assert first.status_code == 200 and data_lines(first)
    table = hostile.storage.root / TESTDATA_BUCKET / "gone"  # type: ignore[attr-defined]
    victim = next(path for path in table.rglob("*.parquet") if "_delta_log" not in path.parts)
    victim.unlink()  # as VACUUM does
    again = httpx.post(table_url(hostile, "gone"), json={}, headers=headers)
    assert again.status_code == 400, again.text[:200]
    assert again.json() == {
        "errorCode": "RESOURCE_DOES_NOT_EXIST",
        "message": "table files missing: 1 file is no longer in storage (vacuumed or lost)",
    }


# -- 11: names are matched whole -----------------------------------------------------------


@pytest.mark.parametrize("name", ["ok\n", "ok\r\n", "\nok"])
def test_11_a_share_name_with_a_newline_is_refused(hostile: Deployment, name: str) -> None:
    response = httpx.post(
        hostile.server.url + "/admin/v1/shares",
        json={"name": name},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert response.status_code == 400, response.text
    assert "invalid share name" in response.json()["message"]
    assert name not in [share.name for share in hostile.store.list_shares()]


# -- 12: one bound for the snapshots of all tables ----------------------------------------


def test_12_cached_snapshots_of_all_tables_stay_within_one_bound(hostile: Deployment) -> None:
    headers = bearer(hostile)
    for name in ("p0", "p1", "p2", "p3"):
        response = httpx.post(table_url(hostile, name), json={}, headers=headers)
        assert response.status_code == 200 and len(data_lines(response)) == 6
    snapshots = hostile.server.app.state.services.readers.snapshots  # type: ignore[attr-defined]
    assert snapshots.files <= SNAPSHOT_FILES
    # The tables queried last are the ones kept.
    readers = hostile.server.app.state.services.readers._readers  # type: ignore[attr-defined]
    kept = {key[2] for key, reader in readers.items() if 0 in reader._snapshots}
    assert {"p2", "p3"} <= kept and not {"p0", "p1"} & kept


# -- 10: the CLI and `serve` on a disk they cannot write ----------------------------------


@cache
def can_mount_tmpfs() -> bool:
    """Whether a tmpfs can be mounted in a private mount namespace (user namespaces enabled)."""
    if shutil.which("unshare") is None:
        return False
    probe = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", "mount -t tmpfs none /mnt"]
    return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0


def cli(
    config: Path, *args: str, mount: str | None = None, then: str = "", fsize: int | None = None
) -> subprocess.CompletedProcess:
    """`sharing-server --config CONFIG ARGS…` in a process of its own.

    With `mount` (tmpfs options), over a tmpfs mounted at `disk/` beside the
    config, the shell command `then` run first; with `fsize`, under that file size limit.
    """
    command = [sys.executable, "-m", "sharing_server", "--config", str(config), *args]
    if mount is not None:
        script = f'mount -t tmpfs -o {mount} none "{config.parent / "disk"}" && {then or "true"} && exec "$@"'
        command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", *command]

    def limit_file_size() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    # A server that started after all would run until the timeout: the test then fails.
    return subprocess.run(command, capture_output=True, text=True, timeout=60, preexec_fn=limit_file_size)


def assert_one_error_line(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(text in lines[0] for text in expected), lines[0]


def write_config(tmp_path: Path, data_dir: Path, **extra: str) -> Path:
    (tmp_path / "disk").mkdir(exist_ok=True)
    settings = "".join(f'{key} = "{value}"\n' for key, value in extra.items())
    config = tmp_path / f"{data_dir.name}.toml"
    config.write_text(f'[server]\ndata_dir = "{data_dir}"\nport = {free_port()}\n{settings}')
    return config


def test_10_serve_with_a_data_dir_that_is_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    config = write_config(tmp_path, tmp_path / "file" / "state")
    assert_one_error_line(cli(config, "serve"), "Not a directory", str(tmp_path / "file"))


def test_10_serve_on_a_read_only_file_system(tmp_path: Path) -> None:
    if not can_mount_tmpfs():
        pytest.skip("no user namespaces here to mount a tmpfs in")
    config = write_config(tmp_path, tmp_path / "disk" / "state")
    assert_one_error_line(cli(config, "serve", mount="ro,size=64k"), "Read-only file system")


def test_10_serve_with_a_store_it_cannot_open(tmp_path: Path) -> None:
    if not can_mount_tmpfs():
        pytest.skip("no user namespaces here to mount a tmpfs in")
    # The folders exist (read-only) and the key is configured: the first write is the store's.
    config = write_config(tmp_path, tmp_path / "disk", secret_key="k" * 32)
    with config.open("a") as handle:
        handle.write(f'[storage]\nroot = "{tmp_path / "buckets"}"\n')
    result = cli(config, "serve", mount="ro,size=64k")
    assert_one_error_line(result, "cannot use the share store sqlite:///", "unable to open database file")


def test_10_serve_in_a_directory_it_may_not_write(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes whatever the permissions say")
    (tmp_path / "locked").mkdir(mode=0o500)
    config = write_config(tmp_path, tmp_path / "locked" / "state")
    assert_one_error_line(cli(config, "serve"), "Permission denied")


def test_10_the_cli_on_a_full_disk_says_so(tmp_path: Path) -> None:
    if not can_mount_tmpfs():
        pytest.skip("no user namespaces here to mount a tmpfs in")
    config = write_config(tmp_path, tmp_path / "disk" / "state")
    # On a 1 MB tmpfs: the store is made, a file takes the rest of the disk, a share is asked for.
    make_store = f'"{sys.executable}" -m sharing_server --config "{config}" share list >/dev/null'
    fill_disk = f'{{ cat /dev/zero > "{tmp_path / "disk" / "fill"}" 2>/dev/null; true; }}'
    result = cli(config, "share", "create", "full", mount="size=1m", then=f"{make_store} && {fill_disk}")
    assert_one_error_line(result, "the share store has no space left on its disk")


def test_10_the_cli_past_a_file_size_limit_says_so(tmp_path: Path) -> None:
    config = write_config(tmp_path, tmp_path / "state")
    assert cli(config, "share", "list").returncode == 0  # the store exists, and its key
    # Every write past 2 KB fails (EFBIG): SQLite's journal cannot grow.
    assert_one_error_line(cli(config, "share", "create", "big", fsize=2048), "cannot use the share store")
    # A first `serve` cannot write its key file at all: an OSError, told as one.
    fresh = write_config(tmp_path, tmp_path / "fresh")
    assert_one_error_line(cli(fresh, "serve", fsize=0), "File too large", str(tmp_path / "fresh"))
