"""Table reads for the protocol's endpoints: `/version`, `/metadata`, `/query` and `/changes`.

Each endpoint method resolves the table's reader once, picks the snapshot or
range of versions the request names, and returns the lines of its response
ready to stream. Which table format answers lives in `share_store.tables.readers`,
Delta's change-feed rules in `share_store.tables.changes`, paging in
`sharing_server.protocol.paging`; this module speaks the protocol's request vocabulary
(response formats, time travel, refresh tokens) and joins them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.model import SharedTable
from share_store.signing.token_codec import TokenCodec
from share_store.tables import actions
from share_store.tables.changes import (
    CommitAt,
    changed_paths,
    check_cdf_recorded,
    commit_times,
    first_with_vectors,
    version_changes,
)
from share_store.tables.commits import first_version_at_or_after, version_at
from share_store.tables.compiled_hints import compile_hint
from share_store.tables.predicates import parse_hint
from share_store.tables.reader import TableReader, VersionListing
from share_store.tables.readers import TableReaders
from share_store.tables.snapshot import TableSnapshot
from sharing_server.protocol.capabilities import Capabilities
from sharing_server.protocol.encoding import LineEncoder
from sharing_server.protocol.hint_filter import HintFilter, HintLimits
from sharing_server.protocol.paging import Line, PageOf, Pager, Paging, decode_token
from sharing_server.protocol.requests import ChangesRequest, QueryRequest, parse_timestamp

REFRESH_TOKEN_TTL_MS = 3600 * 1000


@dataclass(frozen=True)
class TableResponse:
    """A response ready to stream: its version header, format and lines."""

    version: int
    response_format: str
    lines: Iterator[Line]
    echo_end_stream_action: bool = False
    file_id_hash: str | None = None  # echoed in the response's `fileidhash` header
    #: The bytes of the data files the lines handed out, once they are made.
    file_bytes: Callable[[], int] | None = None
    #: Whether the lines after the first chunk are made from memory alone: no storage
    #: read, no predicate hint to evaluate (which may take its whole time budget).
    from_memory: bool = False
    #: Whether the lines come in record batches' blocks (a streamed snapshot's, see
    #: `streamed_lines`), which hold several chunks' worth at a time anyway.
    in_blocks: bool = False


@dataclass(frozen=True)
class _Page:
    """The page of a file listing a request asks for, as the response tail needs it."""

    table_id: str
    checksum: str  # of the parameters that shape the file list; page tokens pin it
    max_files: int | None
    capabilities: Capabilities
    file_id_hash: str | None
    now_ms: int
    paging: Paging

    @property
    def resumed(self) -> dict[str, Any] | None:
        """The page token's payload when this page resumes an earlier one."""
        return self.paging.token_payload


def _history_required(table: SharedTable) -> None:
    if not table.history_shared:
        raise InvalidParameter(
            "Reading table by version or timestamp is not supported because history sharing "
            f"is not enabled on table: {table.full_name}"
        )


def _check_readable(snapshot: TableSnapshot, response_format: str, capabilities: Capabilities) -> None:
    if response_format == "parquet":
        actions.check_parquet_readable(snapshot)
    else:
        actions.check_delta_readable(snapshot, capabilities.reader_features)


def _in_format(
    reader: TableReader, snapshot: TableSnapshot, capabilities: Capabilities, prefer_delta: bool = False
) -> tuple[TableSnapshot, str]:
    """The format to answer in, and the snapshot as that format carries it (checked readable).

    With `prefer_delta` (see `Capabilities.response_format`), only for snapshots the
    delta format may carry: some Iceberg snapshots cannot be, and get parquet as before.
    """
    prefer = prefer_delta and "delta" not in snapshot.refusals
    response_format = capabilities.response_format(snapshot.min_reader_version, prefer)
    if response_format == "parquet":
        snapshot = reader.for_parquet(snapshot)
    _check_readable(snapshot, response_format, capabilities)
    return snapshot, response_format


