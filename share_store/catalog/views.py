"""The writable catalog's views: each a pointer to its metadata file, as a table is.

A view lives in its namespace beside the tables and shares their names (one
row of `warehouse_tables` per name, its `kind` beside it: a view cannot be made
where a table is, nor a table where a view is). Its location is the catalog's
decision, as a table's (`TableLocations`: inside its warehouse and namespace
folder, overlapping no table's or other view's), recorded with its pointer;
`set-location` may only name it again. Every metadata file is written inside
it (`MetadataFiles.write` confines it) before the pointer is swapped by
compare-and-swap, so a commit that lost the race is a `CommitConflict` and the
pointer never names a missing file. A drop keeps the view as dropped, as a
table's drop without purge does (`dropped_tables`): its name free, its folder claimed
until it is undropped or its warehouse's retention has passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyiceberg.schema import Schema
from pyiceberg.view.metadata import ViewMetadata, ViewVersion
from sqlalchemy.engine import Connection

from share_store.catalog import table_pointers, warehouse_rows
from share_store.catalog.commits import metadata_file_location, next_file_version
from share_store.catalog.errors import AlreadyExists, MetadataFileMissing
from share_store.catalog.locations import LocationRefused, MayTake, no_one, requested_location
from share_store.catalog.names import TableName
from share_store.catalog.table_pointers import VIEW, TablePointer
from share_store.catalog.view_commits import (
    ViewCommit,
    check_view_requirements,
    created_view,
    updated_view,
)
from share_store.catalog.warehouses import Warehouses
from share_store.errors import InvalidParameter
from share_store.persistence.mappers import utc_now
from share_store.storage.table_location import TableLocation


@dataclass(frozen=True)
class LoadedView:
    """A view as a load, create, replace or register answers it."""

    metadata_location: str
    metadata: ViewMetadata


@dataclass(frozen=True)
class NewView:
    """What a view's create asks for: its schema, first version, location (checked) and properties."""

    schema: Schema
    version: ViewVersion
    location: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


