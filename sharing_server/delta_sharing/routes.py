"""HTTP handlers of the Delta Sharing REST protocol: parse, call, encode.

`ProtocolEndpoints` is given what its handlers use (the store, the queries, the
stream slots, the list pages' token codec) when the routes are made
(`protocol_routes`); nothing is looked up per request. How a table response
streams (first chunk, stream slot, disconnects) is `table_streams.py`."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from share_store.model import Share, SharedTable, Token
from share_store.persistence import ShareStore
from share_store.readers.directory_access import DirectoryAccess
from share_store.signing.token_codec import TokenCodec
from sharing_server.auth.bearer import authenticate, authorize_share, authorize_table
from sharing_server.delta_sharing.async_queries import AsyncQueries
from sharing_server.delta_sharing.capabilities import Capabilities, parse_file_id_hash
from sharing_server.delta_sharing.list_pages import list_page, page_body
from sharing_server.delta_sharing.queries import TableQueries
from sharing_server.delta_sharing.requests import ChangesRequest, QueryInfoRequest, QueryRequest
from sharing_server.delta_sharing.responses import TableResponse
from sharing_server.delta_sharing.share_items import share_item
from sharing_server.delta_sharing.table_credentials import table_item
from sharing_server.delta_sharing.table_streams import (
    CAPABILITIES_HEADER,
    VERSION_HEADER,
    Opening,
    listing_stream,
    open_response,
    table_stream,
)
from sharing_server.http.disconnects import DisconnectWatch
from sharing_server.http.ndjson import JSON, dumps
from sharing_server.http.stream_slots import Stream, StreamSlots
from sharing_server.observability.audit import audit_fields


def json_response(payload: dict[str, Any]) -> Response:
    # One line: the Python client reads list responses with json.loads(next(lines)).
    return Response(dumps(payload), media_type=None, headers={"Content-Type": JSON})


def _table_key(table: SharedTable) -> tuple[str, str]:
    """A table's place in the store's order, as a page token carries it."""
    return table.schema.lower(), table.name.lower()


def _table_item(
    table: SharedTable,
    share: Share,
    url_share: str,
    url_schema: str | None = None,
    directory: DirectoryAccess | None = None,
) -> dict[str, Any]:
    # One item for the lists and get-table, with directory access's fields and `format`.
    return table_item(table, share, url_share, url_schema, directory)


class ProtocolEndpoints:
    def __init__(
        self,
        store: ShareStore,
        queries: TableQueries,
        streams: StreamSlots,
        list_tokens: TokenCodec,
        stream_buffer_bytes: int,
        async_queries: AsyncQueries,
        directory: DirectoryAccess | None = None,
    ) -> None:
        self.store = store
        self.queries = queries
        self.async_queries = async_queries
        self.streams = streams
        self.list_tokens = list_tokens
        self.stream_buffer_bytes = stream_buffer_bytes
        #: Which tables are read by folder too (`accessModes`), told in every table item.
        self.directory = directory

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
                share_item,
            )

        return json_response(await run_in_threadpool(run))

    async def get_share(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            _, share = authorize_share(self.store, request)
            return {"share": share_item(share)}

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
                self.list_tokens,
                page,
                tables,
                _table_key,
                lambda t: _table_item(t, share, url_share, schema, self.directory),
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
                partial(_table_item, share=share, url_share=url_share, directory=self.directory),
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
        return await listing_stream(request, self.streams, run, self.stream_buffer_bytes, watch)

    async def table_metadata(self, request: Request) -> Response:
        def run() -> Opening:
            table = self._authorized_table(request)
            capabilities = Capabilities.parse(request.headers.get(CAPABILITIES_HEADER))
            params = request.query_params
            version, timestamp = params.get("version"), params.get("timestamp")
            result = self.queries.metadata(table, capabilities, version, timestamp)
            return open_response(request, result, self.stream_buffer_bytes)

        return table_stream(await run_in_threadpool(run))

    def _listing_context(
        self, request: Request, stream: Stream
    ) -> tuple[Token, SharedTable, Capabilities, str | None]:
        """The token, its table and the headers every file listing takes; its stream opened for it.

        Opened before any table work: a stream over a cap is refused at once.
        """
        token, table = self._authorized(request)
        stream.open(token.id)
        capabilities = Capabilities.parse(request.headers.get(CAPABILITIES_HEADER))
        return token, table, capabilities, parse_file_id_hash(request.headers.get("fileidhash"))

    async def table_query(self, request: Request) -> Response:
        body = await request.body()
        # A hint may keep a worker thread busy: it stops when the client hangs up.
        watch = DisconnectWatch(request.receive)

        def run(stream: Stream) -> TableResponse:
            token, table, capabilities, file_id_hash = self._listing_context(request, stream)
            query = QueryRequest.parse(body)
            if capabilities.async_query:
                return self.async_queries.submit(token, table, query, capabilities, file_id_hash)
            return self.queries.query(
                table, query, capabilities, file_id_hash, watch.gone, token_expires_at=token.expires_at
            )

        return await self._listing(request, run, watch)

    async def query_info(self, request: Request) -> Response:
        """An async query's poll: its lines once its work is done, else its status."""
        body = await request.body()

        def run(stream: Stream) -> TableResponse:
            token, table, _, _ = self._listing_context(request, stream)
            page = QueryInfoRequest.parse(body)
            query_id = request.path_params["query_id"]
            return self.async_queries.poll(token, table, query_id, page.max_files, page.page_token)

        return await self._listing(request, run)

    async def table_changes(self, request: Request) -> Response:
        def run(stream: Stream) -> TableResponse:
            token, table, capabilities, file_id_hash = self._listing_context(request, stream)
            changes = ChangesRequest.parse(dict(request.query_params))
            return self.queries.changes(table, changes, capabilities, file_id_hash, token.expires_at)

        return await self._listing(request, run)
