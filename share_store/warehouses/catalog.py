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

import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from sqlalchemy.engine import Connection, Engine

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.iceberg.locations import file_location, file_uri
from share_store.persistence import warehouses as rows
from share_store.persistence.warehouses import TablePointer
from share_store.storage.base import ObjectStorage
from share_store.warehouses.commits import (
    committed_metadata,
    created_metadata,
    metadata_file_location,
    metadata_json,
    next_file_version,
    read_metadata,
)
from share_store.warehouses.errors import AlreadyExists, CommitConflict
from share_store.warehouses.names import check_name, check_namespace, check_warehouse
from share_store.warehouses.purge import reachable_files

#: Metadata files parsed and kept (they never change once written).
METADATA_CACHE = 256


@dataclass(frozen=True)
class LoadedTable:
    """A table as a load or a commit answers it; `metadata_location` is None for a staged create."""

    metadata_location: str | None
    metadata: TableMetadata


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
        self._metadata: OrderedDict[str, TableMetadata] = OrderedDict()
        self._lock = threading.Lock()
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

    def create_warehouse(self, name: str) -> None:
        check_warehouse(name)
        with self._change() as conn:
            rows.create_warehouse(conn, name)
            # In the transaction: a bucket the storage refuses leaves no warehouse row behind.
            try:
                self.storage.create_bucket(name)
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

    def default_location(self, table: TableName) -> str:
        key = "/".join((*table.namespace, f"{table.name}-{uuid.uuid4().hex}"))
        return file_uri(self.storage, table.warehouse, key)

    def _check_location(self, warehouse: str, location: str) -> str:
        """`location` if it is inside the warehouse's bucket (no escape), else a 400."""
        try:
            bucket, key = file_location(self.storage, location.rstrip("/") + "/x")
        except UnsupportedOperation:
            bucket, key = "", ""
        if bucket != warehouse or not key:
            raise InvalidParameter(f"table location {location!r} is not inside warehouse {warehouse}")
        return location.rstrip("/")

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
        where = self._check_location(table.warehouse, location) if location else self.default_location(table)
        given = table_defaults(defaults) | _string_properties(properties)
        metadata = created_metadata(schema, partition_spec, sort_order, where, given)
        if stage:
            return LoadedTable(None, metadata)
        metadata_location = metadata_file_location(metadata, 0)
        self._write(metadata_location, metadata)
        try:
            with self._change() as conn:
                rows.insert_table(conn, table.warehouse, table.namespace, table.name, metadata_location)
        except Exception:
            self._forget_file(metadata_location)
            raise
        return LoadedTable(metadata_location, metadata)

    def load_table(self, table: TableName) -> LoadedTable:
        with self._read() as conn:
            pointer = rows.table_pointer(conn, table.warehouse, table.namespace, table.name)
        return LoadedTable(pointer.metadata_location, self._metadata_at(pointer.metadata_location))

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
        staged: list[tuple[TableName, TablePointer | None, str, TableMetadata]] = []
        with self._read() as conn:
            for table, _ in changes:
                rows.require_namespace(conn, table.warehouse, table.namespace)
            pointers = [rows.find_table_pointer(conn, t.warehouse, t.namespace, t.name) for t, _ in changes]
        for (table, request), current in zip(changes, pointers, strict=True):
            base_location = current.metadata_location if current else None
            base = self._metadata_at(base_location) if base_location else None
            metadata = committed_metadata(base, base_location, request)
            if current is None:
                self._check_location(table.warehouse, metadata.location)
            staged.append((table, current, metadata_file_location(metadata, next_file_version(base_location)),
                           metadata))  # fmt: skip
        written: list[str] = []
        try:
            for _, _, location, metadata in staged:
                self._write(location, metadata)
                written.append(location)
            with self._change() as conn:
                for table, current, location, _ in staged:
                    if current is None:
                        try:
                            rows.insert_table(conn, table.warehouse, table.namespace, table.name, location)
                        except AlreadyExists:
                            raise CommitConflict(f"Table was created by another commit: {table}") from None
                    else:
                        rows.swap_table_pointer(conn, current, location)
        except Exception:
            for location in written:
                self._forget_file(location)
            raise
        return [LoadedTable(location, metadata) for _, _, location, metadata in staged]

    def drop_table(self, table: TableName, purge: bool = False) -> None:
        with self._change() as conn:
            pointer = rows.table_pointer(conn, table.warehouse, table.namespace, table.name)
            rows.delete_table(conn, pointer)
        if purge:
            # After the row is gone: a purge that fails halfway leaves files, never a table
            # pointing at deleted ones.
            metadata = self._metadata_at(pointer.metadata_location)
            self._purge(pointer.metadata_location, metadata)

    def rename_table(self, source: TableName, target: TableName) -> None:
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
        """The table pointed at an existing metadata file; with `overwrite`, an existing table too."""
        self._check_location(table.warehouse, metadata_location.rpartition("/")[0])
        try:
            metadata = self._metadata_at(metadata_location)
        except FileNotFoundError:
            raise InvalidParameter(f"no metadata file at {metadata_location}") from None
        self._check_location(table.warehouse, metadata.location)
        with self._change() as conn:
            current = rows.find_table_pointer(conn, table.warehouse, table.namespace, table.name)
            if current is not None and overwrite:
                rows.swap_table_pointer(conn, current, metadata_location)
            else:
                rows.insert_table(conn, table.warehouse, table.namespace, table.name, metadata_location)
        return LoadedTable(metadata_location, metadata)

    # -- files --------------------------------------------------------------------------

    def _write(self, location: str, metadata: TableMetadata) -> None:
        bucket, key = file_location(self.storage, location)
        self.storage.write(bucket, key, metadata_json(metadata))
        self._remember(location, metadata)

    def _forget_file(self, location: str) -> None:
        # An orphan metadata file is harmless: the refusal that got us here is what matters.
        with suppress(Exception):
            self.storage.delete(*_one(file_location(self.storage, location)))

    def _metadata_at(self, location: str) -> TableMetadata:
        with self._lock:
            if location in self._metadata:
                self._metadata.move_to_end(location)
                return self._metadata[location]
        bucket, key = file_location(self.storage, location)
        metadata = read_metadata(self.storage.read(bucket, key))
        self._remember(location, metadata)
        return metadata

    def _remember(self, location: str, metadata: TableMetadata) -> None:
        with self._lock:
            self._metadata[location] = metadata
            while len(self._metadata) > METADATA_CACHE:
                self._metadata.popitem(last=False)

    def _purge(self, metadata_location: str, metadata: TableMetadata) -> None:
        """Delete what the table's metadata reaches inside its own location, and nothing else."""
        inside = file_location(self.storage, metadata.location.rstrip("/") + "/x")
        prefix = inside[1][:-1]
        by_bucket: dict[str, list[str]] = {}
        for path in reachable_files(metadata_location, metadata, self.storage):
            try:
                bucket, key = file_location(self.storage, path)
            except UnsupportedOperation:
                continue
            if bucket == inside[0] and key.startswith(prefix):
                by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            self.storage.delete(bucket, keys)


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


def _one(location: tuple[str, str]) -> tuple[str, list[str]]:
    return location[0], [location[1]]


def _string_properties(properties: dict[str, Any]) -> dict[str, str]:
    if not isinstance(properties, dict):
        raise InvalidParameter("properties must be an object of strings")
    return {str(key): str(value) for key, value in properties.items()}
