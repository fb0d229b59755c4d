"""The writable catalog: warehouses → namespaces → tables, each table a pointer to its metadata file.

Every change follows one order, so that a crash at any point leaves each
table at its old metadata or its new one and never points at a missing file:
the new metadata file is written to storage first, then the pointer in the
share store is swapped by compare-and-swap (`table_pointers`). A
multi-table transaction swaps all its pointers in one database transaction.
A warehouse is a bucket of the configured storage. Where a table lives is
the catalog's decision, recorded with its pointer (`table_locations`): every
file it writes, deletes or hands to a reader for a table is inside that
location (`storage.table_location.TableLocation.confine`), whatever the caller's
metadata names. Metadata files a commit stops tracking are deleted after it,
when the table asks (`write.metadata.delete-after-commit.enabled`), and only
the table's own (`MetadataFiles.delete_superseded`). Drops, undrops and purges are
`dropped_tables`'.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import SortOrder
from sqlalchemy.engine import Connection

from share_store.catalog import table_pointers, warehouse_rows
from share_store.catalog.commits import (
    check_requirements,
    committed_metadata,
    created_metadata,
    metadata_file_location,
    named_files,
    next_file_version,
    removed_metadata_files,
    set_locations,
    string_properties,
    table_defaults,
    updated_metadata,
)
from share_store.catalog.dropped_tables import DroppedTables
from share_store.catalog.errors import AlreadyExists, CommitConflict
from share_store.catalog.locations import (
    LocationRefused,
    MayTake,
    check_files,
    check_write_paths,
    no_one,
    requested_location,
)
from share_store.catalog.metadata_text import MetadataText, metadata_text
from share_store.catalog.names import TableName
from share_store.catalog.table_pointers import TablePointer
from share_store.errors import InvalidParameter
from share_store.storage.table_location import TableLocation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedTable:
    """A table as a load or a commit answers it; `metadata_location` is None for a staged create."""

    metadata_location: str | None
    metadata: TableMetadata
    #: Where the table lives, when recorded (None for a table made before locations were).
    location: TableLocation | None = None
    #: `metadata` as JSON (`commits.metadata_json`), when at hand: the bytes of its file, which the
    #: answer carries as they are rather than serialising a long history again.
    text: bytes | None = None


@dataclass(frozen=True)
class NewTable:
    """What a create asks for: the table's schema and, optionally, its partitioning, sort order,
    location (checked: see `locations.requested_location`), properties, and whether it is only
    staged (nothing stored until a commit makes it)."""

    schema: Schema
    partition_spec: PartitionSpec | None = None
    sort_order: SortOrder | None = None
    location: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    stage: bool = False


class WarehouseCatalog(DroppedTables):
    """The catalog: its warehouses and namespaces (`Warehouses`), views (`ViewCatalog`), drops
    (`DroppedTables`), and here its tables' creates, loads, commits, renames and registers."""

    def list_tables(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        with self._read() as conn:
            return table_pointers.list_tables(conn, warehouse, levels)

    def create_table(self, table: TableName, new: NewTable, may_take: MayTake = no_one) -> LoadedTable:
        """`may_take`: whether the caller may take over a dropped table's folder (`table_locations`)."""
        with self._read() as conn:
            if not warehouse_rows.namespace_exists(conn, table.warehouse, table.namespace):
                warehouse_rows.check_warehouse_exists(conn, table.warehouse)
            taken = table_pointers.kind_named(conn, table.warehouse, table.namespace, table.name)
            if taken is not None:  # tables and views share one name space
                raise AlreadyExists(f"{taken.title()} already exists: {table}")
            defaults = table_defaults(
                warehouse_rows.warehouse_properties(conn, table.warehouse),
                warehouse_rows.namespace_properties(conn, table.warehouse, table.namespace),
            )
        where = self.locations.new(table.warehouse, table.namespace, table.name, new.location, may_take)
        given = defaults | string_properties(dict(new.properties))
        metadata = created_metadata(new.schema, new.partition_spec, new.sort_order, where.uri, given)
        check_write_paths(self.storage, where, metadata.properties)
        if new.stage:
            return LoadedTable(None, metadata, where)
        metadata_location = metadata_file_location(where.uri, 0)
        text = metadata_text(metadata)
        self._swap([_Staged(table, None, where, metadata_location, metadata, text)], may_take)
        return LoadedTable(metadata_location, metadata, where, text.data)

    def load_table(self, table: TableName) -> LoadedTable:
        with self._read() as conn:
            pointer = table_pointers.table_pointer(conn, table.warehouse, table.namespace, table.name)
        metadata, text = self.files.read_with_json(pointer.metadata_location)
        return LoadedTable(pointer.metadata_location, metadata, self.locations.recorded(pointer), text)

    def table_location(self, table: TableName) -> TableLocation:
        """Where the table lives, recording it first for a table made before locations were recorded."""
        with self._read() as conn:
            pointer = table_pointers.table_pointer(conn, table.warehouse, table.namespace, table.name)
        return self.locations.of(pointer)

    def table_exists(self, table: TableName) -> bool:
        with self._read() as conn:
            return (
                table_pointers.find_table_pointer(conn, table.warehouse, table.namespace, table.name)
                is not None
            )

    def commit(
        self,
        table: TableName,
        request: CommitTableRequest,
        based_on: str | None = None,
        *,
        later: list[Callable[[], None]] | None = None,
        may_take: MayTake = no_one,
    ) -> LoadedTable:
        """`based_on`: the metadata file the commit was decided on, for the server's own commits
        (maintenance), which decide on more than the spec's requirements can assert (a ref made
        since is none they could name): a commit made since is a conflict. `later`, `may_take`: as
        `commit_transaction`'s."""
        chosen = {table: based_on} if based_on else None
        return self.commit_transaction([(table, request)], chosen, later=later, may_take=may_take)[0]

    def commit_transaction(
        self,
        changes: list[tuple[TableName, CommitTableRequest]],
        based_on: Mapping[TableName, str] | None = None,
        *,
        later: list[Callable[[], None]] | None = None,
        may_take: MayTake = no_one,
    ) -> list[LoadedTable]:
        """Apply every table's commit, all or none; a table's files are written before any swap.

        With `later`, the deletion of the metadata files the commits stopped tracking is added
        to it rather than done: the HTTP API runs it once the answer is sent, as nothing in the
        answer depends on it (a storage round trip per commit once a table's log is full).
        `may_take`: whether a staged create may take over a dropped table's folder."""
        names = [str(table) for table, _ in changes]
        if len(set(names)) != len(names):
            raise InvalidParameter("a transaction names one table more than once")
        with self._read() as conn:
            for table, _ in changes:
                warehouse_rows.require_namespace(conn, table.warehouse, table.namespace)
            pointers = [
                table_pointers.find_table_pointer(conn, t.warehouse, t.namespace, t.name) for t, _ in changes
            ]
        staged = [self._staged(table, request, current, (based_on or {}).get(table), may_take)
                  for (table, request), current in zip(changes, pointers, strict=True)]  # fmt: skip
        self._swap(staged, may_take)
        # Only now that every pointer is swapped: a failed commit deletes nothing it replaced.
        for change in staged:
            if change.current is not None:
                self.files.replaced(change.current.metadata_location)
            if later is None:
                self._delete_superseded(change)
            elif change.removed:
                later.append(functools.partial(self._delete_superseded, change))
        return [LoadedTable(s.metadata_location, s.metadata, s.location, s.text.data) for s in staged]

    def _staged(
        self,
        table: TableName,
        request: CommitTableRequest,
        current: TablePointer | None,
        based_on: str | None,
        may_take: MayTake = no_one,
    ) -> _Staged:
        """The commit's new metadata, after every path it names was found inside the table."""
        if current is None:
            # A staged create: the location comes from the commit, checked as a create's.
            base: TableMetadata | None = None
            base_text: MetadataText | None = None
            asked = set_locations(request)
            metadata = committed_metadata(None, None, request)
            location = self.locations.new(
                table.warehouse, table.namespace, table.name, asked[-1] if asked else None, may_take
            )
            version = 0
        else:
            location = self.locations.of(current)
            base, base_text = self.files.read_with_text(current.metadata_location)
            check_requirements(base, request)  # a stale or create-asserting commit is a 409 first
            if based_on is not None and current.metadata_location != based_on:
                raise CommitConflict(f"Requirement failed: {table} was changed by another commit")
            for moved in set_locations(request):
                if requested_location(self.storage, table.warehouse, moved) != location:
                    raise LocationRefused(
                        f"a table's location cannot move: {table} lives at {location.uri}, not {moved}"
                    )
            metadata = updated_metadata(base, current.metadata_location, request)
            version = next_file_version(current.metadata_location)
        check_files(self.storage, location, named_files(request))
        check_write_paths(self.storage, location, metadata.properties)
        if metadata.location != location.uri:
            metadata = metadata.model_copy(update={"location": location.uri})
        metadata_location = metadata_file_location(location.uri, version)
        removed = () if base is None or current is None else tuple(
            removed_metadata_files(base, current.metadata_location, metadata, metadata_location)
        )  # fmt: skip
        # Serialised once, after every check: the file written and the commit's answer are these bytes,
        # its unchanged snapshots copied from the base's.
        text = metadata_text(metadata, base_text)
        return _Staged(table, current, location, metadata_location, metadata, text, removed)

    def _delete_superseded(self, change: _Staged) -> None:
        """The old metadata files of a committed change that the table asked to drop."""
        if not change.removed:
            return
        kept = [change.metadata_location, *(entry.metadata_file for entry in change.metadata.metadata_log)]
        try:
            self.files.delete_superseded(change.location, change.removed, kept)
        except Exception as error:  # noqa: BLE001 (the commit happened: failing it would have it retried)
            # Left files are harmless (unreferenced); the message names no path or credential.
            log.warning("could not delete old metadata files of %s: %s", change.table, type(error).__name__)

    def _swap(self, staged: list[_Staged], may_take: MayTake = no_one) -> None:
        """Write each new metadata file, then swap (or insert) every pointer in one transaction.

        A failure before the transaction commits takes the files back. A failure of
        the COMMIT itself leaves the outcome unknown (the database may have
        committed): the pointers are read again, and no file one of them names is
        deleted; if they all name the new files, the commit happened.
        """
        written: list[_Staged] = []
        committing = False
        try:
            for change in staged:
                self.files.write(change.location, change.metadata_location, change.metadata, change.text)
                written.append(change)
            with self._change() as conn:
                # New tables' warehouses first, in one order: a transaction never holds a table's row
                # while it waits for a warehouse another holds while it waits for that table.
                for warehouse in sorted({c.table.warehouse for c in staged if c.current is None}):
                    warehouse_rows.lock_warehouse(conn, warehouse)
                for change in staged:
                    self._point(conn, change, may_take)
                committing = True  # what raises from here on is the COMMIT
        except Exception:
            # Read once: every file was written before the transaction, so `written` is `staged`.
            kept = self._pointed_at(written) if committing else set()
            if committing and all(change.metadata_location in kept for change in staged):
                return
            for change in written:
                if change.metadata_location not in kept:
                    self.files.forget(change.location, change.metadata_location)
            raise

    def _point(self, conn: Connection, change: _Staged, may_take: MayTake) -> None:
        t = change.table
        if change.current is not None:
            table_pointers.swap_table_pointer(conn, change.current, change.metadata_location)
            return
        self.locations.claim(conn, t.warehouse, change.location, may_take=may_take)
        try:
            table_pointers.insert_table(conn, t.warehouse, t.namespace, t.name, change.metadata_location,
                                        change.location.prefix)  # fmt: skip
        except AlreadyExists:
            raise CommitConflict(f"Table was created by another commit: {t}") from None

    def _pointed_at(self, written: list[_Staged]) -> set[str]:
        """The written files some table now points at; all of them if the store cannot say."""
        try:
            with self._read() as conn:
                found = [table_pointers.find_table_pointer(conn, c.table.warehouse, c.table.namespace,
                                                           c.table.name) for c in written]  # fmt: skip
        except Exception:  # noqa: BLE001 (whatever the store says, it cannot say: keep every file)
            return {c.metadata_location for c in written}
        return {p.metadata_location for p in found if p is not None}

    def rename_table(self, source: TableName, target: TableName) -> None:
        """The table under another name; its files stay where its location is."""
        if source.warehouse != target.warehouse:
            raise InvalidParameter("a table cannot be renamed into another warehouse")
        with self._change() as conn:
            # The spec's order: a missing source is a 404 before a taken destination is a 409.
            pointer = table_pointers.table_pointer(conn, source.warehouse, source.namespace, source.name)
            taken = table_pointers.kind_named(conn, target.warehouse, target.namespace, target.name)
            if taken is not None:
                raise AlreadyExists(f"{taken.title()} already exists: {target}")
            table_pointers.rename_table(conn, pointer, target.namespace, target.name)

    def register_table(
        self, table: TableName, metadata_location: str, overwrite: bool = False, may_take: MayTake = no_one
    ) -> LoadedTable:
        """The table pointed at an existing metadata file; with `overwrite`, an existing table too.

        The file must be in the warehouse and in no other table's location before it
        is read at all (a dropped table's only if the caller `may_take` it); its table's
        location is then taken as a create's would be, and the file must be inside it.
        """
        with self._read() as conn:
            current = table_pointers.find_table_pointer(conn, table.warehouse, table.namespace, table.name)
            claims = self.locations.claims(conn, table.warehouse, but=current)
        metadata, location = self._registered(table, metadata_location, claims, self.files.parse, may_take)
        check_write_paths(self.storage, location, metadata.properties)
        with self._change() as conn:
            self.locations.claim(conn, table.warehouse, location, but=current, may_take=may_take)
            if current is not None and overwrite:
                table_pointers.swap_table_pointer(conn, current, metadata_location, location.prefix)
            else:
                table_pointers.insert_table(conn, table.warehouse, table.namespace, table.name,
                                            metadata_location, location.prefix)  # fmt: skip
        return LoadedTable(metadata_location, metadata, location)


@dataclass(frozen=True)
class _Staged:
    """One table's commit, ready to swap: its new metadata and the file it is written to."""

    table: TableName
    current: TablePointer | None
    location: TableLocation
    metadata_location: str
    metadata: TableMetadata
    #: `metadata_text(metadata)`: the file's bytes, and the commit's answer's.
    text: MetadataText
    #: The metadata files the commit stops tracking, for the table to drop (`removed_metadata_files`).
    removed: tuple[str, ...] = ()
