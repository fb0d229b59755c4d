"""Where a shared table's reader is chosen: one `TableReader` per table, kept between requests.

Readers hold what is expensive to rebuild (log listings, snapshots, loaded
Iceberg metadata), so a request asks `TableReaders.reader` once and passes the
reader on. Delta and Iceberg tables answer through the same `TableReader`
methods, which is all the protocol side needs to know of either.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

from share_store.delta.log_listing import LogListing
from share_store.delta.reader import DeltaTableReader
from share_store.errors import Forbidden, UnsupportedOperation
from share_store.iceberg.listing import VersionStore
from share_store.iceberg.table import IcebergTableReader
from share_store.model import SharedTable
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from share_store.tables.options import IcebergOptions
from share_store.tables.reader import TableReader
from share_store.tables.snapshot import TableSnapshot
from share_store.tables.snapshot_cache import FILES_CHECK_SECONDS, CheckedVersions, SnapshotCache
from share_store.tables.summaries import SummaryStore

#: Restricted readers kept at once (one per table, restriction and audience).
MAX_RESTRICTED_READERS = 512


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
        #: Restricted tables' readers, by table, restriction and audience (the most recent kept).
        self._restricted: OrderedDict[tuple[Any, ...], TableReader] = OrderedDict()
        #: Each restricted table's folder of derived files, shared by its audiences.
        self._derived: dict[tuple[str, str, str], Any] = {}
        #: When each table was last read for a recipient (what the snapshot warmer keeps fresh).
        self._used: dict[tuple[str, str, str], tuple[SharedTable, float]] = {}
        self._last_use = float("-inf")
        self._lock = threading.Lock()
        #: Called with a Delta reader and the held snapshot it built behind a first reader
        #: (`DeltaTableReader.on_built`); set by the server to make the snapshot's lines.
        self.on_built: Callable[[TableReader, TableSnapshot], None] | None = None

    def reader(self, table: SharedTable, used: bool = True) -> TableReader:
        """The table's reader for the audience that authorized it; `used`: on a recipient's
        behalf (not the warmer's).

        A restricted table is read only through its restricted reader, which serves the
        rows and columns of its restriction as bound for the table's `audience`. One without
        an audience (not read for a recipient) is refused: nothing is served unrestricted by
        a path that forgot to say for whom it reads. The provider's own reads ask
        `unrestricted`.
        """
        if table.restriction is not None:
            if table.audience is None:
                raise Forbidden("this table is restricted, and the request reads it for no recipient")
            return self._restricted_reader(table, used)
        return self.unrestricted(table, used)

    def _restricted_reader(self, table: SharedTable, used: bool) -> TableReader:
        """The reader of a restricted table for its audience, kept like the whole table's: it
        holds the versions it made. One folder of derived files per table serves every audience."""
        from share_store.restrictions.derived_files import derived_files_of
        from share_store.restrictions.restricted_reader import RestrictedReader
        from share_store.storage.file_uris import file_uri

        assert table.restriction is not None and table.audience is not None
        inner = self.unrestricted(table, used)
        where = (table.id, table.bucket, table.path)
        audience = (table.audience.recipient, tuple(sorted(table.audience.properties.items())))
        key = (*where, table.restriction.to_json(), audience)
        with self._lock:
            reader = self._restricted.get(key)
            if reader is not None:
                self._restricted.move_to_end(key)
                return reader
            files = self._derived.get(where)
        if files is None:
            deletes = self.iceberg.deletes
            files = derived_files_of(
                table, inner, self.storage, deletes.cache_bucket, deletes.cache_prefix,
                lambda bucket, key: file_uri(self.storage, bucket, key),
            )  # fmt: skip
        made = RestrictedReader(table, inner, files)
        with self._lock:
            self._derived.setdefault(where, files)
            reader = self._restricted.setdefault(key, made)
            while len(self._restricted) > MAX_RESTRICTED_READERS:
                self._restricted.popitem(last=False)
        return reader

    def unrestricted(self, table: SharedTable, used: bool = False) -> TableReader:
        """The whole table's reader, whatever its restriction: the provider's reads (checking a
        restriction against the schema, the console), and what a restricted reader reads."""
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
        reader = DeltaTableReader(self.storage, table.bucket, table.path, snapshots, checked, persisted)
        if self.on_built is not None:
            reader.on_built = partial(self.on_built, reader)
        return reader


def _persisted(summaries: SummaryStore, table: SharedTable, listing: LogListing) -> TableSnapshot | None:
    """The persisted summary of `table`'s latest version in `listing`, as a snapshot (None if none)."""
    try:
        found = summaries.snapshot_summary(table.id)
    except Exception:  # noqa: BLE001 - the store unreachable: the log is replayed as before
        return None
    if found is None or not found.describes(table.bucket, table.path, listing):
        return None
    return found.snapshot()