def _commit_lookup(reader: TableReader, listing: VersionListing, response_format: str) -> CommitAt:
    """Each version's actions as the response format carries them."""
    if response_format == "parquet":
        return partial(reader.parquet_commit, listing)
    return partial(reader.commit, listing)


def _check_vectors(
    table: SharedTable,
    reader: TableReader,
    listing: VersionListing,
    commit_at: CommitAt,
    response_format: str,
    start: int,
    end: int,
    *,
    use_cdc: bool,
) -> None:
    """Refuse, before the response starts, a parquet read of changes that delete rows by vector."""
    if response_format != "parquet":
        return
    # A Delta table whose protocol never allowed vectors has none: its commits need no reading here.
    if not table.is_iceberg and "deletionVectors" not in reader.snapshot(end, listing).reader_features:
        return
    version = first_with_vectors(commit_at, start, end, use_cdc=use_cdc)
    if version is not None:
        raise UnsupportedOperation(
            f"Version {version} of the table deletes rows with deletion vectors, which the parquet "
            "format cannot carry. This table can only be read with responseformat=delta."
        )


def _encoder(
    table: SharedTable, reader: TableReader, response_format: str, file_id_hash: str | None = None
) -> LineEncoder:
    """The response's line encoder: it signs with `reader`, as of now."""
    return LineEncoder(response_format, reader, time.time(), file_id_hash, table.history_shared)


def _resolve(
    reader: TableReader, table: SharedTable, version: int | None, timestamp: str | None
) -> TableSnapshot:
    """The snapshot a request names by version or timestamp, or the latest."""
    if version is None and timestamp is None:
        return reader.snapshot()
    _history_required(table)
    listing = reader.listing()
    if timestamp is not None:
        moment = parse_timestamp(timestamp)
        commits = reader.commits(listing, reader.snapshot(listing=listing))
        version = version_at(commits, moment, timestamp)
    return reader.snapshot(version, listing)


def _parse_version(version: str) -> int:
    try:
        number = int(version)
    except ValueError:
        raise InvalidParameter(
            "expected a number but the string didn't have the appropriate format"
        ) from None
    if number < 0:
        raise InvalidParameter("version cannot be negative.")
    return number


