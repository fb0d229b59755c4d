"""Serving local-storage files at HMAC-signed URLs (GET, HEAD, Range → 206)."""

from __future__ import annotations

import errno
import os
import stat
import time

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import FileResponse, MalformedRangeHeader, RangeNotSatisfiable, Response
from starlette.types import Message, Receive, Scope, Send

from share_store.errors import Forbidden, NotFound
from share_store.signing.file_urls import EXPIRES_PARAM, SIGNATURE_PARAM
from share_store.storage.base import ObjectStorage
from share_store.storage.local import LocalStorage

#: Linux's "read only what the page cache holds" flag; None elsewhere, where every read takes a thread.
NOWAIT: int | None = getattr(os, "RWF_NOWAIT", None)

#: Larger reads go to a thread all the same: on the loop their copy would hold up every other
#: request, and the trip is small beside it (a 3 MB range measured slower read on the loop).
LOOP_READ_MOST = 128 * 1024


class DataFileResponse(FileResponse):
    """A file, GET or HEAD, whole or by range, that stops being read once the client has gone.

    fsspec, which the Python client reads through, checks that a URL exists with
    a GET of the whole file and hangs up after the headers; Hypercorn drops what
    is sent after that without a word, so a plain `FileResponse` would read the
    rest of the file for nobody (three times per file and read). Chunks are
    1 MiB rather than 64 KiB: each may be a trip to a worker thread. A whole-file
    GET starts with 64 KiB and doubles: the GET fsspec drops after the headers
    then costs 64 KiB read and sent, not 1 MiB.

    The same client asks for each file eleven times (HEADs, footers, the rest),
    so what a request costs besides its bytes counts: reads come from the page
    cache on the event loop when the data is there (see `FileReads`), and a HEAD
    or an answer of one read is sent without the watch for the client leaving.
    """

    chunk_size = 1024 * 1024
    first_chunk_size = 64 * 1024

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._in_one_read(scope):
            await super().__call__(scope, receive, send)
            return
        respond = super().__call__
        async with anyio.create_task_group() as group:

            async def send_file() -> None:
                await respond(scope, receive, send)
                group.cancel_scope.cancel()  # done: stop listening

            group.start_soon(send_file)
            await _disconnected(receive)
            group.cancel_scope.cancel()  # gone: stop reading

    def _in_one_read(self, scope: Scope) -> bool:
        """Whether the answer is headers and at most one read: nothing to stop if the client leaves."""
        if scope["method"] == "HEAD":
            return True
        if self.stat_result is None:
            return False
        size = self.stat_result.st_size
        headers = Headers(scope=scope)
        http_range = headers.get("range")
        if http_range is None or "if-range" in headers:  # an If-Range may turn it into the whole file
            return size <= self.first_chunk_size
        try:
            ranges = self._parse_range_header(http_range, size)
        except (MalformedRangeHeader, RangeNotSatisfiable):
            return True  # a 400 or 416, answered by `FileResponse` as it parses the header again
        return len(ranges) == 1 and ranges[0][1] - ranges[0][0] <= self.chunk_size

    async def _handle_simple(self, send: Send, send_header_only: bool, send_pathsend: bool) -> None:
        # Starlette's own, but for the growing chunks and the reads.
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if send_header_only or send_pathsend:  # Hypercorn offers no pathsend; kept as Starlette has it
            await super()._handle_simple(_body_only(send), send_header_only, send_pathsend)
            return
        with FileReads(self.path, int(self.headers["content-length"])) as file:
            offset, size, more_body = 0, self.first_chunk_size, True
            while more_body:
                chunk = await file.read(offset, size)
                offset += len(chunk)
                more_body = len(chunk) == size
                await send({"type": "http.response.body", "body": chunk, "more_body": more_body})
                size = min(size * 2, self.chunk_size)

    async def _handle_single_range(
        self, send: Send, start: int, end: int, file_size: int, send_header_only: bool
    ) -> None:
        # Starlette's own, but for the reads.
        self.headers["content-range"] = f"bytes {start}-{end - 1}/{file_size}"
        self.headers["content-length"] = str(end - start)
        await send({"type": "http.response.start", "status": 206, "headers": self.raw_headers})
        if send_header_only:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        with FileReads(self.path, file_size) as file:
            more_body = True
            while more_body:
                chunk = await file.read(start, min(self.chunk_size, end - start))
                start += len(chunk)
                more_body = len(chunk) == self.chunk_size and start < end
                await send({"type": "http.response.body", "body": chunk, "more_body": more_body})


class FileReads:
    """A file read at offsets: on the event loop what the page cache holds, the rest in a worker thread.

    A hot data file's 64 KiB footer comes from the page cache in a few
    microseconds; a trip to a worker thread and back costs a hundred or more,
    far more under load. `RWF_NOWAIT` makes the kernel answer at once with
    what it holds, or nothing, rather than wait for the disk, so the event loop
    never waits on one. A file system that does not take the flag has every
    read made in a thread, as without it. Reads stop at `size`, the file's size
    when its headers were made, so that the last one is not sent to a thread
    to learn that the file has ended.
    """

    def __init__(self, path: str | os.PathLike[str], size: int) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.size = size

    def __enter__(self) -> FileReads:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    async def read(self, offset: int, length: int) -> bytes:
        """Up to `length` bytes at `offset`; fewer only at the end of the file."""
        length = max(min(length, self.size - offset), 0)
        if length == 0:
            return b""
        head = self._cached(offset, length)
        if len(head) == length:
            return head
        rest = await anyio.to_thread.run_sync(os.pread, self._fd, length - len(head), offset + len(head))
        return head + rest if head else rest

    def _cached(self, offset: int, length: int) -> bytes:
        if NOWAIT is None or length > LOOP_READ_MOST:
            return b""
        buffer = bytearray(length)
        try:
            got = os.preadv(self._fd, [buffer], offset, NOWAIT)
        except BlockingIOError:
            return b""  # on disk, not in the cache
        except OSError as error:
            if error.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                return b""  # a file system without the flag
            raise
        return bytes(buffer) if got == length else bytes(buffer[:got])


def _body_only(send: Send) -> Send:
    """`send` without the response start, which was sent already."""

    async def body(message: Message) -> None:
        if message["type"] != "http.response.start":
            await send(message)

    return body


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class LocalFiles:
    """Local storage's files at their signed URLs (`{prefix}/files/...`); refused for any other storage."""

    def __init__(self, storage: ObjectStorage) -> None:
        self.storage = storage

    async def serve_file(self, request: Request) -> Response:
        storage = self.storage
        if not isinstance(storage, LocalStorage):
            raise Forbidden("files are served by the object store, not by this server")
        bucket = request.path_params["bucket"]
        key = request.path_params["key"]
        params = request.query_params
        if not storage.signer.verify(
            bucket, key, params.get(EXPIRES_PARAM), params.get(SIGNATURE_PARAM), time.time()
        ):
            raise Forbidden("The URL signature is invalid or has expired.")
        path = storage.resolve(bucket, key)
        if path is None:
            raise Forbidden("The URL signature is invalid or has expired.")
        try:
            # On the event loop, as resolving the path's links just was: metadata, not data.
            found = os.stat(path)
        except OSError:
            found = None
        if found is None or not stat.S_ISREG(found.st_mode):
            raise NotFound("The requested object does not exist.")
        return DataFileResponse(
            path,
            stat_result=found,
            media_type="application/octet-stream",
            headers={"Cache-Control": "private, no-store"},
        )
