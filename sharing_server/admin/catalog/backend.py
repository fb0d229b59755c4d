"""What the `table` commands need of a catalog (`TableBackend`), and `RemoteTables`: those
operations through a running server's `/_iceberg/v1`, as the admin.

Locally the backend is `CatalogAccess` as the provider; the commands cannot tell the two apart.
"""

from __future__ import annotations

import json
import urllib.parse
from datetime import datetime
from typing import Any, Protocol

from share_store.catalog.catalog import LoadedTable, NewTable
from share_store.catalog.commits import read_metadata
from share_store.catalog.dropped_tables import DroppedTable
from share_store.catalog.names import LEVEL_SEPARATOR, TableName
from share_store.errors import AdminError, AdminNotFound
from sharing_server import paths
from sharing_server.admin.client import JsonApi

#: Where the catalog's API is, under a server's address.
CATALOG_PREFIX = paths.WAREHOUSE_PREFIX + "/v1"


def require_admin_token(token: str) -> None:
    if not token:
        raise AdminError(
            "the catalog API needs the admin token: set SHARING_ADMIN_TOKEN or pass --admin-token"
        )


class TableBackend(Protocol):
    """What the commands need of a catalog: `CatalogAccess` as the provider, or `RemoteTables`."""

    def has_warehouse(self, name: str) -> bool: ...
    def create_warehouse(self, name: str, adopt: bool = False) -> None: ...
    def list_warehouses(self) -> list[str]: ...
    def drop_warehouse(self, name: str) -> None: ...
    def warehouse_properties(self, name: str) -> dict[str, str]: ...
    def update_warehouse_properties(
        self, name: str, removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]: ...
    def create_namespace(
        self, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]
    ) -> object: ...
    def list_namespaces(self, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]: ...
    def drop_namespace(self, warehouse: str, levels: tuple[str, ...]) -> None: ...
    def list_tables(self, warehouse: str, levels: tuple[str, ...]) -> list[str]: ...
    def create_table(self, table: TableName, new: NewTable) -> LoadedTable: ...
    def load_table(self, table: TableName) -> LoadedTable: ...
    def drop_table(self, table: TableName, purge: bool = False) -> None: ...
    def list_dropped(self, warehouse: str, levels: tuple[str, ...]) -> list[DroppedTable]: ...
    def undrop(self, targets: list[tuple[TableName, str | None]]) -> None: ...


class RemoteTables:
    """The operations through a running server's `/_iceberg/v1`, as the admin (`client.JsonApi`)."""

    def __init__(self, server: str, token: str, timeout: float = 60, cafile: str | None = None) -> None:
        api = JsonApi(server, CATALOG_PREFIX, token, timeout, cafile)
        require_admin_token(token)
        self.base = api.base
        self._call = api.call

    def has_warehouse(self, name: str) -> bool:
        try:
            self._call("GET", warehouse_path(name))
        except AdminNotFound:
            return False
        return True

    def create_warehouse(self, name: str, adopt: bool = False) -> None:
        self._call("POST", "/warehouses", {"name": name, **({"adopt": True} if adopt else {})})

    def list_warehouses(self) -> list[str]:
        return [entry["name"] for entry in self._call("GET", "/warehouses")["warehouses"]]

    def drop_warehouse(self, name: str) -> None:
        self._call("DELETE", warehouse_path(name))

    def warehouse_properties(self, name: str) -> dict[str, str]:
        return dict(self._call("GET", warehouse_path(name)).get("properties") or {})

    def update_warehouse_properties(
        self, name: str, removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        body = {"removals": removals, "updates": updates}
        answer = self._call("POST", warehouse_path(name) + "/properties", body)
        return answer["updated"], answer["removed"], answer.get("missing") or []

    def create_namespace(self, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]) -> None:
        body = {"namespace": list(levels), "properties": properties}
        self._call("POST", f"/{segment(warehouse)}/namespaces", body)

    def list_namespaces(self, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        query = f"?parent={segment(LEVEL_SEPARATOR.join(parent))}" if parent else ""
        found = self._call("GET", f"/{segment(warehouse)}/namespaces{query}")["namespaces"]
        return [tuple(levels) for levels in found]

    def drop_namespace(self, warehouse: str, levels: tuple[str, ...]) -> None:
        self._call("DELETE", namespace_path(warehouse, levels))

    def list_tables(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        found = self._call("GET", namespace_path(warehouse, levels) + "/tables")["identifiers"]
        return [identifier["name"] for identifier in found]

    def create_table(self, table: TableName, new: NewTable) -> LoadedTable:
        body = {
            "name": table.name,
            "schema": json.loads(new.schema.model_dump_json()),
            "location": new.location,
            "partition-spec": None
            if new.partition_spec is None
            else json.loads(new.partition_spec.model_dump_json()),
            "properties": dict(new.properties),
            "stage-create": new.stage,
        }
        return _loaded(self._call("POST", namespace_path(table.warehouse, table.namespace) + "/tables", body))

    def load_table(self, table: TableName) -> LoadedTable:
        return _loaded(self._call("GET", table_path(table)))

    def drop_table(self, table: TableName, purge: bool = False) -> None:
        self._call("DELETE", table_path(table) + ("?purgeRequested=true" if purge else ""))

    def list_dropped(self, warehouse: str, levels: tuple[str, ...]) -> list[DroppedTable]:
        found = self._call("GET", namespace_path(warehouse, levels) + "/tables?dropped=true")["dropped"]
        return [_dropped(warehouse, entry) for entry in found]

    def undrop(self, targets: list[tuple[TableName, str | None]]) -> None:
        identifiers = [
            {"namespace": list(name.namespace), "name": name.name, **({"id": table_id} if table_id else {})}
            for name, table_id in targets
        ]
        self._call("POST", f"/{segment(targets[0][0].warehouse)}/tables/undrop", {"identifiers": identifiers})


def _dropped(warehouse: str, entry: dict[str, Any]) -> DroppedTable:
    """A `?dropped=true` listing's entry as the catalog lists it in-process."""
    name = TableName.of(warehouse, entry["namespace"], entry["name"])
    dropped_at, purge_after = (datetime.fromisoformat(entry[key]) for key in ("dropped-at", "purge-after"))
    return DroppedTable(entry["id"], name, "table", dropped_at, purge_after)


def _loaded(result: dict[str, Any]) -> LoadedTable:
    """A load result of the REST API as the catalog answers it in-process."""
    return LoadedTable(
        result.get("metadata-location"), read_metadata(json.dumps(result["metadata"]).encode())
    )


def segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def warehouse_path(name: str) -> str:
    return f"/warehouses/{segment(name)}"


def namespace_path(warehouse: str, levels: tuple[str, ...]) -> str:
    # A nested namespace is one path segment, its levels joined by the unit separator (%1F).
    return f"/{segment(warehouse)}/namespaces/{segment(LEVEL_SEPARATOR.join(levels))}"


def table_path(table: TableName) -> str:
    return f"{namespace_path(table.warehouse, table.namespace)}/tables/{segment(table.name)}"
