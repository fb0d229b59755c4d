"""The server's own warehouses as the catalog registry sees them, so that their tables are shared.

`NAME:uniform:WAREHOUSE:NAMESPACE:TABLE` names one of these warehouses first,
with no `[catalogs]` block: the registry asks `OwnWarehouses` whether it serves
the warehouse and gets a catalog that loads tables as pyiceberg `Table`s, read
through a FileIO over the server's own storage confined to the table's
recorded location (`file_io.ConfinedFileIO`), which the readers also take as
the bound of every file they sign (`storage.table_location.table_location_of`).
"""

from __future__ import annotations

import threading
import time

from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import (
    CommitTableRequest,
    CommitTableResponse,
    Namespace,
    Table,
    TableIdentifier,
    TableRequirement,
    TableUpdate,
)
from pyiceberg.table.locations import LocationProvider, load_location_provider
from pyiceberg.typedef import Properties

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.errors import CommitConflict, NoSuchNamespace, NoSuchTable, NoSuchWarehouse
from share_store.catalog.names import TableName

#: pyiceberg imports the class this table property names and calls it with the table's location and
#: properties, to name the files it writes: code chosen by whoever may commit to the table.
CALLER_LOCATION_PROVIDER = "write.py-location-provider.impl"


def server_location_provider(location: str, properties: Properties) -> LocationProvider:
    """pyiceberg's own location provider for a table the server writes files of (compaction's data
    files, manifests and manifest lists): never one its properties name (`CALLER_LOCATION_PROVIDER`)."""
    kept = {key: value for key, value in properties.items() if key != CALLER_LOCATION_PROVIDER}
    return load_location_provider(table_location=location, table_properties=kept)


class ServerTable(Table):
    """A pyiceberg table the server loads from its own warehouses: files it writes are named by
    `server_location_provider` (pyiceberg's snapshot producer asks the table for its provider)."""

    def location_provider(self) -> LocationProvider:
        return server_location_provider(self.metadata.location, self.metadata.properties)


class WarehouseTables(NoopCatalog):
    """One warehouse as an in-process pyiceberg catalog: it loads, lists and commits (through the
    catalog's own compare-and-swap, as the REST API does); anything else is `NoopCatalog`'s refusal."""

    def __init__(self, catalog: WarehouseCatalog, warehouse: str, scoped: bool = False) -> None:
        super().__init__(warehouse)
        self.catalog = catalog
        self.warehouse = warehouse
        #: Tables' files through storage bounded to each table by the store (`table_storage`), for
        #: what maintenance writes and deletes; sharing reads with the server's, whose presigned
        #: URLs outlast any temporary keys.
        self.scoped = scoped

    def load_table(self, identifier: str | tuple[str, ...]) -> Table:
        parts = tuple(identifier.split(".")) if isinstance(identifier, str) else tuple(identifier)
        *namespace, name = parts
        table = TableName.of(self.warehouse, tuple(namespace), name)
        try:
            loaded = self.catalog.load_table(table)
            location = loaded.location or self.catalog.table_location(table)
        except NoSuchTable as error:
            raise NoSuchTableError(error.message) from None
        except (NoSuchNamespace, NoSuchWarehouse) as error:
            raise NoSuchNamespaceError(error.message) from None
        # Read through a FileIO confined to the table's recorded location: whatever its metadata
        # names, sharing it reads, signs and vends nothing of another table. Imported here, not
        # with the module: pyiceberg's pyarrow FileIO takes 5 MB a server without own warehouses
        # never needs.
        from share_store.catalog.file_io import ConfinedFileIO

        storage = self.catalog.table_storage(location) if self.scoped else self.catalog.storage
        return ServerTable(
            identifier=parts,
            metadata=loaded.metadata,
            metadata_location=loaded.metadata_location or "",
            io=ConfinedFileIO(storage, location),
            catalog=self,
        )

    def commit_table(
        self, table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
    ) -> CommitTableResponse:
        *namespace, name = table.name()
        identifier = TableIdentifier(namespace=Namespace(root=list(namespace)), name=name)
        request = CommitTableRequest(identifier=identifier, requirements=requirements, updates=updates)
        try:
            loaded = self.catalog.commit(TableName.of(self.warehouse, tuple(namespace), name), request)
        except CommitConflict as error:
            raise CommitFailedException(error.message) from None
        return CommitTableResponse.model_validate(
            {"metadata": loaded.metadata, "metadata-location": loaded.metadata_location or ""}
        )

    def list_namespaces(self, namespace: str | tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        return self.catalog.list_namespaces(self.warehouse, _levels(namespace))

    def list_tables(self, namespace: str | tuple[str, ...]) -> list[tuple[str, ...]]:
        levels = _levels(namespace)
        return [(*levels, name) for name in self.catalog.list_tables(self.warehouse, levels)]


#: How long the registry trusts the set of own warehouses it read. It asks on every Iceberg
#: table load, which would otherwise cost a store query each time; a warehouse made or dropped
#: through this process's catalog is seen at once, one made on another replica this much later.
NAMES_SECONDS = 2.0


class OwnWarehouses:
    def __init__(self, catalog: WarehouseCatalog) -> None:
        self.catalog = catalog
        self._names: frozenset[str] = frozenset()
        self._read: tuple[int, float] = (-1, float("-inf"))  # (catalog's changes, when)
        self._lock = threading.Lock()

    def serves(self, warehouse: str) -> bool:
        changes, now = self.catalog.warehouse_changes, time.monotonic()
        with self._lock:
            if self._read[0] == changes and now - self._read[1] < NAMES_SECONDS:
                return warehouse in self._names
        names = frozenset(self.catalog.list_warehouses())
        with self._lock:
            self._names, self._read = names, (changes, now)
        return warehouse in names

    def names(self) -> list[str]:
        return self.catalog.list_warehouses()

    def tables(self, warehouse: str) -> WarehouseTables:
        return WarehouseTables(self.catalog, warehouse)


def _levels(namespace: str | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(namespace.split(".")) if isinstance(namespace, str) else tuple(namespace)
