"""Table reads for the protocol: version resolution, file listing, paging, signing.

Kept apart from the HTTP handlers so that each step is a plain method, and
apart from `share_store` because it speaks the protocol's request vocabulary
(page tokens, refresh tokens, response formats).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from share_store.delta import actions
from share_store.delta.log import first_version_at_or_after, version_at
from share_store.delta.predicates import parse_hint
from share_store.delta.snapshot import DeltaSnapshot, DeltaTableReader, file_key
from share_store.errors import InvalidParameter
from share_store.model import SharedTable
from share_store.storage.base import ObjectStorage
from sharing_server.page_tokens import TokenCodec
from sharing_server.protocol import MAX_PAGE_FILES, Capabilities, QueryRequest, parse_timestamp

PAGE_TOKEN_TTL_MS = 3 * 24 * 3600 * 1000
REFRESH_TOKEN_TTL_MS = 3600 * 1000


@dataclass(frozen=True)
class TableResponse:
    """A response ready to stream: its version header and its action lines."""

    version: int
    response_format: str
    actions: Iterator[dict[str, Any]]
    end_stream_action: bool = False


def _history_required(table: SharedTable) -> None:
    if not table.history_shared:
        raise InvalidParameter(
            "Reading table by version or timestamp is not supported because history sharing "
            f"is not enabled on table: {table.full_name}"
        )


class TableQueries:
    def __init__(self, storage: ObjectStorage, secret: bytes) -> None:
        self.storage = storage
        self.page_tokens = TokenCodec(secret, "query-page")
        self.refresh_tokens = TokenCodec(secret, "query-refresh")
        self._readers: dict[tuple[str, str, str], DeltaTableReader] = {}
        self._lock = threading.Lock()

    def reader(self, table: SharedTable) -> DeltaTableReader:
        key = (table.id, table.bucket, table.path)
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                reader = self._readers[key] = DeltaTableReader(self.storage, table.bucket, table.path)
            return reader

    # -- /version --------------------------------------------------------------

    def table_version(self, table: SharedTable, starting_timestamp: str | None) -> int:
        reader = self.reader(table)
        if starting_timestamp is None:
            return reader.latest_version()
        _history_required(table)
        moment = parse_timestamp(starting_timestamp)
        latest = reader.snapshot()
        # Spec wording, not the reference's quirk: the earliest version committed
        # at or after the timestamp (the reference answers v+1 on an exact match).
        return first_version_at_or_after(reader.commits(latest), moment, starting_timestamp)

    # -- /metadata ---------------------------------------------------------------

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
        response_format = capabilities.response_format()
        actions.check_parquet_readable(snapshot)
        lines = [actions.parquet_protocol(), actions.parquet_metadata(snapshot, table.history_shared)]
        return TableResponse(snapshot.version, response_format, iter(lines))

    # -- /query -------------------------------------------------------------------

    def query(
        self,
        table: SharedTable,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
    ) -> TableResponse:
        response_format = capabilities.response_format()
        if request.starting_version is not None:
            _history_required(table)
            raise InvalidParameter(
                "startingVersion queries (streaming) are not supported by this server yet."
            )
        now_ms = int(time.time() * 1000)
        checksum = request.checksum()
        offset = 0
        pinned: int | None = None
        if request.page_token:
            page = self._decode(self.page_tokens, request.page_token, "page token", table, now_ms)
            if page.get("c") != checksum:
                raise InvalidParameter(
                    "Query parameter mismatch detected for the next page query. The query parameter "
                    "cannot change when querying the next page results."
                )
            pinned, offset = int(page["v"]), int(page["o"])
        elif request.refresh_token:
            refresh = self._decode(self.refresh_tokens, request.refresh_token, "refresh token", table, now_ms)
            pinned = int(refresh["v"])
        if pinned is not None:
            snapshot = self.reader(table).snapshot(pinned)
        else:
            if request.version is not None or request.timestamp is not None:
                _history_required(table)
            snapshot = self._resolve(table, request.version, request.timestamp)
        actions.check_parquet_readable(snapshot)
        self.reader(table).check_files_exist(snapshot)

        time_travel = request.version is not None or request.timestamp is not None
        hash_kind = file_id_hash or "parquet"
        wants_end = (
            capabilities.include_end_stream_action
            or request.include_refresh_token
            or request.max_files is not None
        )
        page_size = min(request.max_files, MAX_PAGE_FILES) if request.max_files else None

        def lines() -> Iterator[dict[str, Any]]:
            yield actions.parquet_protocol()
            yield actions.parquet_metadata(snapshot, table.history_shared)
            files = self._files(table, snapshot, request)
            page = islice(files, offset, None if page_size is None else offset + page_size + 1)
            min_expiration: int | None = None
            emitted = 0
            has_more = False
            for entry in page:
                if page_size is not None and emitted == page_size:
                    has_more = True
                    break
                url, expiration = self.storage.presign(
                    table.bucket, file_key(table.path, entry.path), now_ms / 1000
                )
                min_expiration = expiration if min_expiration is None else min(min_expiration, expiration)
                yield actions.parquet_file(
                    entry, url, expiration, hash_kind, snapshot.version if time_travel else None
                )
                emitted += 1
            if wants_end:
                end: dict[str, Any] = {}
                if has_more:
                    end["nextPageToken"] = self.page_tokens.encode(
                        {
                            "t": table.id,
                            "v": snapshot.version,
                            "c": checksum,
                            "o": offset + emitted,
                            "e": now_ms + PAGE_TOKEN_TTL_MS,
                        }
                    )
                if request.include_refresh_token or request.refresh_token:
                    end["refreshToken"] = self.refresh_tokens.encode(
                        {
                            "t": table.id,
                            "v": snapshot.version,
                            "e": now_ms + REFRESH_TOKEN_TTL_MS,
                        }
                    )
                if min_expiration is not None:
                    end["minUrlExpirationTimestamp"] = min_expiration
                yield {"endStreamAction": end}

        return TableResponse(
            snapshot.version, response_format, lines(), wants_end and capabilities.include_end_stream_action
        )

    # -- helpers ------------------------------------------------------------------

    def _files(
        self, table: SharedTable, snapshot: DeltaSnapshot, request: QueryRequest
    ) -> Iterator[actions.FileEntry]:
        hint = parse_hint(request.json_predicate_hints) if request.json_predicate_hints else None
        records = 0
        limit = request.limit_hint
        for entry in actions.iter_file_entries(snapshot):
            if limit is not None and records >= limit:
                return
            if not actions.matches_hint(hint, entry):
                continue
            yield entry
            # Files without stats count as zero rows: we keep listing rather
            # than risk returning fewer rows than asked for.
            records += entry.num_records or 0

    def _resolve(self, table: SharedTable, version: int | None, timestamp: str | None) -> DeltaSnapshot:
        reader = self.reader(table)
        if version is None and timestamp is None:
            return reader.snapshot()
        _history_required(table)
        if timestamp is not None:
            moment = parse_timestamp(timestamp)
            latest = reader.snapshot()
            version = version_at(reader.commits(latest), moment, timestamp)
            return reader.snapshot(version)
        latest_version = reader.latest_version()
        if version > latest_version:
            raise InvalidParameter(
                f"Cannot load table version {version} as it does not exist. "
                f"The latest version of the table is {latest_version}."
            )
        return reader.snapshot(version)

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
