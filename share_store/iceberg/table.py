"""An Iceberg table seen through the Delta reader's interface.

`IcebergTableReader` answers what `DeltaTableReader` answers (listing,
snapshots by version, one version's changes, signing) so that the protocol
layer serves both formats with the same code. Each snapshot becomes a
`TableSnapshot` whose schema uses Delta column mapping by Iceberg field id.
Its versions are listed by `listing`, and its files found in the storage by
`locations`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO

from share_store.errors import TableFilesMissing, UnsupportedOperation
from share_store.iceberg.derived import index_identity
from share_store.iceberg.listing import (
    IcebergListing,
    VersionStore,
    list_snapshots,
    previous_version,
    schema_at,
    snapshot_id_at,
)
from share_store.iceberg.versions import EMPTY_SNAPSHOT
from share_store.model import SharedTable
from share_store.outages import outages_unavailable
from share_store.storage.base import ObjectStorage, UrlSigning
from share_store.storage.file_uris import file_location, file_uri
from share_store.storage.table_location import TableLocation, locate_file, table_location_of
from share_store.table_sources.registry import CatalogRegistry
from share_store.table_sources.vended import VendedS3Storage
from share_store.tables.commit_times import Commit
from share_store.tables.options import IcebergOptions
from share_store.tables.snapshot import TableSnapshot
from share_store.tables.snapshot_cache import CheckedVersions, SnapshotCache, TableSnapshots

if TYPE_CHECKING:
    from share_store.iceberg.deletes import DeleteFiles
    from share_store.iceberg.derived import DerivedFiles
    from share_store.iceberg.materialized import Materialized


class IcebergTableReader:
    def __init__(
        self,
        table: SharedTable,
        catalogs: CatalogRegistry,
        versions: VersionStore,
        storage: ObjectStorage,
        options: IcebergOptions | None = None,
        snapshots: TableSnapshots | None = None,
        checked: CheckedVersions | None = None,
    ) -> None:
        self.table = table
        self.options = options or IcebergOptions()
        self.warehouse, self.name, self.namespace = table.iceberg_identifier
        self.catalogs = catalogs
        self.versions = versions
        #: The catalog's storage (`[catalogs.x.storage]`), else the server's.
        self.configured_storage = catalogs.storage(self.warehouse) or storage
        #: The keys the catalog vended with the table, which win over both while they last.
        self._vended: VendedS3Storage | None = None
        #: For a table of the server's own warehouses, the location every file it serves must be in.
        self._confined: TableLocation | None = None
        self._loaded_once = False
        self._snapshots = snapshots if snapshots is not None else SnapshotCache().table()
        self._commits: dict[int, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._checked = checked if checked is not None else CheckedVersions()
        self._delete_files: DeleteFiles | None = None  # made on first use: it imports pyiceberg
        self._derived: DerivedFiles | None = None
        self._copies: Materialized | None = None
        self._parquet_commits: dict[int, list[dict[str, Any]]] = {}

    @property
    def storage(self) -> ObjectStorage:
        """Where the table's files are read and signed: with vended keys while they last.

        Keys about to expire are replaced by loading the table again, which is when a
        REST catalog vends new ones.
        """
        vended = self._vended
        if vended is not None and not vended.fresh():
            self._load()
            vended = self._vended
        if vended is not None and vended.fresh():
            return vended
        return self.configured_storage

    @property
    def holds_snapshot(self) -> bool:
        return self._snapshots.held

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """Reads of catalog or metadata files: an outage is a 503, a file gone is "table files missing"."""
        try:
            with outages_unavailable(what):
                yield
        except FileNotFoundError as error:
            raise TableFilesMissing() from error

    # -- versions -----------------------------------------------------------------

    def _load(self) -> Any:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        catalog = self.catalogs.catalog(self.warehouse)
        # Loading asks the catalog, then (SQL catalogs) reads the metadata file from storage.
        try:
            with self._reading(f"the Iceberg catalog or the storage of warehouse '{self.warehouse}'"):
                table = catalog.load_table((*self.namespace, self.name))
        except (NoSuchTableError, NoSuchNamespaceError) as error:
            name = ".".join((*self.namespace, self.name))
            raise TableFilesMissing(
                f"Iceberg table {name} not found in warehouse '{self.warehouse}'"
            ) from error
        io_properties = getattr(getattr(table, "io", None), "properties", None) or {}
        self._vended = self.catalogs.vended_storage(self.warehouse, io_properties, self._vended)
        self._confined, self._loaded_once = table_location_of(table), True
        return table

    def catalog_table(self) -> Any:
        """The pyiceberg table as its catalog has it now (what the Iceberg REST facade hands out)."""
        return self._load()

    def listing(self) -> IcebergListing:
        return list_snapshots(self._load(), self.table.id, self.versions)

    def latest_version(self, listing: IcebergListing | None = None) -> int:
        return (listing or self.listing()).latest_version

    def commits(self, listing: IcebergListing, snapshot: TableSnapshot | None = None) -> list[Commit]:
        return [Commit(v, listing.commit_times[v]) for v in sorted(listing.commits)]

    def _snapshot_id(self, listing: IcebergListing, version: int) -> int:
        return snapshot_id_at(listing, version, self.versions, self.table.id)

    # -- snapshots ----------------------------------------------------------------

    def built(self, snapshot: TableSnapshot) -> TableSnapshot:
        return snapshot  # built whole when asked for: nothing is built behind a reader

    def head(self, listing: IcebergListing | None = None) -> TableSnapshot:
        # No summaries persist for Iceberg tables: loading the table's metadata is cheap next to a log replay.
        return self.snapshot(listing=listing)

    def snapshot(
        self,
        version: int | None = None,
        listing: IcebergListing | None = None,
        hint: dict[str, Any] | None = None,
    ) -> TableSnapshot:
        """The snapshot of `version`; with a predicate `hint`, only the files pyiceberg's planning keeps."""
        listing = listing or self.listing()
        if version is None:
            version = listing.latest_version
        snapshot_id = self._snapshot_id(listing, version)
        # A version names one snapshot for good, so the cache is keyed by version.
        cached = self._snapshots.get(version)
        if cached is None:
            cached = self._build(listing.table, version, snapshot_id)
            self._snapshots.put(cached)
        if hint is not None:
            return self._planned(listing.table, cached, snapshot_id, hint)
        return cached

    def planned(self, snapshot: TableSnapshot, hint: dict[str, Any]) -> TableSnapshot:
        """The files pyiceberg's planning keeps for `hint`, pruning manifests and files.

        The generic per-file evaluation still runs on what is left. A hint too
        wide for pyiceberg to plan with is left to that evaluation alone.
        """
        from share_store.iceberg.filters import plannable

        if not plannable(hint):
            return snapshot
        return self.snapshot(snapshot.version, hint=hint)

    def for_parquet(self, snapshot: TableSnapshot) -> TableSnapshot:
        """`snapshot` as the parquet format can carry it.

        In "materialize" mode each file with deletes is replaced by a copy without
        its deleted rows, written once to the cache (see iceberg/derived.py); in
        "refuse" mode the snapshot is left as is, for the format check to refuse.
        """
        if self.options.deletes.deletes_in_parquet != "materialize" or not snapshot.has_deletion_vectors:
            return snapshot
        with self._reading(f"the storage of Iceberg warehouse '{self.warehouse}'"):
            return self._materialized().snapshot(snapshot)

    def _materialized(self) -> Materialized:
        if self._copies is None:
            from share_store.iceberg.materialized import Materialized

            assert self._derived is not None  # made with the first snapshot that has vectors
            self._copies = Materialized(self._derived, self._read_file, self.locate, self.locate_dv)
        return self._copies

    def _build(self, table: Any, version: int, snapshot_id: int) -> TableSnapshot:
        from share_store.iceberg import mapping
        from share_store.iceberg.deletes import SnapshotVectors
        from share_store.iceberg.equality.positions import resolver_of
        from share_store.iceberg.planning import Plan, plan_files

        schema = schema_at(table, snapshot_id)
        plan = Plan()
        # Planning reads manifests, the mapping delete files and, for equality deletes,
        # data files: a file gone is "table files missing", an outage a 503, for all alike.
        with self._reading(f"the storage of Iceberg warehouse '{self.warehouse}'"):
            if snapshot_id != EMPTY_SNAPSHOT:
                plan = plan_files(table.scan(snapshot_id=snapshot_id))
            budget = self.options.deletes.equality_delete_budget_seconds
            equality = resolver_of(plan, schema, self._read_delete_file, self._open_data_file, budget)
            with_deletes = bool(equality or plan.vectors or any(task.delete_files for task in plan.tasks))
            derived = self._derived_files(table) if with_deletes else None
            uuid = index_identity(table.metadata)
            # Data files the index names are answered from it: their Puffin files need not be read.
            recorded = derived.read_index(uuid, snapshot_id) if derived else {}
            vectors = SnapshotVectors(self._deletes(derived), recorded, plan.vectors)
            try:
                snapshot = mapping.snapshot_from_tasks(
                    table, version, snapshot_id, schema, plan.tasks, vectors, equality
                )
            finally:
                if equality is not None and self.options.on_equality_resolution is not None:
                    self.options.on_equality_resolution(equality.resolution)
        if derived is not None and vectors.computed and "delta" not in snapshot.refusals:
            # Only a whole snapshot's vectors: the index is trusted to name every file with one.
            derived.write_index(uuid, snapshot_id, vectors.recorded | vectors.computed)
        return snapshot

    def _planned(
        self, table: Any, snapshot: TableSnapshot, snapshot_id: int, hint: dict[str, Any]
    ) -> TableSnapshot:
        """`snapshot` with only the data files pyiceberg's planning keeps for `hint`.

        The adds, deletion vectors included, are the whole snapshot's: planning with a
        filter would also drop delete files by their stats, and a data file served
        without an equality delete that applies to it would bring deleted rows back.
        """
        from share_store.iceberg.filters import row_filter
        from share_store.iceberg.planning import plan_files

        if snapshot_id == EMPTY_SNAPSHOT:
            return snapshot
        names = {field.name for field in schema_at(table, snapshot_id).fields}
        with self._reading(f"the storage of Iceberg warehouse '{self.warehouse}'"):
            scan = table.scan(snapshot_id=snapshot_id, row_filter=row_filter(hint, names))
            kept = {task.file.file_path for task in plan_files(scan, with_deletes=False).tasks}
        return snapshot.narrowed(a for a in snapshot.adds if a["path"] in kept)

    # -- one version's changes ------------------------------------------------------

    def commit(self, listing: IcebergListing, version: int) -> list[dict[str, Any]]:
        from share_store.iceberg import mapping

        snapshot_id = self._snapshot_id(listing, version)
        with self._lock:
            cached = self._commits.get(snapshot_id)
        if cached is None:
            try:
                with self._reading(f"the storage of Iceberg warehouse '{self.warehouse}'"):
                    cached = mapping.changes_of_snapshot(
                        listing.table, snapshot_id, self._previous_schema(listing, version)
                    )
            except mapping.ChangesThroughDeletes:
                cached = self._changes_through_deletes(listing, version)
            with self._lock:
                self._commits[snapshot_id] = cached
        return cached

    def parquet_commit(self, listing: IcebergListing, version: int) -> list[dict[str, Any]]:
        """One version's actions as the parquet format can carry them.

        In "materialize" mode, files with vectors become their materialized
        copies, and a version that changes them also gets `cdc` files of the
        rows it deleted and inserted (as Delta writes them for a DELETE with
        deletion vectors), so the change data feed reads row by row.
        """
        commit = self.commit(listing, version)
        with_vectors = any((a.get("add") or a.get("remove") or {}).get("deletionVector") for a in commit)
        if self.options.deletes.deletes_in_parquet != "materialize" or not with_vectors:
            return commit
        with self._lock:
            cached = self._parquet_commits.get(listing.snapshots[version])
        if cached is None:
            with self._reading(f"the storage of Iceberg warehouse '{self.warehouse}'"):
                cached = self._materialized().commit(commit)
            with self._lock:
                self._parquet_commits[listing.snapshots[version]] = cached
        return cached

    def _changes_through_deletes(self, listing: IcebergListing, version: int) -> list[dict[str, Any]]:
        """A snapshot's changes as the difference of its files (and their vectors) from the last."""
        from share_store.iceberg import mapping

        earlier = previous_version(listing, version)
        before = self.snapshot(earlier, listing) if earlier is not None else None
        snap = listing.table.metadata.snapshot_by_id(listing.snapshots[version])
        timestamp = listing.commit_times[version]
        return mapping.snapshot_changes(before, self.snapshot(version, listing), snap, timestamp)

    def _previous_schema(self, listing: IcebergListing, version: int) -> Any:
        earlier = previous_version(listing, version)
        return None if earlier is None else schema_at(listing.table, listing.snapshots[earlier])

    # -- where files live --------------------------------------------------------------

    def locate(self, path: str) -> tuple[str, str]:
        """Bucket and key of a table file named by an absolute Iceberg URI (see storage/file_uris.py);
        an own-warehouse table's files only inside its recorded location, or the server's cache."""
        if not self._loaded_once:
            self._load()
        return locate_file(self.storage, path, self._confined, self._derived)

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        """Where a deletion vector file of the cache is; None for an inline vector."""
        if descriptor.get("storageType") == "i":
            return None
        location = file_location(self.storage, descriptor["pathOrInlineDv"])
        # Only files the server derived are signed; any other descriptor is a bug, not a file to hand out.
        if self._derived is None or not self._derived.holds(*location):
            raise UnsupportedOperation("a deletion vector outside the server's cache cannot be shared")
        return location

    def _derived_files(self, table: Any) -> DerivedFiles:
        """The cache of files derived from this table's deletes (see iceberg/derived.py)."""
        if self._derived is None:
            from share_store.iceberg.derived import DerivedFiles

            bucket = self.options.deletes.cache_bucket or self.locate(table.metadata_location)[0]
            # Written with the configured keys: vended ones are commonly read-only.
            storage = self.configured_storage
            prefix = self.options.deletes.cache_prefix
            if self._confined is not None:
                # An own-warehouse table's committer writes its manifests: they may name any key, and
                # `locate_file` lets this cache's through. So the cache of such a table is a folder
                # of its own (by its location, which no other table holds), and another table's
                # derived files are outside it like any file outside the table.
                prefix = f"{prefix.rstrip('/')}/tables/{self._confined.bucket}/{self._confined.prefix}/"
            self._derived = DerivedFiles(storage, bucket, prefix, self._uri)
        return self._derived

    def _uri(self, bucket: str, key: str) -> str:
        """The absolute URI `locate` maps back to (bucket, key)."""
        return file_uri(self.storage, bucket, key)

    def _deletes(self, derived: DerivedFiles | None) -> DeleteFiles:
        if self._delete_files is None:
            from share_store.iceberg.deletes import DeleteFiles

            inline = self.options.deletes.inline_dv_bytes
            self._delete_files = DeleteFiles(self._read_delete_file, inline_bytes=inline)
        self._delete_files.derived = self._delete_files.derived or derived
        return self._delete_files

    def _read_file(self, bucket: str, key: str) -> bytes:
        return self.storage.read(bucket, key)

    def _read_delete_file(self, path: str) -> bytes:
        # Called within `_build`'s `_reading`, which turns a missing file into TableFilesMissing.
        return self.storage.read(*self.locate(path))

    def _open_data_file(self, path: str) -> BinaryIO:
        # Equality deletes read a data file's key columns only: opened, not read whole.
        return self.storage.open(*self.locate(path))

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        return self.storage.url_signer(now, lifetime)

    def check_files_exist(self, snapshot: TableSnapshot, with_dvs: bool = False, ahead: float = 0.0) -> bool:
        # Trusted for a while, as for Delta tables: a warm query of 10,000 files
        # would otherwise look each of them up again.
        if self._checked.fresh(snapshot.version, ahead):
            return False
        locations = [self.locate(add["path"]) for add in snapshot.adds]
        for add in snapshot.adds:
            vector = self.locate_dv(add["deletionVector"]) if add.get("deletionVector") else None
            if vector is not None:
                locations.append(vector)
        started = time.monotonic()
        self.check_exist(locations)
        self._checked.mark(snapshot.version, time.monotonic() - started)
        return True

    def check_exist(self, locations: list[tuple[str, str]]) -> None:
        missing = self.storage.count_missing(locations)
        if missing:
            raise TableFilesMissing.counted(missing)
