"""HTTP handlers of the Delta Sharing REST protocol: parse, call, encode.

`ProtocolEndpoints` is given what its handlers use (the store, the queries, the
stream slots, the list pages' token codec) when the routes are made
(`protocol_routes`); nothing is looked up per request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from share_store.errors import ShareStoreError
from share_store.model import Share, SharedTable, Token
from share_store.persistence import ShareStore
from share_store.signing.token_codec import TokenCodec
from sharing_server.auth.bearer import authenticate, authorize_share, authorize_table
from sharing_server.delta_sharing.capabilities import Capabilities, parse_file_id_hash
from sharing_server.delta_sharing.list_pages import list_page, page_body
from sharing_server.delta_sharing.queries import TableQueries
from sharing_server.delta_sharing.requests import ChangesRequest, QueryRequest
from sharing_server.delta_sharing.responses import TableResponse
from sharing_server.http.disconnects import DisconnectWatch
from sharing_server.http.errors import ClientGone
from sharing_server.http.ndjson import JSON, NDJSON, counting_files, dumps, ndjson_chunks
from sharing_server.http.stream_slots import Stream, StreamSlots
from sharing_server.observability.audit import audit_fields

CAPABILITIES_HEADER = "delta-sharing-capabilities"
VERSION_HEADER = "Delta-Table-Version"

logger = logging.getLogger("sharing_server")


def json_response(payload: dict[str, Any]) -> Response:
    # One line: the Python client reads list responses with json.loads(next(lines)).
    return Response(dumps(payload), media_type=None, headers={"Content-Type": JSON})


def _table_key(table: SharedTable) -> tuple[str, str]:
    """A table's place in the store's order, as a page token carries it."""
    return table.schema.lower(), table.name.lower()


def _table_item(
    table: SharedTable, share: Share, url_share: str, url_schema: str | None = None
) -> dict[str, Any]:
    # Like the reference, echo the share (and schema) as the URL spelled them.
    return {
        "name": table.name,
        "schema": url_schema or table.schema,
        "share": url_share,
        "shareId": share.id,
        "id": table.id,
    }


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
class _Opening:
    """A table response's first chunks, made in a worker thread before its headers go out."""

    result: TableResponse
    first: list[bytes]
    #: The chunks after `first`; None when `first` holds the whole response.
    rest: Iterator[bytes] | None


# The first chunk's size at most (`ndjson_chunks`): it comes quickly, and carries most errors.
FIRST_CHUNK_BYTES = 64 * 1024


def _open(request: Request, result: TableResponse, chunk_bytes: int) -> _Opening:
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
    return _Opening(result, first, None if ended else chunks)


def _take_first(chunks: Iterator[bytes], full: int) -> tuple[list[bytes], bool]:
    """The first chunk, and whether it is the last: only the last of `ndjson_chunks` is under `full`
    bytes, so a short one is followed by the chunks' end (asked for, not assumed)."""
    group = []
    for chunk in chunks:
        group.append(chunk)
        if len(chunk) >= full:
            return group, False
    return group, True


def _stream(
    opening: _Opening, watch: DisconnectWatch | None = None, stream: Stream | None = None
) -> Response:
    """The response `opening` starts; `stream`, if given, is closed when the response ends, however
    it ends."""
    result = opening.result
    capabilities = f"responseformat={result.response_format}"
    if result.echo_end_stream_action:
        capabilities += ";includeendstreamaction=true"
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


