"""Which version of a table a request reads, and the response format it is answered in.

Time travel (by version or timestamp) needs the table's history shared; the
format is the one the client's capabilities and the snapshot allow, and the
snapshot is checked readable in it before any line is made.
"""

from __future__ import annotations

import time
from functools import partial

from share_store.errors import InvalidParameter
from share_store.model import SharedTable
from share_store.tables import actions
from share_store.tables.changes import CommitAt
from share_store.tables.commit_times import version_at
from share_store.tables.reader import TableReader, VersionListing
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing.capabilities import Capabilities
from sharing_server.delta_sharing.encoding import LineEncoder
from sharing_server.delta_sharing.requests import parse_timestamp


def history_required(table: SharedTable) -> None:
    if not table.history_shared:
        raise InvalidParameter(
            "Reading table by version or timestamp is not supported because history sharing "
            f"is not enabled on table: {table.full_name}"
        )


def parse_version(version: str) -> int:
    try:
        number = int(version)
    except ValueError:
        raise InvalidParameter(
            "expected a number but the string didn't have the appropriate format"
        ) from None
    if number < 0:
        raise InvalidParameter("version cannot be negative.")
    return number


def resolve(
    reader: TableReader, table: SharedTable, version: int | None, timestamp: str | None
) -> TableSnapshot:
    """The snapshot a request names by version or timestamp, or the latest."""
    if version is None and timestamp is None:
        return reader.snapshot()
    history_required(table)
    listing = reader.listing()
    if timestamp is not None:
        moment = parse_timestamp(timestamp)
        commits = reader.commits(listing, reader.snapshot(listing=listing))
        version = version_at(commits, moment, timestamp)
    return reader.snapshot(version, listing)


def check_readable(snapshot: TableSnapshot, response_format: str, capabilities: Capabilities) -> None:
    if response_format == "parquet":
        actions.check_parquet_readable(snapshot)
    else:
        actions.check_delta_readable(snapshot, capabilities.reader_features)


def in_format(
    reader: TableReader,
    table: SharedTable,
    snapshot: TableSnapshot,
    capabilities: Capabilities,
    prefer_delta: bool = False,
    file_id_hash: str | None = None,
) -> tuple[TableSnapshot, LineEncoder]:
    """The snapshot as the response's format carries it (checked readable), and the response's
    line encoder in that format (`encoder.format`), which signs with `reader` as of now.

    With `prefer_delta` (see `Capabilities.response_format`), only for snapshots the
    delta format may carry: some Iceberg snapshots cannot be, and get parquet as before.
    """
    prefer = prefer_delta and "delta" not in snapshot.refusals
    response_format = capabilities.response_format(snapshot.min_reader_version, prefer)
    if response_format == "parquet":
        snapshot = reader.for_parquet(snapshot)
    check_readable(snapshot, response_format, capabilities)
    encoder = LineEncoder(response_format, reader, time.time(), file_id_hash, table.history_shared)
    return snapshot, encoder


def commit_lookup(reader: TableReader, listing: VersionListing, response_format: str) -> CommitAt:
    """Each version's actions as the response format carries them."""
    if response_format == "parquet":
        return partial(reader.parquet_commit, listing)
    return partial(reader.commit, listing)
