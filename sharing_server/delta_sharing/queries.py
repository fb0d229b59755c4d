"""Table reads for the protocol's endpoints: `/version`, `/metadata`, `/query` and `/changes`.

Each endpoint method resolves the table's reader once, picks the snapshot or
range of versions the request names (`versions`), and returns the lines of its
response ready to stream (`responses`). A `/query`'s files are chosen in
`query_files`; reads of a range of versions are `change_queries`'. Which table
format answers lives behind the door, `share_store.tables`; this package speaks
the protocol's request vocabulary (response formats, time travel, refresh
tokens) and joins them.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime
from typing import Any

from share_store.errors import InvalidParameter
from share_store.model import SharedTable
from share_store.readers.table_readers import TableReaders
from share_store.signing.token_codec import TokenCodec
from share_store.signing.url_lifetimes import UrlLifetimes
from share_store.tables.commit_times import first_version_at_or_after
from share_store.tables.reader import TableReader
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing.capabilities import Capabilities
from sharing_server.delta_sharing.change_queries import ChangeQueries
from sharing_server.delta_sharing.hint_filter import HintLimits
from sharing_server.delta_sharing.paging import decode_token
from sharing_server.delta_sharing.query_files import parse_query_hint, query_files
from sharing_server.delta_sharing.requests import ChangesRequest, QueryRequest, parse_timestamp
from sharing_server.delta_sharing.responses import PageRequest, ResponsePages, TableResponse
from sharing_server.delta_sharing.versions import (
    history_required,
    in_format,
    parse_version,
    resolve,
)

REFRESH_TOKEN_TTL_MS = 3600 * 1000


class TableQueries:
    def __init__(
        self,
        readers: TableReaders,
        secret: bytes,
        hint_limits: HintLimits | None = None,
        prefer_delta: bool = False,
        lifetimes: UrlLifetimes | None = None,
    ) -> None:
        self.readers = readers
        #: How long an answer's URLs live (its size, its token's expiry).
        self.lifetimes = lifetimes or UrlLifetimes()
        #: Answer delta to clients that list it first, even for reader-version-1 tables.
        self.prefer_delta = prefer_delta
        self.pages = ResponsePages(secret)
        self.refresh_tokens = TokenCodec(secret, "query-refresh")
        self.hint_limits = hint_limits or HintLimits()
        self.ranges = ChangeQueries(readers, self.pages, prefer_delta, self.lifetimes)

    # -- /version -------------------------------------------------------------------

    def table_version(self, table: SharedTable, starting_timestamp: str | None) -> int:
        reader = self.readers.reader(table)
        listing = reader.listing()
        if starting_timestamp is None:
            return listing.latest_version
        history_required(table)
        moment = parse_timestamp(starting_timestamp)
        commits = reader.commits(listing, reader.snapshot(listing=listing))
        # Spec wording, not the reference's quirk: the earliest version committed
        # at or after the timestamp (the reference answers v+1 on an exact match).
        return first_version_at_or_after(commits, moment, starting_timestamp)

    # -- /metadata ----------------------------------------------------------------------

    def metadata(
        self, table: SharedTable, capabilities: Capabilities, version: str | None, timestamp: str | None
    ) -> TableResponse:
        if version is not None and timestamp is not None:
            raise InvalidParameter("Please only provide one of: version,timestamp")
        number = parse_version(version) if version is not None else None
        reader = self.readers.reader(table)
        # The latest version's head lines need no files: a restarted server answers them from
        # the version's persisted summary, without replaying the log.
        named = reader.head() if number is None and timestamp is None else None
        snapshot, encoder = in_format(
            reader, table, named or resolve(reader, table, number, timestamp), capabilities, self.prefer_delta
        )
        lines = [encoder.protocol(snapshot), encoder.metadata(snapshot)]
        return TableResponse(snapshot.version, encoder.format, iter(lines))

    # -- /query ---------------------------------------------------------------------------

    def query(
        self,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        gone: threading.Event | None = None,
        at_version: int | None = None,
        token_expires_at: datetime | None = None,
    ) -> TableResponse:
        """A snapshot's files, or a streaming read's changes; `gone` is set if the client disconnects.

        `at_version` is the version an async query of the latest snapshot pinned when it was made:
        read as the latest (no time-travel fields), whatever has been committed since.
        `token_expires_at` bounds the lifetime of the URLs the answer signs.
        """
        reader = self.readers.reader(table)
        if request.starting_version is not None:
            return self.ranges.streaming(table, reader, request, capabilities, file_id_hash, token_expires_at)
        # Before any table work, so that a hint over the node cap costs next to nothing.
        hint = parse_query_hint(request.json_predicate_hints, self.hint_limits.max_nodes)
        page = self.pages.start(table.id, request, capabilities, file_id_hash)
        pinned = self._snapshot(reader, table, request, page, at_version)
        snapshot, encoder = in_format(reader, table, pinned, capabilities, self.prefer_delta, file_id_hash)
        # The snapshot's count bounds the answer's (a hint or a restriction may hand out fewer).
        encoder.url_lifetime = self.lifetimes.for_answer(snapshot.num_files, token_expires_at, encoder.now)
        files = query_files(
            reader, snapshot, encoder.format, hint, self.hint_limits, page, request.limit_hint, gone
        )
        time_travel = request.version is not None or request.timestamp is not None
        lines = encoder.snapshot_files(
            files.files_of, files.selected, version=snapshot.version if time_travel else None
        )
        head = [encoder.protocol(snapshot), encoder.metadata(snapshot)]

        def refresh_fields() -> dict[str, Any]:
            return self._refresh_fields(table, request, snapshot.version, page.now_ms)

        later_state = files.hint_filter.page_state if files.hint_filter else None
        response = self.pages.respond(
            page, snapshot.version, encoder, head, lines, {"v": snapshot.version},
            wants_end=request.include_refresh_token, end_fields=refresh_fields,
            later_state=later_state, cut=files.cut,
        )  # fmt: skip
        # A held snapshot's files are in memory: listing them reads nothing (a streamed
        # one reads its checkpoint batch by batch).
        streamed = files.files_of.streamed
        return dataclasses.replace(
            response,
            from_memory=hint is None and not streamed,
            in_blocks=files.selected is None and streamed,
        )

    def _snapshot(
        self,
        reader: TableReader,
        table: SharedTable,
        request: QueryRequest,
        page: PageRequest,
        at_version: int | None = None,
    ) -> TableSnapshot:
        """The version a `/query` reads: pinned by its page or refresh token, or by its async query
        (`at_version`), else the one it names."""
        pinned = page.resumed["v"] if page.resumed else at_version
        if request.refresh_token:
            refresh = decode_token(
                self.refresh_tokens, request.refresh_token, "refresh token", table.id, page.now_ms
            )
            pinned = int(refresh["v"])
        if pinned is not None:
            return reader.snapshot(int(pinned))
        return resolve(reader, table, request.version, request.timestamp)  # checks history sharing

    def _refresh_fields(
        self, table: SharedTable, request: QueryRequest, version: int, now_ms: int
    ) -> dict[str, Any]:
        """The `refreshToken` of the response's end, when the request asked for one."""
        if request.include_refresh_token or request.refresh_token:
            token = {"t": table.id, "v": version, "e": now_ms + REFRESH_TOKEN_TTL_MS}
            return {"refreshToken": self.refresh_tokens.encode(token)}
        return {}

    # -- /changes -------------------------------------------------------------------------------

    def changes(
        self,
        table: SharedTable,
        request: ChangesRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        token_expires_at: datetime | None = None,
    ) -> TableResponse:
        return self.ranges.changes(table, request, capabilities, file_id_hash, token_expires_at)
