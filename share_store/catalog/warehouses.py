"""Warehouses and namespaces of the writable catalog: what holds tables, and their defaults.

A warehouse is a bucket of the configured storage, made for it (an existing
bucket only when the provider adopts it). Its properties and its namespaces'
are the `table-default.*` a new table starts with; a warehouse's also say how
long its dropped tables are kept (`DROPPED_RETENTION`, 7 days unless set). `WarehouseCatalog`
(`catalog.py`) is these and the tables in them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from share_store.catalog import warehouse_rows
from share_store.catalog.commits import TABLE_DEFAULT, changed_properties, string_properties
from share_store.catalog.errors import AlreadyExists
from share_store.catalog.locations import Claims, MayTake, check_files, check_free, requested_location
from share_store.catalog.metadata_files import MetadataFiles
from share_store.catalog.names import TableName, check_namespace, check_warehouse
from share_store.catalog.table_locations import TableLocations
from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.persistence.transactions import Transactions
from share_store.storage.base import ObjectStorage
from share_store.storage.table_location import TableLocation

#: A table's or a view's metadata: whatever it is, it names its location.
M = TypeVar("M", bound=Any)
#: The warehouse property that sets how long its tables dropped without purge are kept, undroppable,
#: before maintenance purges them: whole seconds, 0 for the next round. Lakekeeper's soft deletion
#: keeps them a week by default.
DROPPED_RETENTION = "dropped-table-retention-seconds"
DEFAULT_DROPPED_RETENTION = timedelta(days=7)


def dropped_retention(properties: dict[str, str]) -> timedelta:
    """How long a warehouse of these properties keeps its dropped tables."""
    value = properties.get(DROPPED_RETENTION)
    return DEFAULT_DROPPED_RETENTION if value is None else timedelta(seconds=int(value))


def duration_text(duration: timedelta) -> str:
    """`1d12h`, `7d`, `90s` → `1m30s`: as the CLI writes durations, largest unit first."""
    seconds, parts = int(duration.total_seconds()), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def _checked_retention(value: str) -> str:
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 12:
        raise InvalidParameter(f"{DROPPED_RETENTION} is a whole number of seconds (0 or more), not {value!r}")
    return str(int(value))


class Warehouses:
    """The catalog's warehouses (each a bucket) and their namespaces, with the properties new
    tables start from; `WarehouseCatalog` adds the tables."""

    def __init__(self, transactions: Transactions, storage: ObjectStorage) -> None:
        self.transactions = transactions
        self.storage = storage
        self.files = MetadataFiles(storage)
        self.locations = TableLocations(transactions, storage, self.files)
        #: Counts warehouses made or dropped here, so that a cached list of them knows it is stale.
        self.warehouse_changes = 0

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.transactions.read() as conn:
            yield conn

    @contextmanager
    def _change(self) -> Iterator[Connection]:
        with self.transactions.change() as conn:
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
            warehouse_rows.create_warehouse(conn, name)
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
            return warehouse_rows.list_warehouses(conn)

    def has_warehouse(self, name: str) -> bool:
        with self._read() as conn:
            return warehouse_rows.warehouse_exists(conn, name)

    def warehouse_properties(self, name: str) -> dict[str, str]:
        with self._read() as conn:
            return warehouse_rows.warehouse_properties(conn, name)

    def update_warehouse_properties(
        self, name: str, removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        """A warehouse's `table-default.*` properties, or its dropped tables' retention, changed:
        updated, removed and missing keys."""
        others = sorted(
            key for key in updates if not key.startswith(TABLE_DEFAULT) and key != DROPPED_RETENTION
        )
        if others:
            raise InvalidParameter(
                f"a warehouse holds only table-default.* properties and {DROPPED_RETENTION}, not "
                f"{', '.join(others)}"
            )
        if DROPPED_RETENTION in updates:
            updates = {**updates, DROPPED_RETENTION: _checked_retention(updates[DROPPED_RETENTION])}
        with self._change() as conn:
            current = warehouse_rows.warehouse_properties(conn, name)
            properties, updated, removed, missing = changed_properties(current, removals, updates)
            warehouse_rows.set_warehouse_properties(conn, name, properties)
        return updated, removed, missing

    def drop_warehouse(self, name: str) -> None:
        with self._change() as conn:
            warehouse_rows.drop_warehouse(conn, name)
        self.warehouse_changes += 1
        self.storage.delete_bucket(name)  # only if empty: objects left by others stay

    # -- namespaces ---------------------------------------------------------------------

    def create_namespace(self, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]) -> None:
        check_namespace(levels)
        with self._change() as conn:
            warehouse_rows.create_namespace(conn, warehouse, levels, string_properties(properties))

    def list_namespaces(self, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        with self._read() as conn:
            return warehouse_rows.list_namespaces(conn, warehouse, parent)

    def load_namespace(self, warehouse: str, levels: tuple[str, ...]) -> dict[str, str]:
        with self._read() as conn:
            warehouse_rows.check_warehouse_exists(conn, warehouse)
            return warehouse_rows.namespace_properties(conn, warehouse, levels)

    def update_namespace_properties(
        self, warehouse: str, levels: tuple[str, ...], removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        """Updated, removed and missing keys, as the spec's response lists them."""
        with self._change() as conn:
            current = warehouse_rows.namespace_properties(conn, warehouse, levels)
            properties, updated, removed, missing = changed_properties(current, removals, updates)
            warehouse_rows.set_namespace_properties(conn, warehouse, levels, properties)
        return updated, removed, missing

    def drop_namespace(self, warehouse: str, levels: tuple[str, ...]) -> None:
        with self._change() as conn:
            warehouse_rows.drop_namespace(conn, warehouse, levels)

    def _registered(
        self,
        name: TableName,
        metadata_location: str,
        claims: Claims,
        parse: Callable[[str], M],
        may_take: MayTake,
    ) -> tuple[M, TableLocation]:
        """A metadata file to register, for a table or a view: in the name's namespace folder and in
        none of the other tables' and views' locations (`claims`; a dropped one's only if the caller
        may take it) before it is read at all, then inside the location it names, which is taken as
        a create's would be."""
        folder = metadata_location.rpartition("/")[0]
        where = requested_location(self.storage, name.warehouse, folder, name.namespace)
        check_free(where, claims, may_take, reading=True)
        try:
            metadata = parse(metadata_location)
        except FileNotFoundError:
            raise InvalidParameter(f"no metadata file at {metadata_location}") from None
        location = requested_location(self.storage, name.warehouse, metadata.location, name.namespace)
        check_files(self.storage, location, [("metadata file", metadata_location)])
        return metadata, location
