"""Table reads for the protocol: version resolution, snapshots, streaming, changes.

Kept apart from the HTTP handlers so that each step is a plain method, and
apart from `share_store` because it speaks the protocol's request vocabulary
(response formats, page tokens, refresh tokens).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from share_store.delta import actions
from share_store.delta.log import Commit, first_version_at_or_after, version_at
from share_store.delta.predicates import parse_hint
from share_store.delta.replay import LogListing
from share_store.delta.snapshot import DeltaSnapshot, DeltaTableReader, cdf_enabled
from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.iceberg.catalogs import CatalogRegistry
from share_store.iceberg.table import IcebergTableReader, VersionStore
from share_store.model import SharedTable
from share_store.storage.base import ObjectStorage
from sharing_server.encoding import LineEncoder
from sharing_server.page_tokens import TokenCodec
from sharing_server.protocol import (
    MAX_PAGE_FILES,
    Capabilities,
    ChangesRequest,
    QueryRequest,
    parse_timestamp,
)

PAGE_TOKEN_TTL_MS = 3 * 24 * 3600 * 1000
REFRESH_TOKEN_TTL_MS = 3600 * 1000

Line = dict[str, Any]


@dataclass(frozen=True)
class TableResponse:
    """A response ready to stream: its version header, format and lines."""

    version: int
    response_format: str
    lines: Iterator[Line]
    echo_end_stream_action: bool = False
    file_id_hash: str | None = None  # echoed in the response's `fileidhash` header


def _history_required(table: SharedTable) -> None:
    if not table.history_shared:
        raise InvalidParameter(
            "Reading table by version or timestamp is not supported because history sharing "
            f"is not enabled on table: {table.full_name}"
        )


@dataclass
class Paging:
    """Where a page starts and how many lines after the header it may hold."""

    offset: int = 0
    size: int | None = None
    token_payload: dict[str, Any] | None = None


TableReader = DeltaTableReader | IcebergTableReader


class TableQueries:
    def __init__(
        self,
        storage: ObjectStorage,
        secret: bytes,
        catalogs: CatalogRegistry | None = None,
        versions: VersionStore | None = None,
    ) -> None:
        self.storage = storage
        self.catalogs = catalogs or CatalogRegistry({})
        self.versions = versions
        self.page_tokens = TokenCodec(secret, "query-page")
        self.refresh_tokens = TokenCodec(secret, "query-refresh")
        self._readers: dict[tuple[str, str, str], TableReader] = {}
        self._lock = threading.Lock()

    def reader(self, table: SharedTable) -> TableReader:
        key = (table.id, table.bucket, table.path)
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                if table.is_iceberg:
                    if self.versions is None:
                        raise UnsupportedOperation("Iceberg tables need a share store for their versions")
                    reader = IcebergTableReader(table, self.catalogs, self.versions, self.storage)
                else:
                    reader = DeltaTableReader(self.storage, table.bucket, table.path)
                self._readers[key] = reader
            return reader

    def _encoder(
        self, table: SharedTable, response_format: str, file_id_hash: str | None = None
    ) -> LineEncoder:
        return LineEncoder(
            response_format, self.reader(table), time.time(), file_id_hash, table.history_shared
        )

    @staticmethod
    def _format(snapshot: DeltaSnapshot, capabilities: Capabilities) -> str:
        response_format = capabilities.response_format(snapshot.min_reader_version)
        if response_format == "parquet":
            actions.check_parquet_readable(snapshot)
        else:
            actions.check_delta_readable(snapshot, capabilities.reader_features)
        return response_format

    # -- /version -------------------------------------------------------------------

    def table_version(self, table: SharedTable, starting_timestamp: str | None) -> int:
        reader = self.reader(table)
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
        number = None
        if version is not None:
            try:
                number = int(version)
            except ValueError:
                raise InvalidParameter(
                    "expected a number but the string didn't have the appropriate format"
                ) from None
            if number < 0:
                raise InvalidParameter("version cannot be negative.")
        snapshot = self._resolve(table, number, timestamp)
        response_format = self._format(snapshot, capabilities)
        encoder = self._encoder(table, response_format)
        lines = [encoder.protocol(snapshot), encoder.metadata(snapshot)]
        return TableResponse(snapshot.version, response_format, iter(lines))

    # -- /query ---------------------------------------------------------------------------

    def query(
        self, table: SharedTable, request: QueryRequest, capabilities: Capabilities, file_id_hash: str | None
    ) -> TableResponse:
        if request.starting_version is not None:
            return self._streaming_query(table, request, capabilities, file_id_hash)
        now_ms = int(time.time() * 1000)
        paging = self._paging(table, request.page_token, request.checksum(), request.max_files, now_ms)
        pinned = paging.token_payload["v"] if paging.token_payload else None
        if request.refresh_token:
            refresh = self._decode(self.refresh_tokens, request.refresh_token, "refresh token", table, now_ms)
            pinned = int(refresh["v"])
        if pinned is not None:
            snapshot = self.reader(table).snapshot(int(pinned))
        else:
            snapshot = self._resolve(table, request.version, request.timestamp)  # checks history sharing
        response_format = self._format(snapshot, capabilities)
        encoder = self._encoder(table, response_format, file_id_hash)
        reader = self.reader(table)
        files_of = snapshot
        hint = parse_hint(request.json_predicate_hints) if request.json_predicate_hints else None
        if hint is not None and isinstance(reader, IcebergTableReader):
            # Iceberg prunes manifests and files while planning; the generic evaluation
            # runs on what is left. Head lines keep describing the whole snapshot.
            files_of = reader.snapshot(snapshot.version, hint=hint)
        reader.check_files_exist(files_of, with_dvs=response_format == "delta")

        time_travel = request.version is not None or request.timestamp is not None
        file_version = snapshot.version if time_travel else None

        def files() -> Iterator[Line]:
            for entry in self._selected(files_of, request):
                yield encoder.entry_file("add", entry, version=file_version)

        def end_extras() -> dict[str, Any]:
            if request.include_refresh_token or request.refresh_token:
                token = {"t": table.id, "v": snapshot.version, "e": now_ms + REFRESH_TOKEN_TTL_MS}
                return {"refreshToken": self.refresh_tokens.encode(token)}
            return {}

        head = [encoder.protocol(snapshot), encoder.metadata(snapshot)]
        wants_end = (
            capabilities.include_end_stream_action
            or request.include_refresh_token
            or request.max_files is not None
        )
        page_state = {"t": table.id, "v": snapshot.version, "c": request.checksum()}
        lines = self._paged(head, files(), paging, wants_end, encoder, page_state, now_ms, end_extras)
        return TableResponse(
            snapshot.version, response_format, lines, capabilities.include_end_stream_action, file_id_hash
        )

    def _selected(self, snapshot: DeltaSnapshot, request: QueryRequest) -> Iterator[actions.FileEntry]:
        """Files left after predicate hints, cut once `limitHint` rows are covered."""
        hint = parse_hint(request.json_predicate_hints) if request.json_predicate_hints else None
        names = actions.physical_names(snapshot)
        limit = request.limit_hint
        records = 0
        for entry in actions.entries(snapshot):
            if limit is not None and records >= limit:
                return
            if not actions.matches_hint(hint, entry, names):
                continue
            yield entry
            if limit is not None:
                # Files without stats count as zero rows: we keep listing rather
                # than risk returning fewer rows than asked for.
                records += max((entry.num_records or 0) - entry.deleted_rows, 0)

    # -- streaming: /query with startingVersion ------------------------------------------------

    def _streaming_query(
        self, table: SharedTable, request: QueryRequest, capabilities: Capabilities, file_id_hash: str | None
    ) -> TableResponse:
        _history_required(table)
        now_ms = int(time.time() * 1000)
        reader = self.reader(table)
        listing = reader.listing()
        paging = self._paging(table, request.page_token, request.checksum(), request.max_files, now_ms)
        latest = int(paging.token_payload["l"]) if paging.token_payload else listing.latest_version
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
        snapshot = reader.snapshot(start, listing)
        response_format = self._format(snapshot, capabilities)
        encoder = self._encoder(table, response_format, file_id_hash)
        commits = self._commit_times(reader, listing, start, end)
        changes = self._version_lines(
            table, reader, listing, encoder, start, end, commits, include_metadata=True, use_cdc=False,
            parquet_check=response_format == "parquet", client_features=capabilities.reader_features,
            include_protocol=request.include_historical_protocol,
        )  # fmt: skip
        head = [encoder.protocol(snapshot), encoder.metadata(snapshot, version=start)]
        wants_end = capabilities.include_end_stream_action or request.max_files is not None
        page_state = {"t": table.id, "l": latest, "c": request.checksum()}
        lines = self._paged(head, changes, paging, wants_end, encoder, page_state, now_ms)
        return TableResponse(
            start, response_format, lines, capabilities.include_end_stream_action, file_id_hash
        )

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
        now_ms = int(time.time() * 1000)
        reader = self.reader(table)
        listing = reader.listing()
        paging = self._paging(table, request.page_token, request.checksum(), request.max_files, now_ms)
        latest_version = int(paging.token_payload["l"]) if paging.token_payload else listing.latest_version
        latest = reader.snapshot(latest_version, listing)
        commits_all = reader.commits(listing, latest)
        if request.starting_timestamp is not None:
            moment = parse_timestamp(request.starting_timestamp)
            start = first_version_at_or_after(commits_all, moment, request.starting_timestamp)
        else:
            start = request.starting_version or 0
        if request.ending_timestamp is not None:
            moment = parse_timestamp(request.ending_timestamp, "endingTimestamp")
            end = version_at(commits_all, moment, request.ending_timestamp)
        else:
            end = request.ending_version if request.ending_version is not None else latest_version
        if start > latest_version:
            raise InvalidParameter(
                f"Provided Start version({start}) for reading change data is invalid. Start version "
                f"cannot be greater than the latest version of the table({latest_version})."
            )
        end = min(end, latest_version)
        if end < start:
            raise InvalidParameter(
                f"CDF range from start {start} to end {end} was invalid. End cannot be before start."
            )
        start_snapshot = reader.snapshot(start, listing)
        self._check_cdf_recorded(reader, listing, start_snapshot, start, end)
        head_snapshot = start_snapshot if request.include_historical_metadata else latest
        response_format = self._format(head_snapshot, capabilities)
        encoder = self._encoder(table, response_format, file_id_hash)
        commits = self._commit_times(reader, listing, start, end)
        self._check_change_files(reader, listing, encoder, start, end)
        changes = self._version_lines(
            table, reader, listing, encoder, start, end, commits,
            include_metadata=request.include_historical_metadata, use_cdc=True,
            parquet_check=response_format == "parquet", client_features=capabilities.reader_features,
            include_protocol=request.include_historical_protocol,
        )  # fmt: skip
        head = [
            encoder.protocol(head_snapshot),
            encoder.metadata(head_snapshot, version=head_snapshot.version),
        ]
        wants_end = capabilities.include_end_stream_action or request.max_files is not None
        page_state = {"t": table.id, "l": latest_version, "c": request.checksum()}
        lines = self._paged(head, changes, paging, wants_end, encoder, page_state, now_ms)
        return TableResponse(
            start, response_format, lines, capabilities.include_end_stream_action, file_id_hash
        )

    def _check_cdf_recorded(
        self,
        reader: TableReader,
        listing: LogListing,
        start_snapshot: DeltaSnapshot,
        start: int,
        end: int,
    ) -> None:
        disabled = [] if start_snapshot.change_data_feed_enabled else [start]
        for version in range(start + 1, end + 1):
            for action in reader.commit(listing, version):
                if "metaData" in action and not cdf_enabled(action["metaData"]):
                    disabled.append(version)
        if disabled:
            listed = ", ".join(str(v) for v in disabled)
            raise InvalidParameter(
                f"Error getting change data for range [{start}, {end}] as change data was not recorded "
                f"for version [{listed}]"
            )

    def _check_change_files(
        self, reader: TableReader, listing: LogListing, encoder: LineEncoder, start: int, end: int
    ) -> None:
        """Vacuumed change or data files make the whole range unreadable: say so up front."""
        locations: list[tuple[str, str]] = []
        for version in range(start, end + 1):
            commit = reader.commit(listing, version)
            kinds = ("cdc",) if any("cdc" in a for a in commit) else ("add", "remove")
            for action in commit:
                for kind in kinds:
                    if kind in action and (kind == "cdc" or action[kind].get("dataChange", True)):
                        locations.append(reader.locate(action[kind]["path"]))
        reader.check_exist(locations)

    def _commit_times(self, reader: TableReader, listing: LogListing, start: int, end: int) -> dict[int, int]:
        commits: list[Commit] = reader.commits(listing, reader.snapshot(end, listing))
        times = {c.version: c.timestamp for c in commits}
        missing = [v for v in range(start, end + 1) if v not in times]
        if missing:
            # The log was cleaned up before these versions (commits() never returns none).
            raise InvalidParameter(f"You can only query table changes since version {min(times)}.")
        return times

    def _version_lines(
        self,
        table: SharedTable,
        reader: TableReader,
        listing: LogListing,
        encoder: LineEncoder,
        start: int,
        end: int,
        times: dict[int, int],
        include_metadata: bool,
        use_cdc: bool,
        parquet_check: bool,
        client_features: frozenset[str],
        include_protocol: bool = False,
    ) -> Iterator[Line]:
        """Per version, in order: its data-changing files, and metadata changes after `start`.

        `include_protocol` adds protocol changes too (`includeHistoricalProtocol`,
        delta format only: the parquet format has no way to express them).
        """
        partition_columns = tuple(reader.snapshot(start, listing).partition_columns)
        for version in range(start, end + 1):
            commit = reader.commit(listing, version)
            timestamp = times[version]
            meta = next((a["metaData"] for a in commit if "metaData" in a), None)
            protocol = next((a["protocol"] for a in commit if "protocol" in a), None)
            if meta is not None or protocol is not None:
                snapshot = reader.snapshot(version, listing)
                if parquet_check:
                    actions.check_parquet_readable(snapshot)
                else:
                    actions.check_delta_readable(snapshot, client_features)
                partition_columns = tuple(snapshot.partition_columns)
                if protocol is not None and include_protocol and not parquet_check and version > start:
                    yield {"protocol": actions.delta_protocol(snapshot)["protocol"] | {"version": version}}
                if meta is not None and include_metadata and version > start:
                    yield encoder.metadata(snapshot, version=version)
            if _is_noop_merge(commit):
                continue
            has_cdc = use_cdc and any("cdc" in a for a in commit)
            for action in commit:
                if has_cdc:
                    if "cdc" in action:
                        yield encoder.file("cdc", action["cdc"], partition_columns, version, timestamp)
                    continue
                for kind in ("add", "remove"):
                    body = action.get(kind)
                    if body is not None and body.get("dataChange", True):
                        if kind == "remove" and "size" not in body:
                            body = body | {"size": self._removed_size(reader, listing, version, body["path"])}
                        yield encoder.file(kind, body, partition_columns, version, timestamp)

    def _removed_size(self, reader: TableReader, listing: LogListing, version: int, path: str) -> int:
        # Older writers omit `size` on removes; the file's add in the previous
        # version has it, and Spark refuses a remove without one.
        previous = reader.snapshot(version - 1, listing)
        for add in previous.adds:
            if add["path"] == path:
                return int(add.get("size") or 0)
        raise UnsupportedOperation(f"cannot determine the size of a file removed in version {version}")

    # -- paging -----------------------------------------------------------------------------

    def _paging(
        self, table: SharedTable, token: str | None, checksum: str, max_files: int | None, now_ms: int
    ) -> Paging:
        size = min(max_files, MAX_PAGE_FILES) if max_files else None
        if not token:
            return Paging(0, size)
        payload = self._decode(self.page_tokens, token, "page token", table, now_ms)
        if payload.get("c") != checksum:
            raise InvalidParameter(
                "Query parameter mismatch detected for the next page query. The query parameter "
                "cannot change when querying the next page results."
            )
        return Paging(int(payload["o"]), size, payload)

    def _paged(
        self,
        head: list[Line],
        body: Iterator[Line],
        paging: Paging,
        wants_end: bool,
        encoder: LineEncoder,
        page_state: dict[str, Any],
        now_ms: int,
        end_extras: Callable[[], dict[str, Any]] | None = None,
    ) -> Iterator[Line]:
        """Head lines, one page of body lines, then the endStreamAction when it was asked for.

        Every page repeats the head, so a client can check that the protocol and
        metadata did not change between pages.
        """
        yield from head
        emitted = 0
        has_more = False
        stop = None if paging.size is None else paging.offset + paging.size + 1
        for line in islice(body, paging.offset, stop):
            if paging.size is not None and emitted == paging.size:
                has_more = True
                break
            yield line
            emitted += 1
        if not wants_end:
            return
        end: dict[str, Any] = {}
        if has_more:
            state = page_state | {"o": paging.offset + emitted, "e": now_ms + PAGE_TOKEN_TTL_MS}
            end["nextPageToken"] = self.page_tokens.encode(state)
        if end_extras:
            end.update(end_extras())
        if encoder.min_expiration is not None:
            end["minUrlExpirationTimestamp"] = encoder.min_expiration
        yield {"endStreamAction": end}

    # -- helpers ------------------------------------------------------------------------------

    def _resolve(self, table: SharedTable, version: int | None, timestamp: str | None) -> DeltaSnapshot:
        reader = self.reader(table)
        if version is None and timestamp is None:
            return reader.snapshot()
        _history_required(table)
        listing = reader.listing()
        if timestamp is not None:
            moment = parse_timestamp(timestamp)
            commits = reader.commits(listing, reader.snapshot(listing=listing))
            version = version_at(commits, moment, timestamp)
        return reader.snapshot(version, listing)

    @staticmethod
    def _decode(codec: TokenCodec, token: str, what: str, table: SharedTable, now_ms: int) -> dict[str, Any]:
        try:
            payload = codec.decode(token)
        except ValueError as error:
            raise InvalidParameter(f"Error decoding the {what}: {error}") from None
        if payload.get("t") != table.id:
            raise InvalidParameter(
                f"The table specified in the {what} does not match the table being queried."
            )
        if int(payload.get("e", 0)) < now_ms:
            raise InvalidParameter(f"The {what} has expired. Please restart the query.")
        return payload


def _is_noop_merge(commit: list[dict[str, Any]]) -> bool:
    """A MERGE that touched no row: the reference emits nothing for it."""
    info = next((a["commitInfo"] for a in commit if "commitInfo" in a), None)
    if not info or info.get("operation") != "MERGE":
        return False
    metrics = info.get("operationMetrics") or {}
    keys = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return all(str(metrics.get(key, "")) == "0" for key in keys)