class ViewCatalog(Warehouses):
    """The views of the catalog's warehouses; `WarehouseCatalog` adds the tables."""

    def list_views(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        with self._read() as conn:
            return table_pointers.list_tables(conn, warehouse, levels, VIEW)

    def view_exists(self, view: TableName) -> bool:
        with self._read() as conn:
            return (
                table_pointers.find_table_pointer(conn, view.warehouse, view.namespace, view.name, VIEW)
                is not None
            )

    def load_view(self, view: TableName) -> LoadedView:
        with self._read() as conn:
            pointer = table_pointers.table_pointer(conn, view.warehouse, view.namespace, view.name, VIEW)
        return LoadedView(pointer.metadata_location, self.files.read_view(pointer.metadata_location))

    def create_view(self, view: TableName, new: NewView, may_take: MayTake = no_one) -> LoadedView:
        """`may_take`: whether the caller may take over a dropped table's or view's folder."""
        with self._read() as conn:
            if not warehouse_rows.namespace_exists(conn, view.warehouse, view.namespace):
                warehouse_rows.check_warehouse_exists(conn, view.warehouse)
                warehouse_rows.require_namespace(conn, view.warehouse, view.namespace)
            self._check_free(conn, view)
        where = self.locations.new(view.warehouse, view.namespace, view.name, new.location, may_take)
        metadata = created_view(new.schema, new.version, where.uri, dict(new.properties))
        metadata_location = metadata_file_location(where.uri, 0)
        self._write_and_point(view, None, where, metadata_location, metadata, may_take)
        return LoadedView(metadata_location, metadata)

    def replace_view(self, view: TableName, commit: ViewCommit) -> LoadedView:
        """The commit applied to the view's current metadata, written, and the pointer swapped to it."""
        with self._read() as conn:
            warehouse_rows.require_namespace(conn, view.warehouse, view.namespace)
            current = table_pointers.table_pointer(conn, view.warehouse, view.namespace, view.name, VIEW)
        location = self.locations.of(current)
        base = self.files.read_view(current.metadata_location)
        check_view_requirements(base, commit)  # a stale commit is a 409 before its locations are read
        for moved in commit.set_locations():
            if requested_location(self.storage, view.warehouse, moved) != location:
                raise LocationRefused(
                    f"a view's location cannot move: {view} lives at {location.uri}, not {moved}"
                )
        metadata = updated_view(base, commit)
        if metadata.location != location.uri:
            metadata = metadata.model_copy(update={"location": location.uri})
        metadata_location = metadata_file_location(location.uri, next_file_version(current.metadata_location))
        self._write_and_point(view, current, location, metadata_location, metadata)
        return LoadedView(metadata_location, metadata)

    def drop_view(self, view: TableName) -> None:
        with self._read() as conn:
            pointer = table_pointers.table_pointer(conn, view.warehouse, view.namespace, view.name, VIEW)
        self.drop_pointer(pointer)

    def drop_pointer(self, pointer: TablePointer) -> None:
        """A table or view dropped, kept as such. A table made before locations were recorded has its
        location recorded first where the catalog takes it, so that its folder is claimed whole while
        it is dropped (one it refuses goes on claiming the folders its metadata shows)."""
        if pointer.location is None:
            try:
                self.locations.of(pointer)
            except (InvalidParameter, MetadataFileMissing):  # LocationRefused among them
                pass
        with self._change() as conn:
            table_pointers.drop_table(conn, pointer, utc_now())

    def rename_view(self, source: TableName, target: TableName) -> None:
        """The view under another name; its files stay where its location is."""
        if source.warehouse != target.warehouse:
            raise InvalidParameter("a view cannot be renamed into another warehouse")
        with self._change() as conn:
            # The spec's order: a missing source is a 404 before a taken destination is a 409.
            pointer = table_pointers.table_pointer(
                conn, source.warehouse, source.namespace, source.name, VIEW
            )
            warehouse_rows.require_namespace(conn, target.warehouse, target.namespace)
            self._check_free(conn, target)
            table_pointers.rename_table(conn, pointer, target.namespace, target.name)

    def register_view(
        self, view: TableName, metadata_location: str, may_take: MayTake = no_one
    ) -> LoadedView:
        """A view pointed at an existing view metadata file, inside the location that file names.

        As a table's register: the file must be in the warehouse, in the view's namespace folder and in
        no other table's or view's location before it is read at all.
        """
        with self._read() as conn:
            warehouse_rows.require_namespace(conn, view.warehouse, view.namespace)
            self._check_free(conn, view)
            claims = self.locations.claims(conn, view.warehouse)
        parse = self.files.parse_view
        metadata, location = self._registered(view, metadata_location, claims, parse, may_take)
        with self._change() as conn:
            self.locations.claim(conn, view.warehouse, location, may_take=may_take)
            table_pointers.insert_table(conn, view.warehouse, view.namespace, view.name, metadata_location,
                                        location.prefix, VIEW)  # fmt: skip
        return LoadedView(metadata_location, metadata)

    @staticmethod
    def _check_free(conn: Connection, name: TableName) -> None:
        taken = table_pointers.kind_named(conn, name.warehouse, name.namespace, name.name)
        if taken is not None:  # tables and views share one name space
            raise AlreadyExists(f"{taken.title()} already exists: {name}")

    def _write_and_point(
        self,
        view: TableName,
        current: TablePointer | None,
        location: TableLocation,
        metadata_location: str,
        metadata: ViewMetadata,
        may_take: MayTake = no_one,
    ) -> None:
        """Write the metadata file, then insert or swap the pointer; the file is taken back if the
        pointer does not name it after all (a COMMIT that failed may have happened: read again)."""
        self.files.write(location, metadata_location, metadata)
        try:
            with self._change() as conn:
                if current is not None:
                    table_pointers.swap_table_pointer(conn, current, metadata_location)
                    return
                self.locations.claim(conn, view.warehouse, location, may_take=may_take)
                table_pointers.insert_table(conn, view.warehouse, view.namespace, view.name,
                                            metadata_location, location.prefix, VIEW)  # fmt: skip
        except Exception:
            pointed = self._view_pointed_at(view)
            if pointed == metadata_location:
                return  # the COMMIT happened after all
            if pointed is not None:
                self.files.forget(location, metadata_location)
            raise

    def _view_pointed_at(self, view: TableName) -> str | None:
        """The metadata file the view names now ("" for no view); None if the store cannot say."""
        try:
            with self._read() as conn:
                found = table_pointers.find_table_pointer(
                    conn, view.warehouse, view.namespace, view.name, VIEW
                )
        except Exception:  # noqa: BLE001 (whatever the store says, it cannot say: keep the file)
            return None
        return found.metadata_location if found is not None else ""