class TableQueries:
    def __init__(
        self,
        readers: TableReaders,
        secret: bytes,
        hint_limits: HintLimits | None = None,
        prefer_delta: bool = False,
    ) -> None:
        self.readers = readers
        #: Answer delta to clients that list it first, even for reader-version-1 tables.
        self.prefer_delta = prefer_delta
        self.pager = Pager(secret)
        self.refresh_tokens = TokenCodec(secret, "query-refresh")
        self.hint_limits = hint_limits or HintLimits()

    # -- /version -------------------------------------------------------------------

    def table_version(self, table: SharedTable, starting_timestamp: str | None) -> int:
        reader = self.readers.reader(table)
        listing = reader.listing()
        if starting_timestamp is None:
            return listing.latest_version
        _history_required(table)
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
        number = _parse_version(version) if version is not None else None
        reader = self.readers.reader(table)
        # The latest version's head lines need no files: a restarted server answers them from
        # the version's persisted summary, without replaying the log.
        named = reader.head() if number is None and timestamp is None else None
        snapshot, response_format = _in_format(
            reader, named or _resolve(reader, table, number, timestamp), capabilities, self.prefer_delta
        )
        encoder = _encoder(table, reader, response_format)
        lines = [encoder.protocol(snapshot), encoder.metadata(snapshot)]
        return TableResponse(snapshot.version, response_format, iter(lines))

    # -- /query ---------------------------------------------------------------------------

    def query(
        self,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        gone: threading.Event | None = None,
    ) -> TableResponse:
        """A snapshot's files, or a streaming read's changes; `gone` is set if the client disconnects."""
        reader = self.readers.reader(table)
        if request.starting_version is not None:
            return self._streaming_query(table, reader, request, capabilities, file_id_hash)
        # Before any table work, so that a hint over the node cap costs next to nothing.
        started = time.thread_time()
        text = request.json_predicate_hints
        hint = parse_hint(text, self.hint_limits.max_nodes) if text else None
        parsing = time.thread_time() - started
        page = self._page(table, request, capabilities, file_id_hash)
        now_ms = page.now_ms
        pinned = page.resumed["v"] if page.resumed else None
        if request.refresh_token:
            refresh = decode_token(
                self.refresh_tokens, request.refresh_token, "refresh token", table.id, now_ms
            )
            pinned = int(refresh["v"])
        if pinned is not None:
            snapshot = reader.snapshot(int(pinned))
        else:
            snapshot = _resolve(reader, table, request.version, request.timestamp)  # checks history sharing
        snapshot, response_format = _in_format(reader, snapshot, capabilities, self.prefer_delta)
        encoder = _encoder(table, reader, response_format, file_id_hash)
        # Head lines keep describing the whole snapshot; only the files are planned.
        files_of = snapshot if hint is None else reader.planned(snapshot, hint)
        if response_format == "parquet" and files_of is not snapshot:
            files_of = reader.for_parquet(files_of)
        hint_filter = None
        if hint is not None:
            budget = self.hint_limits.budget_seconds(snapshot.num_files)
            hint_filter = _hint_filter(hint, files_of, budget, parsing, page.resumed, gone)
        reader.check_files_exist(files_of, with_dvs=response_format == "delta")

        time_travel = request.version is not None or request.timestamp is not None
        file_version = snapshot.version if time_travel else None
        # Without a hint or a limit every file goes: no entry need be made for it.
        selected = (
            None
            if hint_filter is None and request.limit_hint is None
            else _selected(files_of, hint_filter, request.limit_hint)
        )
        cut = None
        if page.paging.size is not None or page.paging.offset:
            # Cut to the page before encoding: earlier pages' files are neither signed nor counted.
            entries = selected if selected is not None else actions.entries(files_of)
            cut = PageOf(entries, page.paging.offset, page.paging.size)
            selected = iter(cut)
        files = encoder.snapshot_files(files_of, selected, version=file_version)

        def refresh_fields() -> dict[str, Any]:
            if request.include_refresh_token or request.refresh_token:
                token = {"t": table.id, "v": snapshot.version, "e": now_ms + REFRESH_TOKEN_TTL_MS}
                return {"refreshToken": self.refresh_tokens.encode(token)}
            return {}

        head = [encoder.protocol(snapshot), encoder.metadata(snapshot)]
        response = self._respond(
            page, snapshot.version, encoder, head, files, {"v": snapshot.version},
            wants_end=request.include_refresh_token, end_fields=refresh_fields,
            later_state=hint_filter.page_state if hint_filter else None, cut=cut,
        )  # fmt: skip
        # A held snapshot's files are in memory: listing them reads nothing (a streamed
        # one reads its checkpoint batch by batch).
        return dataclasses.replace(
            response,
            from_memory=hint is None and not files_of.streamed,
            in_blocks=selected is None and files_of.streamed,
        )

    # -- streaming: /query with startingVersion ------------------------------------------------

    def _streaming_query(
        self,
        table: SharedTable,
        reader: TableReader,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
    ) -> TableResponse:
        _history_required(table)
        page = self._page(table, request, capabilities, file_id_hash)
        listing = reader.listing()
        latest = int(page.resumed["l"]) if page.resumed else listing.latest_version
        start = request.starting_version
        assert start is not None
        end = request.ending_version if request.ending_version is not None else latest
        if start > latest:
            raise InvalidParameter(
                f"Provided Start version({start}) for reading change data is invalid. Start version "
                f"cannot be greater than the latest version of the table({latest})."
            )
        if end > latest:
            raise InvalidParameter(
                f"Provided end version({end}) is invalid. End version cannot be greater than the "
                f"latest version of the table({latest})."
            )
        snapshot, response_format = _in_format(
            reader, reader.snapshot(start, listing), capabilities, self.prefer_delta
        )
        encoder = _encoder(table, reader, response_format, file_id_hash)
        commit_at = _commit_lookup(reader, listing, response_format)
        _check_vectors(table, reader, listing, commit_at, response_format, start, end, use_cdc=False)
        changes = self._change_lines(
            reader, listing, commit_at, encoder, capabilities, start, end, use_cdc=False,
            include_metadata=True, include_protocol=request.include_historical_protocol,
        )  # fmt: skip
        head = [encoder.protocol(snapshot), encoder.metadata(snapshot, version=start)]
        return self._respond(page, start, encoder, head, changes, {"l": latest})

    # -- /changes -------------------------------------------------------------------------------

    def changes(
        self,
        table: SharedTable,
        request: ChangesRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
    ) -> TableResponse:
        if not table.history_shared:
            raise InvalidParameter(f"cdf is not enabled on table {table.full_name}")
        page = self._page(table, request, capabilities, file_id_hash)
        reader = self.readers.reader(table)
        listing = reader.listing()
        latest_version = int(page.resumed["l"]) if page.resumed else listing.latest_version
        latest = reader.snapshot(latest_version, listing)
        start, end = self._change_range(reader, listing, latest, request)
        start_snapshot = reader.snapshot(start, listing)
        check_cdf_recorded(start_snapshot, partial(reader.commit, listing), start, end)
        head_snapshot = start_snapshot if request.include_historical_metadata else latest
        head_snapshot, response_format = _in_format(reader, head_snapshot, capabilities, self.prefer_delta)
        encoder = _encoder(table, reader, response_format, file_id_hash)
        commit_at = _commit_lookup(reader, listing, response_format)
        _check_vectors(table, reader, listing, commit_at, response_format, start, end, use_cdc=True)
        # Vacuumed change or data files make the whole range unreadable: say so up front.
        paths = changed_paths(commit_at, start, end)
        reader.check_exist([reader.locate(path) for path in paths])
        changes = self._change_lines(
            reader, listing, commit_at, encoder, capabilities, start, end, use_cdc=True,
            include_metadata=request.include_historical_metadata,
            include_protocol=request.include_historical_protocol,
        )  # fmt: skip
        head = [
            encoder.protocol(head_snapshot),
            encoder.metadata(head_snapshot, version=head_snapshot.version),
        ]
        return self._respond(page, start, encoder, head, changes, {"l": latest_version})

    @staticmethod
    def _change_range(
        reader: TableReader, listing: VersionListing, latest: TableSnapshot, request: ChangesRequest
    ) -> tuple[int, int]:
        """The versions a `/changes` request names, by version or timestamp, within the log."""
        commits = reader.commits(listing, latest)
        if request.starting_timestamp is not None:
            moment = parse_timestamp(request.starting_timestamp)
            start = first_version_at_or_after(commits, moment, request.starting_timestamp)
        else:
            start = request.starting_version or 0
        if request.ending_timestamp is not None:
            moment = parse_timestamp(request.ending_timestamp, "endingTimestamp")
            end = version_at(commits, moment, request.ending_timestamp)
        else:
            end = request.ending_version if request.ending_version is not None else latest.version
        if start > latest.version:
            raise InvalidParameter(
                f"Provided Start version({start}) for reading change data is invalid. Start version "
                f"cannot be greater than the latest version of the table({latest.version})."
            )
        end = min(end, latest.version)
        if end < start:
            raise InvalidParameter(
                f"CDF range from start {start} to end {end} was invalid. End cannot be before start."
            )
        return start, end

    # -- the parts every file listing shares ------------------------------------------------

    @staticmethod
    def _change_lines(
        reader: TableReader,
        listing: VersionListing,
        commit_at: CommitAt,
        encoder: LineEncoder,
        capabilities: Capabilities,
        start: int,
        end: int,
        *,
        use_cdc: bool,
        include_metadata: bool,
        include_protocol: bool,
    ) -> Iterator[Line]:
        """The encoded changes of versions `start` to `end`, made lazily as the response streams."""
        commits = reader.commits(listing, reader.snapshot(end, listing))
        times = commit_times(commits, start, end)
        changes = version_changes(
            commit_at,
            lambda version: reader.snapshot(version, listing),
            start,
            end,
            times,
            use_cdc=use_cdc,
            include_metadata=include_metadata,
            # The parquet format has no way to express protocol changes.
            include_protocol=include_protocol and encoder.format == "delta",
            check=lambda snapshot: _check_readable(
                reader.for_parquet(snapshot) if encoder.format == "parquet" else snapshot,
                encoder.format,
                capabilities,
            ),
        )
        return map(encoder.change, changes)

    def _page(
        self,
        table: SharedTable,
        request: QueryRequest | ChangesRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
    ) -> _Page:
        """The page a file listing asks for, its page token (if any) checked."""
        now_ms = int(time.time() * 1000)
        checksum = request.checksum()
        paging = self.pager.start(table.id, request.page_token, checksum, request.max_files, now_ms)
        return _Page(table.id, checksum, request.max_files, capabilities, file_id_hash, now_ms, paging)

    def _respond(
        self,
        page: _Page,
        version: int,
        encoder: LineEncoder,
        head: Sequence[Line],
        body: Iterator[Line],
        pinned: dict[str, Any],
        wants_end: bool = False,
        end_fields: Callable[[], dict[str, Any]] | None = None,
        later_state: Callable[[], dict[str, Any]] | None = None,
        cut: PageOf[Any] | None = None,
    ) -> TableResponse:
        """One page of `body` after `head`, ending with an endStreamAction when one is due.

        `pinned` is what later pages must keep reading at (a version, or the
        latest version of a range); it goes into the next page's token, with
        what `later_state` adds once the page is made. With `cut`, `body` is the
        page's lines alone (see `paging.PageOf`).
        """

        def all_end_fields() -> dict[str, Any]:
            fields = end_fields() if end_fields else {}
            if encoder.min_expiration is not None:
                fields["minUrlExpirationTimestamp"] = encoder.min_expiration
            return fields

        capabilities = page.capabilities
        ends = wants_end or capabilities.include_end_stream_action or page.max_files is not None
        page_state = {"t": page.table_id, **pinned, "c": page.checksum} if ends else None
        lines = self.pager.lines(
            head, body, page.paging, page_state, page.now_ms, all_end_fields, later_state, cut
        )
        return TableResponse(
            version,
            encoder.format,
            lines,
            capabilities.include_end_stream_action,
            page.file_id_hash,
            encoder.served_bytes,
        )


def _hint_filter(
    hint: dict[str, Any],
    files_of: TableSnapshot,
    budget: float | None,
    parsing: float,
    resumed: dict[str, Any] | None,
    gone: threading.Event | None,
) -> HintFilter:
    """The hint compiled for `files_of`; its budget covers parsing and compiling it too."""
    started = time.thread_time()
    check = compile_hint(hint, files_of.partition_columns, actions.physical_names(files_of))
    spent = parsing + time.thread_time() - started
    return HintFilter(check, budget, resumed, gone, spent)


def _selected(
    snapshot: TableSnapshot, hint: HintFilter | None, limit: int | None
) -> Iterator[actions.FileEntry]:
    """Files left after predicate hints, cut once `limitHint` rows are covered."""
    entries = actions.entries(snapshot)
    if hint is not None:
        entries = hint.apply(entries)
    records = 0
    for entry in entries:
        if limit is not None and records >= limit:
            return
        yield entry
        if limit is not None:
            # Files without stats count as zero rows: we keep listing rather
            # than risk returning fewer rows than asked for.
            records += max((entry.num_records or 0) - entry.deleted_rows, 0)
