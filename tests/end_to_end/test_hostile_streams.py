"""Hostile clients against a live server: readers that stall, streams beyond the caps,
requests framed two ways, bodies that trickle in.

Each test speaks raw HTTP/1.1 over a socket, to misbehave as no HTTP client
library would. The servers run with tiny timeouts, so that what a deployed
server does after 30 s happens here within seconds.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Deployment, audit_records, deploy

BUCKET = "hostile"
# Enough files that the response (about 10 MB) outlasts every socket buffer on its way.
BIG_FILES = 30_000
PREFIX = "/delta-sharing/shares/s/schemas/default/tables"
BIG = f"{PREFIX}/big/query"
SMALL = f"{PREFIX}/small/query"


def make_big_table(location: Path, files: int) -> None:
    """A Delta table of `files` adds, all hard links to one small file (they need only exist)."""
    log = location / "_delta_log"
    log.mkdir(parents=True)
    template = location / "template.parquet"
    template.write_bytes(b"PAR1")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    metadata = {
        "id": "big",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 0,
    }
    lines: list[dict] = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": metadata}]
    for index in range(files):
        name = f"part-{index:06d}.parquet"
        os.link(template, location / name)
        add = {"path": name, "partitionValues": {}, "size": 4, "modificationTime": 0, "dataChange": True}
        lines.append({"add": add})
    (log / "00000000000000000000.json").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def buckets(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Path:
    root = tmp_path_factory.mktemp("hostile-buckets")
    make_big_table(root / BUCKET / "big", BIG_FILES)
    shutil.copytree(testdata / "delta-0.8.0-partitioned", root / BUCKET / "small")
    return root


def serve(tmp: Path, buckets: Path, **limits: str) -> Deployment:
    """A server sharing `big` and `small` in share `s`, rate limits off, `[limits]` as given."""
    env = {"SHARING_LIMITS_PER_TOKEN_RPS": "0", "SHARING_LIMITS_GLOBAL_RPS": "0"}
    env |= {f"SHARING_LIMITS_{key.upper()}": value for key, value in limits.items()}
    deployment = deploy(tmp, {"type": "local", "root": str(buckets)}, env=env)
    deployment.share_tables("s", {"big": "big", "small": "small"}, bucket=BUCKET)
    return deployment


@pytest.fixture(scope="module")
def hasty(tmp_path_factory: pytest.TempPathFactory, buckets: Path) -> Iterator[Deployment]:
    """A server whose clients get 1 s for a body, and 2 s for each chunk of a response."""
    deployment = serve(tmp_path_factory.mktemp("hasty"), buckets, stream_send_timeout="2", body_timeout="1")
    yield deployment
    deployment.server.stop()
    deployment.store.close()


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory, buckets: Path) -> Iterator[Deployment]:
    """A server streaming at most 2 responses per token and 3 in all."""
    deployment = serve(
        tmp_path_factory.mktemp("capped"), buckets, streams_per_token="2", streams_per_process="3"
    )
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def connect(server: Deployment, receive_buffer: int | None = None) -> socket.socket:
    sock = socket.socket()
    if receive_buffer:
        # Set before connecting, so that the window advertised from the start is small.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", server.server.port))
    return sock


def head(method: str, path: str, token: str, *fields: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def query(path: str, token: str) -> bytes:
    return head("POST", path, token, "Content-Type: application/json", "Content-Length: 2") + b"{}"


def post_query(server: Deployment, path: str, token: str) -> httpx.Response:
    return httpx.post(server.server.url + path, json={}, headers={"Authorization": f"Bearer {token}"})


def stalled_reader(server: Deployment, path: str, token: str) -> socket.socket:
    """A /query whose answer is never read: once the socket buffers fill, the server's send waits."""
    sock = connect(server, receive_buffer=4096)
    sock.sendall(query(path, token))
    return sock


def read_to_end(sock: socket.socket, timeout: float = 20) -> tuple[bytes, str]:
    """Everything the server sends until it closes; and how it closed: `eof`, `reset` or `open`."""
    sock.settimeout(timeout)
    received = bytearray()
    try:
        while data := sock.recv(1 << 16):
            received += data
    except ConnectionResetError:
        return bytes(received), "reset"
    except TimeoutError:
        return bytes(received), "open"
    return bytes(received), "eof"


def responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The complete responses in `data`: status, headers (names in lower case), body."""
    found = []
    while data:
        top, separator, data = data.partition(b"\r\n\r\n")
        if not separator:
            break
        first_line, *header_lines = top.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding") == "chunked":
            body = bytearray()
            while True:
                size_line, _, data = data.partition(b"\r\n")
                size = int(size_line, 16)
                body += data[:size]
                data = data[size + 2 :]
                if not size:
                    break
        else:
            length = int(headers.get("content-length", "0"))
            body, data = bytearray(data[:length]), data[length:]
        found.append((int(first_line.split()[1]), headers, bytes(body)))
    return found


def status_line(sock: socket.socket) -> bytes:
    """The first line of the response, read without taking more than a few bytes off the socket."""
    sock.settimeout(20)
    line = b""
    while not line.endswith(b"\r\n"):
        byte = sock.recv(1)
        assert byte, f"connection closed after {line!r}"
        line += byte
    return line


def server_holds(server: Deployment, client: socket.socket) -> bool:
    """Whether the server's end of `client`'s connection still exists (read from /proc/net/tcp)."""
    ours = f"{server.server.port:04X}"
    theirs = f"{client.getsockname()[1]:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, remote = line.split()[1:3]
            if local.endswith(f":{ours}") and remote.endswith(f":{theirs}"):
                return True
    return False


def wait_for(condition: Callable[[], object], timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


# -- a reader that stalls ----------------------------------------------------------------


def test_a_stalled_reader_is_cut_off_after_the_send_timeout(hasty: Deployment) -> None:
    token = hasty.token("s")
    sock = stalled_reader(hasty, BIG, token)
    try:

        def cut_off() -> list[dict]:
            return [r for r in audit_records(hasty) if r.get("error_code") == "SEND_TIMEOUT"]

        assert wait_for(cut_off), "the server still waits on a reader that took nothing for 2 s"
        (record,) = cut_off()
        assert record["route"] == "table_query" and record["status"] == 200
        # Not only the response: the connection itself goes, while the client still reads nothing.
        assert wait_for(lambda: not server_holds(hasty, sock)), "the server still holds the connection"
        received, ending = read_to_end(sock)
        assert ending in ("eof", "reset")
        assert received.startswith(b"HTTP/1.1 200")
        assert not received.endswith(b"\r\n0\r\n\r\n"), "the response should have been cut short"
    finally:
        sock.close()


def test_a_slow_but_steady_reader_gets_everything(hasty: Deployment) -> None:
    """Neither timeout cuts a download that takes longer than they do while its client keeps reading."""
    sock = connect(hasty, receive_buffer=65536)
    try:
        sock.sendall(query(BIG, hasty.token("s")))
        sock.settimeout(20)
        received = bytearray()
        start = time.monotonic()
        while data := sock.recv(1 << 16):
            received += data
            if received.endswith(b"\r\n0\r\n\r\n"):
                break
            time.sleep(0.02)  # at most 64 KB each time: 10 MB take over 3 s
        assert time.monotonic() - start > 2, "the download should outlast both timeouts"
        assert received.startswith(b"HTTP/1.1 200") and received.endswith(b"\r\n0\r\n\r\n")
        assert received.count(b'{"file":') == BIG_FILES
    finally:
        sock.close()


# -- caps on streams at once -----------------------------------------------------------


def test_streams_beyond_the_caps_answer_429_per_token_and_503_per_process(capped: Deployment) -> None:
    first, second, third = (capped.token("s") for _ in range(3))
    held = [stalled_reader(capped, BIG, first), stalled_reader(capped, BIG, first)]
    try:
        for sock in held:
            assert status_line(sock).startswith(b"HTTP/1.1 200")
        refused = post_query(capped, SMALL, first)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["errorCode"] == "TOO_MANY_REQUESTS"
        assert "(2)" in refused.json()["message"]

        held.append(stalled_reader(capped, BIG, second))
        assert status_line(held[-1]).startswith(b"HTTP/1.1 200")
        busy = post_query(capped, SMALL, third)
        assert busy.status_code == 503
        assert busy.headers["retry-after"] == "1"
        assert busy.json()["errorCode"] == "TEMPORARILY_UNAVAILABLE"
        assert "(3)" in busy.json()["message"]
    finally:
        for sock in held:
            sock.close()

    # Streams that ended, however they ended, give their slots back.
    assert wait_for(lambda: post_query(capped, SMALL, first).status_code == 200)


# -- framing -----------------------------------------------------------------------


def test_content_length_with_transfer_encoding_is_refused_and_the_connection_closed(
    hasty: Deployment,
) -> None:
    token = hasty.token("s")
    # Chunked, the body ends after `{}`; by its length, it would run on. What follows the
    # chunks must never be read as a request of its own.
    smuggled = head("GET", "/delta-sharing/shares/s/schemas", token, "Connection: close")
    sent = head(
        "POST",
        SMALL,
        token,
        "Content-Type: application/json",
        f"Content-Length: {7 + len(smuggled)}",
        "Transfer-Encoding: chunked",
    )
    with connect(hasty) as sock:
        sock.sendall(sent + b"2\r\n{}\r\n0\r\n\r\n" + smuggled)
        received, ending = read_to_end(sock)
    assert ending in ("eof", "reset")
    answered = responses(received)
    assert [status for status, _, _ in answered] == [400], received[:500]
    _, headers, body = answered[0]
    assert headers["connection"] == "close"
    assert json.loads(body)["errorCode"] == "MALFORMED_REQUEST"
    time.sleep(0.2)  # an audit line is written once its response is sent
    assert not [r for r in audit_records(hasty) if r["route"] == "list_schemas"]


# -- bodies that trickle in ------------------------------------------------------------


@pytest.mark.parametrize("trickle", [True, False], ids=["a byte at a time", "nothing at all"])
def test_a_body_that_does_not_arrive_in_time_gets_408(hasty: Deployment, trickle: bool) -> None:
    token = hasty.token("s")
    with connect(hasty) as sock:
        sock.sendall(head("POST", SMALL, token, "Content-Type: application/json", "Content-Length: 100"))
        answered = False
        for _ in range(100):  # 100 bytes over 10 s would complete it; the timeout is 1 s
            if trickle:
                try:
                    sock.sendall(b" ")
                except OSError:  # closed by the server mid-trickle
                    break
            if select.select([sock], [], [], 0.1)[0]:
                answered = True
                break
        assert answered, "the server still waits on a body due 1 s ago"
        received, ending = read_to_end(sock)
    assert ending in ("eof", "reset")
    (status, headers, body), *_ = responses(received)
    assert status == 408
    assert headers["connection"] == "close"
    assert json.loads(body) == {
        "errorCode": "REQUEST_TIMEOUT",
        "message": "The request body took longer than 1 s to arrive.",
    }
