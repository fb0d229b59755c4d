"""The catalog's record of where its tables live: new locations checked, old ones recorded, none overlapping.

The rules of one location are pure (`locations`: what is taken, what overlaps,
which dropped table's folder a caller may take); this is where they meet the
store. A location is claimed in the same database transaction that records
it, after the warehouse's row is locked (`warehouse_rows.lock_warehouse`), so two
creates racing for overlapping folders cannot both pass the check. Tables
made before locations were recorded count with every folder their metadata
shows (its `location`, and the folders of its metadata log and manifest
lists): one moved by `set-location` before the check existed keeps the files
it left behind. A dropped table whose folder a new location takes is forgotten
in the transaction that records the new one, its files the new table's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection

from share_store.catalog import table_pointers, warehouse_rows
from share_store.catalog.errors import MetadataFileMissing
from share_store.catalog.locations import (
    Claims,
    LocationRefused,
    MayTake,
    assigned_location,
    check_free,
    engine_default,
    no_one,
    requested_location,
)
from share_store.catalog.metadata_files import MetadataFiles
from share_store.catalog.table_pointers import TablePointer
from share_store.errors import UnsupportedOperation
from share_store.persistence.transactions import Transactions
from share_store.storage.base import ObjectStorage
from share_store.storage.file_uris import file_location, file_uri
from share_store.storage.table_location import TableLocation


class TableLocations:
    def __init__(self, transactions: Transactions, storage: ObjectStorage, files: MetadataFiles) -> None:
        self.transactions = transactions
        self.storage = storage
        self.files = files

    def new(
        self,
        warehouse: str,
        namespace: tuple[str, ...],
        name: str,
        asked: str | None,
        may_take: MayTake = no_one,
    ) -> TableLocation:
        """A new table's location: the one asked for if the catalog takes it, else a folder of its own
        (no location asked, or an engine's own default relative to nothing: `engine_default`).

        Checked now, before an engine writes a file there (a staged create's data
        files come before its commit), and claimed again when the table is recorded.
        """
        if asked is None or engine_default(asked):
            location = assigned_location(self.storage, warehouse, namespace, name)
        else:
            location = requested_location(self.storage, warehouse, asked, namespace)
        with self.transactions.read() as conn:
            check_free(location, self.claims(conn, warehouse), may_take)
        return location

    def claim(
        self,
        conn: Connection,
        warehouse: str,
        location: TableLocation,
        but: TablePointer | None = None,
        may_take: MayTake = no_one,
    ) -> None:
        """In the transaction that records `location`: no other table's overlaps it, nor can until it
        ends; a dropped table whose folder it may take is forgotten (its files become the new one's)."""
        warehouse_rows.lock_warehouse(conn, warehouse)
        for dropped in check_free(location, self.claims(conn, warehouse, but), may_take):
            # Conditional: a purge that began on it meanwhile (it takes no lock on the warehouse)
            # deletes the folder's files, so the folder is not to be taken.
            if not table_pointers.forget_dropped_table(conn, dropped):
                raise LocationRefused(f"table location {location.uri} overlaps another table's location")

    def recorded(self, pointer: TablePointer) -> TableLocation | None:
        if pointer.location is None:
            return None
        uri = file_uri(self.storage, pointer.warehouse, pointer.location)
        return TableLocation(uri, pointer.warehouse, pointer.location)

    def of(self, pointer: TablePointer) -> TableLocation:
        """The recorded location; for a table made before it was recorded, its metadata's, if taken."""
        recorded = self.recorded(pointer)
        if recorded is not None:
            return recorded
        metadata = self.files.read(pointer.metadata_location)
        try:
            location = requested_location(self.storage, pointer.warehouse, metadata.location)
            with self._change() as conn:
                self.claim(conn, pointer.warehouse, location, but=pointer)
                table_pointers.record_location(conn, pointer.id, location.prefix)
        except LocationRefused as error:
            name = ".".join((*pointer.namespace, pointer.name))
            raise LocationRefused(
                f"table {name} was made before table locations were checked, and its location is not "
                f"one the catalog takes ({error.message}); register its metadata again at a location of "
                "its own"
            ) from None
        return location

    def others(
        self, conn: Connection, warehouse: str, but: TablePointer | None = None
    ) -> list[TableLocation]:
        """The folders of every other table of the warehouse, dropped ones included."""
        return [folder for _, folders in self.claims(conn, warehouse, but) for folder in folders]

    def claims(self, conn: Connection, warehouse: str, but: TablePointer | None = None) -> Claims:
        """Every other table of the warehouse (dropped ones too) with the folders it claims."""
        found: Claims = []
        for pointer in table_pointers.tables_in(conn, warehouse):
            if but is not None and pointer.id == but.id:
                continue
            recorded = self.recorded(pointer)
            found.append((pointer, [recorded] if recorded is not None else self._unrecorded(pointer)))
        return found

    def _unrecorded(self, pointer: TablePointer) -> list[TableLocation]:
        """Every folder a table made before locations were recorded has files in, as its metadata shows."""
        try:
            metadata = self.files.read(pointer.metadata_location)
        except MetadataFileMissing:
            return []
        paths = [metadata.location.rstrip("/") + "/x", pointer.metadata_location]
        paths += [logged.metadata_file for logged in metadata.metadata_log]
        paths += [snapshot.manifest_list for snapshot in metadata.snapshots]
        folders = set()
        for path in paths:
            try:
                bucket, key = file_location(self.storage, path)
            except UnsupportedOperation:
                continue
            # A table's folder holds `metadata/`; a file elsewhere counts with its own folder.
            folder = key.rpartition("/metadata/")[0] if "/metadata/" in key else key.rpartition("/")[0]
            if folder:
                folders.add((bucket, folder))
        return [TableLocation(file_uri(self.storage, bucket, key), bucket, key) for bucket, key in folders]

    @contextmanager
    def _change(self) -> Iterator[Connection]:
        with self.transactions.change() as conn:
            yield conn
