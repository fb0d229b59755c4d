"""Data files served by this server from local storage: large, by range, and to clients that hang up."""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from starlette.types import Message

from sharing_server.http.files import DataFileResponse
from tests.conftest import Deployment, audit_record, deploy

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Deployment, str, bytes]]:
    """A deployment sharing a table of one 24 MiB file; a signed URL of it and its bytes."""
    tmp = tmp_path_factory.mktemp("big")
    root = tmp / "buckets"
    # Random bytes do not compress, so the Parquet file is as large as its data.
    blobs = pa.array([os.urandom(MIB) for _ in range(24)], pa.binary())
    write_deltalake(str(root / "data" / "big"), pa.table({"blob": blobs}))
    deployment = deploy(tmp, {"type": "local", "root": str(root)})
    deployment.share_tables("s", {"big": "big"}, bucket="data")
    token = deployment.token("s")
    query = httpx.post(
        deployment.endpoint + "/shares/s/schemas/default/tables/big/query",
        json={},
        headers={"Authorization": f"Bearer {token}"},
    )
    (url,) = [json.loads(line)["file"]["url"] for line in query.text.splitlines() if '"file"' in line]
    (data_file,) = (root / "data" / "big").glob("*.parquet")
    yield deployment, url, Path(data_file).read_bytes()
    deployment.server.stop()
    deployment.store.close()


def test_a_large_file_whole_and_by_ranges_across_chunks(big: tuple[Deployment, str, bytes]) -> None:
    _, url, content = big
    assert len(content) > 20 * MIB
    whole = httpx.get(url)
    assert whole.status_code == 200 and whole.content == content
    assert int(httpx.head(url).headers["content-length"]) == len(content)
    for start, end in [(MIB - 10, 3 * MIB + 10), (0, 0), (len(content) - 8, len(content) - 1)]:
        part = httpx.get(url, headers={"Range": f"bytes={start}-{end}"})
        assert part.status_code == 206 and part.content == content[start : end + 1]


def test_a_client_that_hangs_up_after_the_headers_is_not_sent_the_rest(
    big: tuple[Deployment, str, bytes],
) -> None:
    """fsspec checks a URL exists by a GET it abandons after the headers: the file is not read on."""
    deployment, url, content = big
    with httpx.stream("GET", url) as response:
        assert response.status_code == 200
        request_id = response.headers["x-request-id"]
    # What the socket buffers held when the client left is sent; the rest of the file is not read.
    assert audit_record(deployment, request_id)["bytes"] < len(content) // 2


def test_a_whole_file_goes_in_chunks_growing_from_64_kib(tmp_path: Path) -> None:
    """A GET dropped after the headers (fsspec's existence check) then costs 64 KiB, not 1 MiB."""
    content = os.urandom(3 * MIB + 5)
    path = tmp_path / "part.parquet"
    path.write_bytes(content)
    bodies: list[bytes] = []

    async def receive() -> Message:
        await anyio.Event().wait()  # the client stays
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    scope = {"type": "http", "method": "GET", "headers": [], "extensions": {}}
    anyio.run(DataFileResponse(path), scope, receive, send)
    assert b"".join(bodies) == content
    kib = 1024
    sizes = [64 * kib, 128 * kib, 256 * kib, 512 * kib, MIB, MIB, 64 * kib + 5]
    assert [len(body) for body in bodies] == sizes


def _respond(response: DataFileResponse, headers: list[tuple[bytes, bytes]], method: str = "GET") -> bytes:
    """What `response` sends as its body to a client that stays."""
    bodies: list[bytes] = []

    async def receive() -> Message:
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            bodies.append(message["body"])

    scope = {"type": "http", "method": method, "headers": headers, "extensions": {}}
    anyio.run(response, scope, receive, send)
    return b"".join(bodies)


@pytest.fixture
def worker_trips(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The functions run in worker threads while the test runs."""
    trips: list[object] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(function: Callable[..., object], *args: object, **kwargs: Any) -> object:
        trips.append(function)
        return await run_sync(function, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return trips


def test_a_footer_the_page_cache_holds_is_read_without_a_worker_thread(
    tmp_path: Path, worker_trips: list[object]
) -> None:
    """fsspec asks for each file's 64 KiB footer twice, its size twice more: no trip to a thread for them."""
    content = os.urandom(3 * MIB)
    path = tmp_path / "part.parquet"
    path.write_bytes(content)  # and so in the page cache
    found = os.stat(path)
    footer = _respond(DataFileResponse(path, stat_result=found), [(b"range", b"bytes=-65536")])
    assert footer == content[-65536:]
    assert _respond(DataFileResponse(path, stat_result=found), [], method="HEAD") == b""
    small = tmp_path / "small.parquet"
    small.write_bytes(content[: 100 * 1024])  # two reads, the second ending at the end of the file
    assert _respond(DataFileResponse(small, stat_result=os.stat(small)), []) == content[: 100 * 1024]
    assert worker_trips == []
    # A large range still goes in chunks, each from the cache or, where it is not, from a thread.
    assert _respond(DataFileResponse(path, stat_result=found), [(b"range", b"bytes=10-")]) == content[10:]


@pytest.mark.parametrize(
    "cached",
    [
        pytest.param(lambda fd, buffers, at, flags: _raise(BlockingIOError()), id="none cached"),
        pytest.param(lambda fd, buffers, at, flags: _raise(OSError(errno.EOPNOTSUPP, "")), id="no flag"),
        pytest.param(lambda fd, buffers, at, flags: _fill(fd, buffers[0], at, 1000), id="some cached"),
    ],
)
def test_what_the_page_cache_does_not_hold_is_read_in_a_worker_thread(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    worker_trips: list[object],
    cached: Callable[[int, list[bytearray], int, int], int],
) -> None:
    content = os.urandom(200 * 1024)
    path = tmp_path / "part.parquet"
    path.write_bytes(content)
    monkeypatch.setattr(os, "preadv", cached)
    found = os.stat(path)
    part = _respond(DataFileResponse(path, stat_result=found), [(b"range", b"bytes=5000-70535")])
    assert part == content[5000:70536]
    assert _respond(DataFileResponse(path, stat_result=found), []) == content
    assert os.pread in worker_trips


def _raise(error: OSError) -> int:
    raise error


def _fill(fd: int, buffer: bytearray, offset: int, most: int) -> int:
    """As a partly cached read: the first `most` bytes only."""
    data = os.pread(fd, min(most, len(buffer)), offset)
    buffer[: len(data)] = data
    return len(data)


def test_a_signed_url_of_a_file_gone_or_of_a_folder_is_not_found(big: tuple[Deployment, str, bytes]) -> None:
    deployment, _, _ = big
    storage = deployment.storage
    for key in ("big/no-such-file.parquet", "big/_delta_log"):
        url, _ = storage.presign("data", key, time.time())
        for method in ("GET", "HEAD"):
            response = httpx.request(method, url)
            assert response.status_code == 404, (key, method)
        assert httpx.get(url).json()["errorCode"] == "RESOURCE_DOES_NOT_EXIST"


def test_a_range_an_if_range_turns_into_the_whole_file_is_still_stopped_when_the_client_goes(
    big: tuple[Deployment, str, bytes],
) -> None:
    """A stale If-Range answers the whole file, which is no longer one read: it stops as a whole GET does."""
    deployment, url, content = big
    headers = {"Range": "bytes=0-99", "If-Range": '"not-the-etag"'}
    with httpx.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        request_id = response.headers["x-request-id"]
    assert audit_record(deployment, request_id)["bytes"] < len(content) // 2
