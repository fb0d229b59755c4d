"""The writable catalog: warehouses → namespaces → tables, each table a pointer to its metadata file.

Every change follows one order, so that a crash at any point leaves each
table at its old metadata or its new one and never points at a missing file:
the new metadata file is written to storage first, then the pointer in the
share store is swapped by compare-and-swap (`persistence.warehouses`). A
multi-table transaction swaps all its pointers in one database transaction.
A warehouse is a bucket of the configured storage; a table lives at
`<warehouse>/<namespace levels>/<table>-<uuid>/` unless it names a location
inside its warehouse.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from sqlalchemy.engine import Connection, Engine

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.iceberg.locations import TableLocation, file_location, file_uri
from share_store.persistence import warehouses as rows
from share_store.persistence.warehouses import TablePointer
from share_store.storage.base import ObjectStorage
from share_store.warehouses.commits import (
    committed_metadata,
    created_metadata,
    metadata_file_location,
    named_files,
    next_file_version,
    set_locations,
)
from share_store.warehouses.errors import AlreadyExists, CommitConflict, MetadataFileMissing
from share_store.warehouses.locations import (
    LocationRefused,
    assigned_location,
    check_files,
    check_no_overlap,
    check_write_paths,
    requested_location,
)
from share_store.warehouses.metadata_files import MetadataFiles
from share_store.warehouses.names import check_name, check_namespace, check_warehouse
from share_store.warehouses.purge import purge


@dataclass(frozen=True)
class LoadedTable:
    """A table as a load or a commit answers it; `metadata_location` is None for a staged create."""

    metadata_location: str | None
    metadata: TableMetadata
    #: Where the table lives, when recorded (None for a table made before locations were).
    location: TableLocation | None = None


@dataclass(frozen=True)
class TableName:
    warehouse: str
    namespace: tuple[str, ...]
    name: str

    @classmethod
    def of(cls, warehouse: str, namespace: tuple[str, ...] | list[str], name: str) -> TableName:
        return cls(check_warehouse(warehouse), check_namespace(namespace), check_name(name))

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name))


class WarehouseCatalog:
    def __init__(self, engine: Engine, storage: ObjectStorage) -> None:
        self.engine = engine
        self.storage = storage
        self.files = MetadataFiles(storage)
        #: Counts warehouses made or dropped here, so that a cached list of them knows it is stale.
        self.warehouse_changes = 0

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            yield conn

    @contextmanager
    def _change(self) -> Iterator[Connection]:
        with self.engine.begin() as conn:
            yield conn

    # -- warehouses ---------------------------------------------------------------------

    def create_warehouse(self, name: str, adopt: bool = False) -> None:
        """A new warehouse and its bucket. A bucket that exists already (a Delta table's, another
        application's) is refused, since its objects would become tables' files to overwrite and
        purge; `adopt` (the provider's own choice, never a catalog user's) takes it as it is."""
        check_warehouse(name)
        taken = AlreadyExists(
            f"bucket {name} already exists in the storage and is not a warehouse; the provider can adopt "
            f"it with `sharing-server table warehouse create {name} --adopt`"
        )
        with self._change() as conn:
            rows.create_warehouse(conn, name)
            # In the transaction: a bucket the storage refuses leaves no warehouse row behind.
            try:
                if not adopt and self.storage.bucket_exists(name):
                    raise taken
                self.storage.create_bucket(name)
            except FileExistsError:
                if not adopt:  # made by someone else since it was looked for
                    raise taken from None
            except PermissionError as error:
                raise UnsupportedOperation(f"the storage refused to create bucket {name}: {error}") from None
        self.warehouse_changes += 1

    def list_warehouses(self) -> list[str]:
        with self._read() as conn:
            return rows.list_warehouses(conn)

    def has_warehouse(self, name: str) -> bool:
        with self._read() as conn:
            return rows.warehouse_exists(conn, name)

    def drop_warehouse(self, name: str) -> None:
        with self._change() as conn:
            rows.drop_warehouse(conn, name)
        self.warehouse_changes += 1
        self.storage.delete_bucket(name)  # only if empty: objects left by others stay

    # -- namespaces ---------------------------------------------------------------------

    def create_namespace(self, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]) -> None:
        check_namespace(levels)
        with self._change() as conn:
            rows.create_namespace(conn, warehouse, levels, _string_properties(properties))

    def list_namespaces(self, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        with self._read() as conn:
            return rows.list_namespaces(conn, warehouse, parent)

    def load_namespace(self, warehouse: str, levels: tuple[str, ...]) -> dict[str, str]:
        with self._read() as conn:
            rows.check_warehouse_exists(conn, warehouse)
            return rows.namespace_properties(conn, warehouse, levels)

    def update_namespace_properties(
        self, warehouse: str, levels: tuple[str, ...], removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        """Updated, removed and missing keys, as the spec's response lists them."""
        overlap = set(removals) & set(updates)
        if overlap:
            raise InvalidParameter(f"a key cannot be both updated and removed: {', '.join(sorted(overlap))}")
        with self._change() as conn:
            properties = rows.namespace_properties(conn, warehouse, levels)
            missing = [key for key in removals if key not in properties]
            removed = [key for key in removals if key in properties]
            for key in removed:
                del properties[key]
            properties.update(_string_properties(updates))
            rows.set_namespace_properties(conn, warehouse, levels, properties)
        return sorted(updates), removed, missing

    def drop_namespace(self, warehouse: str, levels: tuple[str, ...]) -> None:
        with self._change() as conn:
            rows.drop_namespace(conn, warehouse, levels)

    # -- tables -------------------------------------------------------------------------

    def list_tables(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        with self._read() as conn:
            return rows.list_tables(conn, warehouse, levels)

    def create_table(
        self,
        table: TableName,
        schema: Any,
        partition_spec: Any,
        sort_order: Any,
        location: str | None,
        properties: dict[str, str],
        stage: bool = False,
    ) -> LoadedTable:
        with self._read() as conn:
            if not rows.namespace_exists(conn, table.warehouse, table.namespace):
                rows.check_warehouse_exists(conn, table.warehouse)
            if rows.find_table_pointer(conn, table.warehouse, table.namespace, table.name) is not None:
                raise AlreadyExists(f"Table already exists: {table}")
            defaults = rows.namespace_properties(conn, table.warehouse, table.namespace)
        where = self._new_location(table, location)
        given = table_defaults(defaults) | _string_properties(properties)
        metadata = created_metadata(schema, partition_spec, sort_order, where.uri, given)
        check_write_paths(self.storage, where, metadata.properties)
        if stage:
            return LoadedTable(None, metadata, where)
        metadata_location = metadata_file_location(where.uri, 0)
        self._swap([_Staged(table, None, where, metadata_location, metadata)])
        return LoadedTable(metadata_location, metadata, where)

    def load_table(self, table: TableName) -> LoadedTable:
        with self._read() as conn:
            pointer = rows.table_pointer(conn, table.warehouse, table.namespace, table.name)
        metadata = self.files.read(pointer.metadata_location)
        return LoadedTable(pointer.metadata_location, metadata, self._recorded(pointer))

    def table_location(self, table: TableName) -> TableLocation:
        """Where the table lives, recording it first for a table made before locations were recorded."""
        with self._read() as conn:
            pointer = rows.table_pointer(conn, table.warehouse, table.namespace, table.name)
        return self._location_of(pointer)

    def table_exists(self, table: TableName) -> bool:
        with self._read() as conn:
            return rows.find_table_pointer(conn, table.warehouse, table.namespace, table.name) is not None

    def commit(self, table: TableName, request: CommitTableRequest) -> LoadedTable:
        return self.commit_transaction([(table, request)])[0]

    def commit_transaction(self, changes: list[tuple[TableName, CommitTableRequest]]) -> list[LoadedTable]:
        """Apply every table's commit, all or none; a table's files are written before any swap."""
        names = [str(table) for table, _ in changes]
        if len(set(names)) != len(names):
            raise InvalidParameter("a transaction names one table more than once")
        with self._read() as conn:
            for table, _ in changes:
                rows.require_namespace(conn, table.warehouse, table.namespace)
            pointers = [rows.find_table_pointer(conn, t.warehouse, t.namespace, t.name) for t, _ in changes]
        staged = [self._staged(table, request, current)
                  for (table, request), current in zip(changes, pointers, strict=True)]  # fmt: skip
        self._swap(staged)
        return [LoadedTable(s.metadata_location, s.metadata, s.location) for s in staged]

    def _staged(self, table: TableName, request: CommitTableRequest, current: TablePointer | None) -> _Staged:
        """The commit's new metadata, after every path it names was found inside the table."""
        if current is None:
            # A staged create: the location comes from the commit, checked as a create's.
            asked = set_locations(request)
            metadata = committed_metadata(None, None, request)
            location = self._new_location(table, asked[-1] if asked else None)
            version = 0
        else:
            location = self._location_of(current)
            for moved in set_locations(request):
                if requested_location(self.storage, table.warehouse, moved) != location:
                    raise LocationRefused(
                        f"a table's location cannot move: {table} lives at {location.uri}, not {moved}"
                    )
            base = self.files.read(current.metadata_location)
            metadata = committed_metadata(base, current.metadata_location, request)
            version = next_file_version(current.metadata_location)
        check_files(self.storage, location, named_files(request))
        check_write_paths(self.storage, location, metadata.properties)
        if metadata.location != location.uri:
            metadata = metadata.model_copy(update={"location": location.uri})
        return _Staged(table, current, location, metadata_file_location(location.uri, version), metadata)

    def _swap(self, staged: list[_Staged]) -> None:
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
                self.files.write(change.location, change.metadata_location, change.metadata)
                written.append(change)
            with self._change() as conn:
                for change in staged:
                    self._point(conn, change)
                committing = True  # what raises from here on is the COMMIT
        except Exception:
            if committing and self._all_pointed(staged):
                return
            kept = self._pointed_at(written) if committing else set()
            for change in written:
                if change.metadata_location not in kept:
                    self.files.forget(change.location, change.metadata_location)
            raise

    def _point(self, conn: Connection, change: _Staged) -> None:
        t = change.table
        if change.current is not None:
            rows.swap_table_pointer(conn, change.current, change.metadata_location)
            return
        check_no_overlap(change.location, self._others(conn, t.warehouse))
        try:
            rows.insert_table(conn, t.warehouse, t.namespace, t.name, change.metadata_location,
                              change.location.prefix)  # fmt: skip
        except AlreadyExists:
            raise CommitConflict(f"Table was created by another commit: {t}") from None

    def _pointed_at(self, written: list[_Staged]) -> set[str]:
        """The written files some table now points at; all of them if the store cannot say."""
        try:
            with self._read() as conn:
                found = [rows.find_table_pointer(conn, c.table.warehouse, c.table.namespace, c.table.name)
                         for c in written]  # fmt: skip
        except Exception:  # noqa: BLE001 (whatever the store says, it cannot say: keep every file)
            return {c.metadata_location for c in written}
        return {p.metadata_location for p in found if p is not None}

    def _all_pointed(self, staged: list[_Staged]) -> bool:
        pointed = self._pointed_at(staged)
        return all(change.metadata_location in pointed for change in staged)

    def drop_table(self, table: TableName, purge: bool = False) -> None:
        with self._read() as conn:
            pointer = rows.table_pointer(conn, table.warehouse, table.namespace, table.name)
        location = self._location_of(pointer) if purge else None
        with self._change() as conn:
            rows.delete_table(conn, pointer)
        if location is not None:
            # After the row is gone: a purge that fails halfway leaves files, never a table
            # pointing at deleted ones.
            self._purge(pointer.metadata_location, location)

    def rename_table(self, source: TableName, target: TableName) -> None:
        """The table under another name; its files stay where its location is."""
        if source.warehouse != target.warehouse:
            raise InvalidParameter("a table cannot be renamed into another warehouse")
        with self._change() as conn:
            if rows.find_table_pointer(conn, target.warehouse, target.namespace, target.name) is not None:
                raise AlreadyExists(f"Table already exists: {target}")
            pointer = rows.table_pointer(conn, source.warehouse, source.namespace, source.name)
            rows.rename_table(conn, pointer, target.namespace, target.name)

    def register_table(
        self, table: TableName, metadata_location: str, overwrite: bool = False
    ) -> LoadedTable:
        """The table pointed at an existing metadata file; with `overwrite`, an existing table too.

        The file must be in the warehouse and in no other table's location before it
        is read at all; its table's location is then taken as a create's would be,
        and the file must be inside it.
        """
        with self._read() as conn:
            current = rows.find_table_pointer(conn, table.warehouse, table.namespace, table.name)
            others = self._others(conn, table.warehouse, but=current)
        file_folder = requested_location(self.storage, table.warehouse, metadata_location.rpartition("/")[0])
        check_no_overlap(file_folder, others)
        try:
            metadata = self.files.parse(metadata_location)
        except FileNotFoundError:
            raise InvalidParameter(f"no metadata file at {metadata_location}") from None
        location = requested_location(self.storage, table.warehouse, metadata.location)
        check_files(self.storage, location, [("metadata file", metadata_location)])
        check_write_paths(self.storage, location, metadata.properties)
        with self._change() as conn:
            check_no_overlap(location, self._others(conn, table.warehouse, but=current))
            if current is not None and overwrite:
                rows.swap_table_pointer(conn, current, metadata_location, location.prefix)
            else:
                rows.insert_table(conn, table.warehouse, table.namespace, table.name, metadata_location,
                                  location.prefix)  # fmt: skip
        return LoadedTable(metadata_location, metadata, location)

    # -- locations ------------------------------------------------------------------------

    def _new_location(self, table: TableName, asked: str | None) -> TableLocation:
        """A new table's location: the one asked for if the catalog takes it, else its own folder."""
        if asked is None:
            return assigned_location(self.storage, table.warehouse, table.namespace, table.name)
        location = requested_location(self.storage, table.warehouse, asked)
        with self._read() as conn:
            check_no_overlap(location, self._others(conn, table.warehouse))
        return location

    def _recorded(self, pointer: TablePointer) -> TableLocation | None:
        if pointer.location is None:
            return None
        return TableLocation(file_uri(self.storage, pointer.warehouse, pointer.location), pointer.warehouse,
                             pointer.location)  # fmt: skip

    def _location_of(self, pointer: TablePointer) -> TableLocation:
        """The recorded location; for a table made before it was recorded, its metadata's, if taken."""
        recorded = self._recorded(pointer)
        if recorded is not None:
            return recorded
        metadata = self.files.read(pointer.metadata_location)
        try:
            location = requested_location(self.storage, pointer.warehouse, metadata.location)
            with self._change() as conn:
                check_no_overlap(location, self._others(conn, pointer.warehouse, but=pointer))
                rows.record_location(conn, pointer.id, location.prefix)
        except LocationRefused as error:
            name = ".".join((*pointer.namespace, pointer.name))
            raise LocationRefused(
                f"table {name} was made before table locations were checked, and its location is not "
                f"one the catalog takes ({error.message}); register its metadata again at a location of "
                "its own"
            ) from None
        return location

    def _others(
        self, conn: Connection, warehouse: str, but: TablePointer | None = None
    ) -> list[tuple[str, TableLocation]]:
        """Every other table's location in the warehouse (a table made before they were recorded
        counts with its metadata's location, whatever it is)."""
        found = []
        for pointer in rows.tables_in(conn, warehouse):
            if but is not None and pointer.id == but.id:
                continue
            location = self._recorded(pointer) or self._unchecked_location(pointer)
            if location is not None:
                found.append((".".join((*pointer.namespace, pointer.name)), location))
        return found

    def _unchecked_location(self, pointer: TablePointer) -> TableLocation | None:
        try:
            metadata = self.files.read(pointer.metadata_location)
            bucket, key = file_location(self.storage, metadata.location.rstrip("/") + "/x")
        except (MetadataFileMissing, UnsupportedOperation):
            return None
        prefix = key.removesuffix("/x")
        return TableLocation(file_uri(self.storage, bucket, prefix), bucket, prefix)

    def _purge(self, metadata_location: str, location: TableLocation) -> None:
        try:
            metadata = self.files.parse(metadata_location)
        except (FileNotFoundError, InvalidParameter):
            return  # nothing reachable to find: the files stay, as any outside the location do
        purge(self.storage, metadata_location, metadata, location)


@dataclass(frozen=True)
class _Staged:
    """One table's commit, ready to swap: its new metadata and the file it is written to."""

    table: TableName
    current: TablePointer | None
    location: TableLocation
    metadata_location: str
    metadata: TableMetadata


def table_defaults(namespace_properties: dict[str, str]) -> dict[str, str]:
    """The namespace's `table-default.*` properties, which tables created in it start with.

    Iceberg's own convention (its catalogs' `table-default.` prefix), taken from the
    namespace so that engines which cannot ask for a property get it anyway:
    `table-default.format-version = 2` lets DuckDB 1.4, which writes only v2, create
    tables it can then write. A table's own properties win.
    """
    prefix = "table-default."
    return {
        key[len(prefix) :]: value for key, value in namespace_properties.items() if key.startswith(prefix)
    }


def _string_properties(properties: dict[str, Any]) -> dict[str, str]:
    if not isinstance(properties, dict):
        raise InvalidParameter("properties must be an object of strings")
    return {str(key): str(value) for key, value in properties.items()}
