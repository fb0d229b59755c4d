"""Reads of a range of versions: streaming `/query` (`startingVersion`) and `/changes`.

Both walk commits version by version with Delta's change-feed rules
(`share_store.tables.changes`) and stream the encoded changes lazily; later
pages keep reading up to the latest version the first page saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.model import SharedTable
from share_store.readers.table_readers import TableReaders
from share_store.signing.url_lifetimes import UrlLifetimes
from share_store.tables.changes import (
    CommitAt,
    changed_paths,
    check_cdf_recorded,
    commit_times,
    first_with_vectors,
    version_changes,
)
from share_store.tables.commit_times import first_version_at_or_after, version_at
from share_store.tables.reader import TableReader, VersionListing
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing.capabilities import Capabilities
from sharing_server.delta_sharing.encoding import LineEncoder
from sharing_server.delta_sharing.paging import Line
from sharing_server.delta_sharing.requests import ChangesRequest, QueryRequest, parse_timestamp
from sharing_server.delta_sharing.responses import ResponsePages, TableResponse
from sharing_server.delta_sharing.versions import (
    check_readable,
    commit_lookup,
    history_required,
    in_format,
)


class ChangeQueries:
    def __init__(
        self,
        readers: TableReaders,
        pages: ResponsePages,
        prefer_delta: bool = False,
        lifetimes: UrlLifetimes | None = None,
    ) -> None:
        self.readers = readers
        self.pages = pages
        self.prefer_delta = prefer_delta
        self.lifetimes = lifetimes or UrlLifetimes()

    def streaming(
        self,
        table: SharedTable,
        reader: TableReader,
        request: QueryRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        token_expires_at: datetime | None = None,
    ) -> TableResponse:
        """`/query` with `startingVersion`: the changes from that version on, with metadata."""
        history_required(table)
        page = self.pages.start(table.id, request, capabilities, file_id_hash)
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
        snapshot, encoder = in_format(
            reader, table, reader.snapshot(start, listing), capabilities, self.prefer_delta, file_id_hash
        )
        # How many files the range hands out is known only as its commits are read.
        encoder.url_lifetime = self.lifetimes.for_answer(None, token_expires_at, encoder.now)
        commit_at = commit_lookup(reader, listing, encoder.format)
        _check_vectors(table, reader, listing, commit_at, encoder.format, start, end, use_cdc=False)
        changes = _change_lines(
            reader, listing, commit_at, encoder, capabilities, start, end, use_cdc=False,
            include_metadata=True, include_protocol=request.include_historical_protocol,
        )  # fmt: skip
        head = [encoder.protocol(snapshot), encoder.metadata(snapshot, version=start)]
        return self.pages.respond(page, start, encoder, head, changes, {"l": latest})

    def changes(
        self,
        table: SharedTable,
        request: ChangesRequest,
        capabilities: Capabilities,
        file_id_hash: str | None,
        token_expires_at: datetime | None = None,
    ) -> TableResponse:
        """`/changes`: the change data feed of a range of versions."""
        if not table.history_shared:
            raise InvalidParameter(f"cdf is not enabled on table {table.full_name}")
        page = self.pages.start(table.id, request, capabilities, file_id_hash)
        reader = self.readers.reader(table)
        listing = reader.listing()
        latest_version = int(page.resumed["l"]) if page.resumed else listing.latest_version
        latest = reader.snapshot(latest_version, listing)
        start, end = _change_range(reader, listing, latest, request)
        start_snapshot = reader.snapshot(start, listing)
        check_cdf_recorded(start_snapshot, partial(reader.commit, listing), start, end)
        head_snapshot = start_snapshot if request.include_historical_metadata else latest
        head_snapshot, encoder = in_format(
            reader, table, head_snapshot, capabilities, self.prefer_delta, file_id_hash
        )
        commit_at = commit_lookup(reader, listing, encoder.format)
        _check_vectors(table, reader, listing, commit_at, encoder.format, start, end, use_cdc=True)
        # Vacuumed change or data files make the whole range unreadable: say so up front.
        paths = changed_paths(commit_at, start, end)
        located = [reader.locate(path) for path in paths]
        reader.check_exist(located)
        encoder.url_lifetime = self.lifetimes.for_answer(len(located), token_expires_at, encoder.now)
        changes = _change_lines(
            reader, listing, commit_at, encoder, capabilities, start, end, use_cdc=True,
            include_metadata=request.include_historical_metadata,
            include_protocol=request.include_historical_protocol,
        )  # fmt: skip
        head = [
            encoder.protocol(head_snapshot),
            encoder.metadata(head_snapshot, version=head_snapshot.version),
        ]
        return self.pages.respond(page, start, encoder, head, changes, {"l": latest_version})


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
        check=lambda snapshot: check_readable(
            reader.for_parquet(snapshot) if encoder.format == "parquet" else snapshot,
            encoder.format,
            capabilities,
        ),
    )
    return map(encoder.change, changes)
