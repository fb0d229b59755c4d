"""Serving local-storage files at HMAC-signed URLs (GET, HEAD, Range → 206)."""

from __future__ import annotations

import time

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.types import Message, Receive, Scope, Send

from share_store.errors import NotFound
from share_store.signing import EXPIRES_PARAM, SIGNATURE_PARAM
from share_store.storage.local import LocalStorage
from sharing_server.errors import Forbidden


class DataFileResponse(FileResponse):
    """A file, GET or HEAD, whole or by range, that stops being read once the client has gone.

    fsspec, which the Python client reads through, checks that a URL exists with
    a GET of the whole file and hangs up after the headers; Hypercorn drops what
    is sent after that without a word, so a plain `FileResponse` would read the
    rest of the file for nobody (three times per file and read). Chunks are
    1 MiB rather than 64 KiB: each is a trip to a worker thread. A whole-file
    GET starts with 64 KiB and doubles: the GET fsspec drops after the headers
    then costs 64 KiB read and sent, not 1 MiB.
    """

    chunk_size = 1024 * 1024
    first_chunk_size = 64 * 1024

    async def _handle_simple(self, send: Send, send_header_only: bool, send_pathsend: bool) -> None:
        # Starlette's own, but for the growing chunks.
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if send_header_only or send_pathsend:  # neither on Hypercorn; kept as Starlette has them
            await super()._handle_simple(_body_only(send), send_header_only, send_pathsend)
            return
        async with await anyio.open_file(self.path, mode="rb") as file:
            size, more_body = self.first_chunk_size, True
            while more_body:
                chunk = await file.read(size)
                more_body = len(chunk) == size
                await send({"type": "http.response.body", "body": chunk, "more_body": more_body})
                size = min(size * 2, self.chunk_size)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        respond = super().__call__
        async with anyio.create_task_group() as group:

            async def send_file() -> None:
                await respond(scope, receive, send)
                group.cancel_scope.cancel()  # done: stop listening

            group.start_soon(send_file)
            await _disconnected(receive)
            group.cancel_scope.cancel()  # gone: stop reading


def _body_only(send: Send) -> Send:
    """`send` without the response start, which was sent already."""

    async def body(message: Message) -> None:
        if message["type"] != "http.response.start":
            await send(message)

    return body


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def serve_file(request: Request) -> Response:
    storage = request.app.state.storage
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
    if not path.is_file():
        raise NotFound("The requested object does not exist.")
    return DataFileResponse(
        path, media_type="application/octet-stream", headers={"Cache-Control": "private, no-store"}
    )
