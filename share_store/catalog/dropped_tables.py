"""Dropping the catalog's tables, and its dropped tables and views: listed, undropped, purged.

A drop without purge keeps the table as dropped, as Lakekeeper's soft deletion
does: its row stays (out of every lookup by name, which is free for a new table
at once) and so does its claim on its folder, so that no other caller can
register its metadata or make a table over its files (`table_locations`: only a
caller allowed on the dropped table's own name may take the folder over). It is
listed (`list_dropped`) and undropped (`undrop`) until its warehouse's retention
(`warehouses.DROPPED_RETENTION`, 7 days) has passed; maintenance then purges it
whole (`purge_expired`). A drop with purge deletes the row and the files at once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from share_store.catalog import table_pointers, warehouse_rows
from share_store.catalog.names import TableName
from share_store.catalog.purge import purge, purge_folder
from share_store.catalog.table_pointers import TABLE, TablePointer
from share_store.catalog.views import ViewCatalog
from share_store.catalog.warehouses import dropped_retention
from share_store.errors import InvalidParameter, ShareStoreError
from share_store.storage.base import ObjectStorage
from share_store.storage.table_location import TableLocation

if TYPE_CHECKING:  # boto3 and STS are loaded only by servers that vend keys
    from share_store.storage.table_keys import TableKeys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DroppedTable:
    """A table (or view) dropped without purge, as the dropped listings show it."""

    #: Its row's id: tells two dropped tables of one name apart (Lakekeeper's tabular id).
    id: str
    name: TableName
    kind: str
    dropped_at: datetime
    #: When maintenance purges it: the drop plus its warehouse's retention, as set now.
    purge_after: datetime


class DroppedTables(ViewCatalog):
    """Tables dropped (with purge or without), listed, undropped and purged; `WarehouseCatalog`
    adds the live tables' creates and commits."""

    #: Storage for one table's folder with keys the store bounds to it, where it has STS
    #: (`storage.table_keys`, set by the app when vending is on): purges and maintenance's rewrites
    #: and removals go through it.
    table_keys: TableKeys | None = None

    def table_storage(self, location: TableLocation) -> ObjectStorage:
        """The storage to act on the table's files with for a caller: bounded to `location` by the
        store where it has STS, else the server's."""
        return self.storage if self.table_keys is None else self.table_keys.storage_for(location)

    def drop_table(self, table: TableName, purge: bool = False) -> None:
        """With `purge`, the table and its files gone now; without, the table dropped: kept, and its
        folder claimed, until its warehouse's retention has passed (`purge_expired`) or it is undropped."""
        with self._read() as conn:
            pointer = table_pointers.table_pointer(conn, table.warehouse, table.namespace, table.name)
        if not purge:
            self.drop_pointer(pointer)
            return
        location = self.locations.of(pointer)
        with self._change() as conn:
            table_pointers.delete_table(conn, pointer)
        # After the row is gone: a purge that fails halfway leaves files, never a table
        # pointing at deleted ones.
        self._purge(pointer.metadata_location, location)

    def list_dropped(
        self, warehouse: str, levels: tuple[str, ...] | None, kind: str | None = TABLE
    ) -> list[DroppedTable]:
        """The namespace's dropped tables (or views), by name and the latest drop first. A namespace
        dropped since still lists them (they wait for it to be made again, or for their purge).
        Without `levels`, the whole warehouse's; without `kind`, tables and views alike."""
        with self._read() as conn:
            warehouse_rows.check_warehouse_exists(conn, warehouse)
            found = table_pointers.dropped_tables(conn, warehouse, levels, kind)
            if not found and levels is not None:
                warehouse_rows.require_namespace(conn, warehouse, levels)
            retention = dropped_retention(warehouse_rows.warehouse_properties(conn, warehouse))
        return [DroppedTable(p.id, p.table, p.kind, p.dropped_at, p.dropped_at + retention)
                for p in found if p.dropped_at is not None]  # fmt: skip

    def undrop(self, targets: Sequence[tuple[TableName, str | None]], kind: str = TABLE) -> None:
        """Each dropped table (or view) live again under its name, all or none: the one of that name
        whose id is given, else the latest dropped. A name taken now is a 409 (`AlreadyExists`); a
        namespace dropped since must be made again first."""
        with self._change() as conn:
            for name, table_id in targets:
                warehouse_rows.check_warehouse_exists(conn, name.warehouse)
                pointer = table_pointers.dropped_pointer(
                    conn, name.warehouse, name.namespace, name.name, kind, table_id
                )
                warehouse_rows.require_namespace(conn, name.warehouse, name.namespace)
                table_pointers.undrop_table(conn, pointer)

    def purge_expired(self, now: datetime) -> list[TableName]:
        """Purge every dropped table and view whose warehouse's retention has passed by `now` (and
        those a purge began on and left): its files first, the whole folder, while its row still
        claims the folder, then its row. One that cannot be purged now is left for the next round."""
        with self._read() as conn:
            dropped = table_pointers.dropped_tables(conn, purging=True)
            retention = {w: dropped_retention(warehouse_rows.warehouse_properties(conn, w))
                         for w in {p.warehouse for p in dropped}}  # fmt: skip
        purged: list[TableName] = []
        for pointer in dropped:
            if pointer.dropped_at is not None and pointer.dropped_at + retention[pointer.warehouse] > now:
                continue
            with self._change() as conn:
                if not table_pointers.begin_purge(conn, pointer):
                    continue  # undropped, taken over or dropped again since it was read
            if self._purge_dropped(pointer):
                purged.append(pointer.table)
        return purged

    def _purge_dropped(self, pointer: TablePointer) -> bool:
        location = self.locations.recorded(pointer)
        if location is not None:  # one never recorded goes as a drop left tables before: files kept
            with self._read() as conn:
                others = self.locations.others(conn, pointer.warehouse, but=pointer)
            nested = tuple(other.folder for other in others if location.overlaps(other))
            try:
                purge_folder(self.table_storage(location), location, nested)
            except (OSError, ShareStoreError) as error:  # the store's STS too
                # The row stays, being purged: its folder claimed, tried again next round.
                log.warning("purge of dropped %s %s left files: %s", pointer.kind, pointer.table,
                            type(error).__name__)  # fmt: skip
                return False
        with self._change() as conn:
            return table_pointers.delete_table(conn, pointer)

    def _purge(self, metadata_location: str, location: TableLocation) -> None:
        try:
            metadata = self.files.parse(metadata_location)
        except (FileNotFoundError, InvalidParameter):
            return  # nothing reachable to find: the files stay, as any outside the location do
        try:
            purge(self.table_storage(location), metadata_location, metadata, location)
        except (OSError, ShareStoreError) as error:  # the store's STS refusing the table's keys too
            # The table is dropped already; what could not go stays, and the provider is told.
            log.warning("purge of %s left files: %s", location.uri, error)
