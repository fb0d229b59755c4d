"""How a table endpoint's response streams: its first chunk made before its headers, the rest after.

A `/metadata`, `/query` or `/changes` response is made lazily, line by line,
counted for the audit as it goes (`counting_files`) and cut into chunks
(`ndjson_chunks`). A file listing holds one of its token's stream slots
(`StreamSlots`) until it ends, and may hear its client hang up through a
`DisconnectWatch`. Where each chunk is made (on the event loop, in worker
threads one or a group per trip) is chosen per response, by what its lines
are made from.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from share_store.errors import ShareStoreError
from sharing_server.delta_sharing.responses import TableResponse
from sharing_server.http.disconnects import DisconnectWatch
from sharing_server.http.errors import ClientGone
from sharing_server.http.ndjson import NDJSON, counting_files, ndjson_chunks
from sharing_server.http.stream_slots import Stream, StreamSlots
from sharing_server.observability.audit import audit_fields

CAPABILITIES_HEADER = "delta-sharing-capabilities"
VERSION_HEADER = "Delta-Table-Version"

logger = logging.getLogger("sharing_server")


class TableStream(StreamingResponse):
    """A table's lines, cut off with one log line when reading fails after the headers went out.

    With a `watch`, the disconnect is heard through it (it took the server's
    one `http.disconnect` message) and it is stopped when the response ends;
    `on_close` runs then too, however the response ended.
    """

    def __init__(
        self,
        content: Iterator[bytes] | AsyncIterator[bytes],
        headers: dict[str, str],
        watch: DisconnectWatch | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(content, headers=headers, media_type=None)
        self.watch = watch
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, self.watch.receive if self.watch else receive, send)
        finally:
            if self.watch is not None:
                self.watch.stop()
            if self.on_close is not None:
                self.on_close()

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        except ClientGone:
            pass  # nobody is left to see a cut-off response, and nothing went wrong here
        except ShareStoreError as error:
            # Too late for an error status. Closing without the last chunk shows the
            # client a broken response, never a complete-looking short one, and the
            # log gets a line instead of a traceback.
            logger.warning("response cut off after its headers: %s: %s", error.error_code, error.message)


async def _on_loop(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """`chunks` made on the event loop's thread, for lines made from memory alone.

    Handing each chunk's making to a worker thread and back costs about 100 µs,
    a quarter of making a 64 KiB chunk of pre-encoded lines: a third of a warm
    /query's time went to it. Made here, a chunk holds the loop no longer than
    it would hold the GIL in a worker thread, and no chunk waits on storage.
    """
    for chunk in chunks:
        yield chunk


# A response of line blocks made in worker threads fetches this much of it per trip.
GROUP_BYTES = 1024 * 1024


def _take(chunks: Iterator[bytes], size: int) -> list[bytes]:
    """The next chunks, about `size` bytes of them (none once they end)."""
    group, taken = [], 0
    for chunk in chunks:
        group.append(chunk)
        taken += len(chunk)
        if taken >= size:
            break
    return group


async def _in_threads(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """`chunks` made in worker threads, several per trip: each trip costs some 100 µs.

    A streamed snapshot's million lines come in several thousand chunks; fetched
    one per trip, the trips took a third of the response's time. A group is
    part of a record batch's block of lines (some 4 MB), which the response
    holds while cutting it into chunks anyway.
    """
    while group := await run_in_threadpool(_take, chunks, GROUP_BYTES):
        for chunk in group:
            yield chunk
        del group


@dataclass(frozen=True)
class Opening:
    """A table response's first chunks, made in a worker thread before its headers go out."""

    result: TableResponse
    first: list[bytes]
    #: The chunks after `first`; None when `first` holds the whole response.
    rest: Iterator[bytes] | None


# The first chunk's size at most (`ndjson_chunks`): it comes quickly, and carries most errors.
FIRST_CHUNK_BYTES = 64 * 1024


def open_response(request: Request, result: TableResponse, chunk_bytes: int) -> Opening:
    """In a worker thread: the start of `result`'s response, its first chunk, and its end if that is all.

    Lines are made lazily, and an error once the headers are sent (storage gone
    mid-way) can no longer get its status. Making the first chunk before them
    turns every error of most responses, which fit in one chunk, into a proper
    JSON error response. It is made in the same trip to a worker thread as
    `result`, and a response that fits in it (every /metadata) is learnt to end
    there too: each trip to a thread and back waited some 25 ms under 64 clients,
    and a /metadata took three, one to make it, one for its chunk, one to learn
    that no other followed.
    """
    fields = audit_fields(request)
    fields["version"] = result.version
    lines = counting_files(result.lines, fields, result.file_bytes)
    # Chunks are what a slow client makes the server hold: their size bounds it.
    chunks = ndjson_chunks(lines, first_bytes=FIRST_CHUNK_BYTES, chunk_bytes=chunk_bytes)
    first, ended = _take_first(chunks, min(FIRST_CHUNK_BYTES, chunk_bytes))
    return Opening(result, first, None if ended else chunks)


def _take_first(chunks: Iterator[bytes], full: int) -> tuple[list[bytes], bool]:
    """The first chunk, and whether it is the last: only the last of `ndjson_chunks` is under `full`
    bytes, so a short one is followed by the chunks' end (asked for, not assumed)."""
    group = []
    for chunk in chunks:
        group.append(chunk)
        if len(chunk) >= full:
            return group, False
    return group, True


def table_stream(
    opening: Opening, watch: DisconnectWatch | None = None, stream: Stream | None = None
) -> Response:
    """The response `opening` starts; `stream`, if given, is closed when the response ends, however
    it ends."""
    result = opening.result
    capabilities = f"responseformat={result.response_format}"
    if result.echo_end_stream_action:
        capabilities += ";includeendstreamaction=true"
    if result.echo_async_query:
        capabilities += ";asyncquery=true"
    headers = {
        VERSION_HEADER: str(result.version),
        CAPABILITIES_HEADER: capabilities,
        "Content-Type": NDJSON,
    }
    if result.file_id_hash:
        headers["fileidhash"] = result.file_id_hash
    first, rest = opening.first, opening.rest
    if rest is None:
        # All made already: sent from the loop, with no further trip to a thread to learn that.
        content: Iterator[bytes] | AsyncIterator[bytes] = _on_loop(iter(first))
    elif result.from_memory:
        content = _on_loop(_after_all(first, rest))
    else:
        rest = _after_all(first, rest)
        content = _in_threads(rest) if result.in_blocks else rest
    return TableStream(content, headers, watch, on_close=stream.close if stream else None)


def _after_all(first: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    """`first`'s chunks, then `rest`; unlike a chain, not holding on to `first`'s once sent."""
    while first:
        yield first.pop(0)
    yield from rest


async def listing_stream(
    request: Request,
    slots: StreamSlots,
    run: Callable[[Stream], TableResponse],
    chunk_bytes: int,
    watch: DisconnectWatch | None = None,
) -> Response:
    """A file listing's response, made by `run`, which opens `stream` once it knows the token.

    The stream's slot and the watch are given back when the response ends, or at
    once when it fails before its headers.
    """
    stream = slots.stream()

    def opening() -> Opening:
        return open_response(request, run(stream), chunk_bytes)

    try:
        return table_stream(await run_in_threadpool(opening), watch, stream)
    except BaseException:
        stream.close()
        if watch is not None:
            watch.stop()
        raise
