"""Where a shared table's reader is chosen: one `TableReader` per table, kept between requests.

Readers hold what is expensive to rebuild (log listings, snapshots, loaded
Iceberg metadata), so a request asks `TableReaders.reader` once and passes the
reader on. Delta and Iceberg tables answer through the same `TableReader`
methods, which is all the protocol side needs to know of either.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any, Protocol

from share_store.delta.log import Commit
from share_store.delta.replay import LogListing
from share_store.delta.snapshot import (
    FILES_CHECK_SECONDS,
    CheckedVersions,
    DeltaSnapshot,
    DeltaTableReader,
    SnapshotCache,
)
from share_store.delta.summaries import SummaryStore
from share_store.errors import UnsupportedOperation
from share_store.iceberg.catalogs import CatalogRegistry
from share_store.iceberg.table import IcebergOptions, IcebergTableReader, VersionStore
from share_store.model import SharedTable
from share_store.storage.base import ObjectStorage, UrlSigning


class TableReader(Protocol):
    """One shared table's versions, snapshots, commits and file locations."""

    #: Where the table's files are read from (an Iceberg catalog may name storage of its own).
    storage: ObjectStorage

    @property
    def holds_snapshot(self) -> bool:
        """Whether the snapshot cache still holds one of the table's versions."""
        ...

    def listing(self) -> LogListing:
        """The table's versions as of now (cheap to ask again: readers cache it)."""
        ...

    def snapshot(self, version: int | None = None, listing: Any = None) -> DeltaSnapshot:
        """The snapshot of `version` (the latest when None)."""
        ...

    def head(self, listing: Any = None) -> DeltaSnapshot:
        """The latest version for its head lines only (its files may not be listable)."""
        ...

    def planned(self, snapshot: DeltaSnapshot, hint: dict[str, Any]) -> DeltaSnapshot:
        """`snapshot`'s files as the table format's own planning prunes them with a predicate hint."""
        ...

    def for_parquet(self, snapshot: DeltaSnapshot) -> DeltaSnapshot:
        """`snapshot` as the parquet response format can carry it (Iceberg deletes materialized)."""
        ...

    def commit(self, listing: Any, version: int) -> list[dict[str, Any]]:
        """The raw actions of one version, as Delta writes them."""
        ...

    def parquet_commit(self, listing: Any, version: int) -> list[dict[str, Any]]:
        """One version's actions as the parquet format can carry them (Iceberg deletes materialized)."""
        ...

    def commits(self, listing: Any, snapshot: DeltaSnapshot | None = None) -> list[Commit]:
        """Version and timestamp of every version still in the log, up to `snapshot`'s."""
        ...

    def locate(self, path: str) -> tuple[str, str]:
        """Bucket and key of a file named in the log."""
        ...

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        """Bucket and key of a deletion vector's file; None for inline vectors."""
        ...

    def url_signer(self, now: float) -> UrlSigning:
        """`sign` as of `now`, for the many URLs of one response."""
        ...

    def check_files_exist(self, snapshot: DeltaSnapshot, with_dvs: bool = False, ahead: float = 0.0) -> bool:
        """Refuse a snapshot whose files were removed from storage; `ahead`: check unless
        an earlier check is trusted that many seconds from now still. Whether it looked."""
        ...

    def check_exist(self, locations: list[tuple[str, str]]) -> None:
        """Refuse when any of `locations` is missing from storage."""
        ...


class TableReaders:
    """The reader of each shared table, made on first use and kept while its location stays.

    Keyed by table id and location, so a table re-added at another path gets
    a fresh reader rather than another table's cached snapshots. All readers
    share one `SnapshotCache`, whose bound holds for the tables together.
    """

    def __init__(
        self,
        storage: ObjectStorage,
        catalogs: CatalogRegistry | None = None,
        versions: VersionStore | None = None,
        iceberg: IcebergOptions | None = None,
        snapshots: SnapshotCache | None = None,
        files_check_seconds: float = FILES_CHECK_SECONDS,
        summaries: SummaryStore | None = None,
    ) -> None:
        self.storage = storage
        self.catalogs = catalogs or CatalogRegistry({})
        self.versions = versions
        self.iceberg = iceberg or IcebergOptions()
        self.snapshots = snapshots if snapshots is not None else SnapshotCache()
        self.files_check_seconds = files_check_seconds
        self.summaries = summaries
        self._readers: dict[tuple[str, str, str], TableReader] = {}
        #: When each table was last read for a recipient (what the snapshot warmer keeps fresh).
        self._used: dict[tuple[str, str, str], tuple[SharedTable, float]] = {}
        self._last_use = float("-inf")
        self._lock = threading.Lock()

    def reader(self, table: SharedTable, used: bool = True) -> TableReader:
        """The table's reader; `used`: on a recipient's behalf (not the warmer's)."""
        key = (table.id, table.bucket, table.path)
        with self._lock:
            if used:
                self._last_use = time.monotonic()
                self._used[key] = (table, self._last_use)
            reader = self._readers.get(key)
            if reader is None:
                reader = self._make(table)
                self._readers[key] = reader
            return reader

    def quiet_for(self) -> float:
        """Seconds since any table was last read for a recipient (infinite if none ever was)."""
        return time.monotonic() - self._last_use

    def recently_used(self, seconds: float) -> list[SharedTable]:
        """The tables read for recipients within the last `seconds`, most recent first."""
        since = time.monotonic() - seconds
        with self._lock:
            for key in [key for key, (_, at) in self._used.items() if at < since]:
                del self._used[key]
            return [table for table, _ in sorted(self._used.values(), key=lambda used: -used[1])]

    def _make(self, table: SharedTable) -> TableReader:
        snapshots, checked = self.snapshots.table(), CheckedVersions(self.files_check_seconds)
        if table.is_iceberg:
            if self.versions is None:
                raise UnsupportedOperation("Iceberg tables need a share store for their versions")
            return IcebergTableReader(
                table, self.catalogs, self.versions, self.storage, self.iceberg, snapshots, checked
            )
        persisted = partial(_persisted, self.summaries, table) if self.summaries is not None else None
        return DeltaTableReader(self.storage, table.bucket, table.path, snapshots, checked, persisted)


def _persisted(summaries: SummaryStore, table: SharedTable, listing: LogListing) -> DeltaSnapshot | None:
    """The persisted summary of `table`'s latest version in `listing`, as a snapshot (None if none)."""
    try:
        found = summaries.snapshot_summary(table.id)
    except Exception:  # noqa: BLE001 - the store unreachable: the log is replayed as before
        return None
    if found is None or not found.describes(table.bucket, table.path, listing):
        return None
    return found.snapshot()