class ProtocolEndpoints:
    def __init__(
        self,
        store: ShareStore,
        queries: TableQueries,
        streams: StreamSlots,
        list_tokens: TokenCodec,
        stream_buffer_bytes: int,
    ) -> None:
        self.store = store
        self.queries = queries
        self.streams = streams
        self.list_tokens = list_tokens
        self.stream_buffer_bytes = stream_buffer_bytes

    async def list_shares(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            store = self.store
            token = authenticate(store, request)
            page = list_page(self.list_tokens, request, "shares")
            if token.recipient_id is not None:  # a named recipient's token: every share granted to it
                shares = store.granted_shares(token.recipient_id, page.after, page.fetch)
            else:
                found = store.get_share_by_id(token.share_id)
                shares = [found] if found and (page.after is None or found.name.lower() > page.after) else []
            return page_body(
                self.list_tokens,
                page,
                shares,
                lambda s: s.name.lower(),
                lambda s: {"name": s.name, "id": s.id},
            )

        return json_response(await run_in_threadpool(run))

    async def get_share(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            _, share = authorize_share(self.store, request)
            return {"share": {"name": share.name, "id": share.id}}

        return json_response(await run_in_threadpool(run))

    async def list_schemas(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            store = self.store
            _, share = authorize_share(store, request)
            url_share = request.path_params["share"]
            page = list_page(self.list_tokens, request, f"schemas:{share.id}")
            schemas = store.schemas_page(share, page.after, page.fetch)
            return page_body(
                self.list_tokens, page, schemas, lambda s: s[0], lambda s: {"name": s[1], "share": url_share}
            )

        return json_response(await run_in_threadpool(run))

    async def list_tables(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            store = self.store
            _, share = authorize_share(store, request)
            url_share, schema = request.path_params["share"], request.path_params["schema"]
            page = list_page(self.list_tokens, request, f"tables:{share.id}:{schema.lower()}")
            tables = store.tables_page(share, schema, page.after, page.fetch)
            return page_body(
                self.list_tokens, page, tables, _table_key, lambda t: _table_item(t, share, url_share, schema)
            )

        return json_response(await run_in_threadpool(run))

    async def list_all_tables(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            store = self.store
            _, share = authorize_share(store, request)
            url_share = request.path_params["share"]
            page = list_page(self.list_tokens, request, f"all-tables:{share.id}")
            tables = store.tables_page(share, None, page.after, page.fetch)
            return page_body(
                self.list_tokens,
                page,
                tables,
                _table_key,
                partial(_table_item, share=share, url_share=url_share),
            )

        return json_response(await run_in_threadpool(run))

    def _authorized(self, request: Request) -> tuple[Token, SharedTable]:
        token, table = authorize_table(self.store, request)
        audit_fields(request).update(schema=table.schema, table=table.name)
        return token, table

    def _authorized_table(self, request: Request) -> SharedTable:
        return self._authorized(request)[1]

    async def table_version(self, request: Request) -> Response:
        def run() -> int:
            table = self._authorized_table(request)
            return self.queries.table_version(table, request.query_params.get("startingTimestamp"))

        version = await run_in_threadpool(run)
        audit_fields(request)["version"] = version
        return Response(status_code=200, headers={VERSION_HEADER: str(version)})

    async def _listing(
        self, request: Request, run: Callable[[Stream], TableResponse], watch: DisconnectWatch | None = None
    ) -> Response:
        """A file listing's response, made by `run`, which opens `stream` once it knows the token."""
        stream = self.streams.stream()

        def opening() -> _Opening:
            return _open(request, run(stream), self.stream_buffer_bytes)

        try:
            return _stream(await run_in_threadpool(opening), watch, stream)
        except BaseException:
            stream.close()
            if watch is not None:
                watch.stop()
            raise

    async def table_metadata(self, request: Request) -> Response:
        def run() -> _Opening:
            table = self._authorized_table(request)
            capabilities = Capabilities.parse(request.headers.get(CAPABILITIES_HEADER))
            params = request.query_params
            version, timestamp = params.get("version"), params.get("timestamp")
            result = self.queries.metadata(table, capabilities, version, timestamp)
            return _open(request, result, self.stream_buffer_bytes)

        return _stream(await run_in_threadpool(run))

    def _listing_context(
        self, request: Request, stream: Stream
    ) -> tuple[SharedTable, Capabilities, str | None]:
        """The authorized table and the headers every file listing takes; its stream opened for its token.

        Opened before any table work: a stream over a cap is refused at once.
        """
        token, table = self._authorized(request)
        stream.open(token.id)
        capabilities = Capabilities.parse(request.headers.get(CAPABILITIES_HEADER))
        return table, capabilities, parse_file_id_hash(request.headers.get("fileidhash"))

    async def table_query(self, request: Request) -> Response:
        body = await request.body()
        # A hint may keep a worker thread busy: it stops when the client hangs up.
        watch = DisconnectWatch(request.receive)

        def run(stream: Stream) -> TableResponse:
            table, capabilities, file_id_hash = self._listing_context(request, stream)
            query = QueryRequest.parse(body)
            return self.queries.query(table, query, capabilities, file_id_hash, watch.gone)

        return await self._listing(request, run, watch)

    async def table_changes(self, request: Request) -> Response:
        def run(stream: Stream) -> TableResponse:
            table, capabilities, file_id_hash = self._listing_context(request, stream)
            changes = ChangesRequest.parse(dict(request.query_params))
            return self.queries.changes(table, changes, capabilities, file_id_hash)

        return await self._listing(request, run)
