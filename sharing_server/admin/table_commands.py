"""`sharing-server table …`: AIStor Tables' warehouses, namespaces, Iceberg tables and catalog users.

Warehouse, namespace and table commands work on the configured store and
storage through the same `WarehouseCatalog` the server's `/_iceberg/v1` runs,
or on a running server through that API (`RemoteTables`, `--server`, the
admin token sent as a bearer token, which the catalog allows everything).
Catalog users are made on the store only: the server has no HTTP API for
them. Every name, the schema and the partition fields are checked before
anything is written, so bad input changes nothing; the refusal is a
`ShareStoreError`, which `cli.main` prints on one line with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pyiceberg.exceptions import ValidationError
from pyiceberg.partitioning import PARTITION_FIELD_ID_START, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    IdentityTransform,
    Transform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
    parse_transform,
)

from share_store.errors import AdminError, AdminNotFound, InvalidParameter
from share_store.own_warehouses.access import PROVIDER, CatalogAccess
from share_store.own_warehouses.catalog import LoadedTable, NewTable, WarehouseCatalog
from share_store.own_warehouses.commits import TABLE_DEFAULT, parse_model, read_metadata
from share_store.own_warehouses.errors import NoSuchWarehouse
from share_store.own_warehouses.names import LEVEL_SEPARATOR, TableName, check_namespace, check_warehouse
from share_store.own_warehouses.policies import FULL_ACCESS_POLICY, Policy, parse_policy
from share_store.own_warehouses.users import CatalogUsers
from share_store.persistence import ShareStore
from sharing_server import paths
from sharing_server.admin.client import JsonApi
from sharing_server.config import ServerConfig

__all__ = ["RemoteTables", "TableBackend", "run_local", "run_remote", "run_table"]


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


class RemoteTables:
    """The operations through a running server's `/_iceberg/v1`, as the admin (`client.JsonApi`)."""

    def __init__(self, server: str, token: str, timeout: float = 60, cafile: str | None = None) -> None:
        api = JsonApi(server, paths.WAREHOUSE_PREFIX + "/v1", token, timeout, cafile)
        if not token:
            raise AdminError(
                "the catalog API needs the admin token: set SHARING_ADMIN_TOKEN or pass --admin-token"
            )
        self.base = api.base
        self._call = api.call

    def has_warehouse(self, name: str) -> bool:
        try:
            self._call("GET", f"/warehouses/{_segment(name)}")
        except AdminNotFound:
            return False
        return True

    def create_warehouse(self, name: str, adopt: bool = False) -> None:
        self._call("POST", "/warehouses", {"name": name, **({"adopt": True} if adopt else {})})

    def list_warehouses(self) -> list[str]:
        return [entry["name"] for entry in self._call("GET", "/warehouses")["warehouses"]]

    def drop_warehouse(self, name: str) -> None:
        self._call("DELETE", f"/warehouses/{_segment(name)}")

    def warehouse_properties(self, name: str) -> dict[str, str]:
        return dict(self._call("GET", f"/warehouses/{_segment(name)}").get("properties") or {})

    def update_warehouse_properties(
        self, name: str, removals: list[str], updates: dict[str, str]
    ) -> tuple[list[str], list[str], list[str]]:
        body = {"removals": removals, "updates": updates}
        answer = self._call("POST", f"/warehouses/{_segment(name)}/properties", body)
        return answer["updated"], answer["removed"], answer.get("missing") or []

    def create_namespace(self, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]) -> None:
        body = {"namespace": list(levels), "properties": properties}
        self._call("POST", f"/{_segment(warehouse)}/namespaces", body)

    def list_namespaces(self, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        query = f"?parent={_segment(LEVEL_SEPARATOR.join(parent))}" if parent else ""
        found = self._call("GET", f"/{_segment(warehouse)}/namespaces{query}")["namespaces"]
        return [tuple(levels) for levels in found]

    def drop_namespace(self, warehouse: str, levels: tuple[str, ...]) -> None:
        self._call("DELETE", _namespace_path(warehouse, levels))

    def list_tables(self, warehouse: str, levels: tuple[str, ...]) -> list[str]:
        found = self._call("GET", _namespace_path(warehouse, levels) + "/tables")["identifiers"]
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
        return _loaded(
            self._call("POST", _namespace_path(table.warehouse, table.namespace) + "/tables", body)
        )

    def load_table(self, table: TableName) -> LoadedTable:
        return _loaded(self._call("GET", _table_path(table)))

    def drop_table(self, table: TableName, purge: bool = False) -> None:
        self._call("DELETE", _table_path(table) + ("?purgeRequested=true" if purge else ""))


def _loaded(result: dict[str, Any]) -> LoadedTable:
    """A load result of the REST API as the catalog answers it in-process."""
    return LoadedTable(
        result.get("metadata-location"), read_metadata(json.dumps(result["metadata"]).encode())
    )


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _namespace_path(warehouse: str, levels: tuple[str, ...]) -> str:
    # A nested namespace is one path segment, its levels joined by the unit separator (%1F).
    return f"/{_segment(warehouse)}/namespaces/{_segment(LEVEL_SEPARATOR.join(levels))}"


def _table_path(table: TableName) -> str:
    return f"{_namespace_path(table.warehouse, table.namespace)}/tables/{_segment(table.name)}"


# -- parsing ---------------------------------------------------------------------------------------


def dotted_namespace(text: str) -> tuple[str, ...]:
    """`sales.eu` → ("sales", "eu"): the CLI's spelling of a nested namespace."""
    return check_namespace(tuple(text.split(".")))


def partition_spec(schema: Schema, fields: list[str]) -> PartitionSpec:
    """`FIELD[:TRANSFORM]` each, in order, with fresh field ids from 1000 as Iceberg numbers them."""
    made: list[PartitionField] = []
    for position, text in enumerate(fields):
        source, colon, transform_text = text.rpartition(":")
        if not colon:
            source, transform_text = text, "identity"
        try:
            field = schema.find_field(source)
        except ValueError:
            raise InvalidParameter(
                f"invalid partition {text!r}: the schema has no field {source!r}"
            ) from None
        try:
            transform = parse_transform(transform_text.strip().lower())
        except (ValueError, ValidationError):
            transform = UnknownTransform(transform=transform_text)
        # pyiceberg parses `bucket[0]` and `truncate[0]`, which no engine can write.
        if isinstance(transform, UnknownTransform) or str(transform).endswith("[0]"):
            raise InvalidParameter(
                f"invalid partition {text!r}: unknown transform {transform_text!r} (use "
                "identity, year, month, day, hour, bucket[N], truncate[W] or void)"
            )
        if not transform.can_transform(field.field_type):
            raise InvalidParameter(
                f"invalid partition {text!r}: {transform} cannot partition {source!r} ({field.field_type})"
            )
        name = _partition_name(source, transform)
        if any(existing.name == name for existing in made):
            raise InvalidParameter(f"invalid partition {text!r}: partition field {name!r} is given twice")
        made.append(PartitionField(field.field_id, PARTITION_FIELD_ID_START + position, transform, name))
    return PartitionSpec(*made, spec_id=0)


def _partition_name(source: str, transform: Transform[Any, Any]) -> str:
    """The partition field's name as pyiceberg names those it adds (`ts_day`, `id_bucket_16`)."""
    if isinstance(transform, IdentityTransform):
        return source
    if isinstance(transform, BucketTransform):
        return f"{source}_bucket_{transform.num_buckets}"
    if isinstance(transform, TruncateTransform):
        return f"{source}_trunc_{transform.width}"
    return f"{source}_null" if isinstance(transform, VoidTransform) else f"{source}_{transform}"


# -- running ---------------------------------------------------------------------------------------


def run_local(args: argparse.Namespace, store: ShareStore, config: ServerConfig, secret: bytes) -> None:
    """On the configured store; the server key (`secret`) seals users' secrets as the server expects."""
    catalog = WarehouseCatalog(store.transactions, config.make_storage(secret))
    # The provider on its own store: the same rules as every other entry point, all actions allowed.
    run_table(args, CatalogAccess(catalog, PROVIDER), CatalogUsers(store.transactions, secret))


def run_remote(args: argparse.Namespace) -> None:
    if args.what.startswith("user "):
        raise AdminError(
            "catalog users are managed on the store only (the server has no HTTP API for "
            "them): run `table user …` without --server, with the server's configuration"
        )
    run_table(args, RemoteTables(args.server, args.admin_token or "", cafile=args.cafile), None)


def run_table(args: argparse.Namespace, tables: TableBackend, users: CatalogUsers | None) -> None:
    what: str = args.what
    if what.startswith("user "):
        assert users is not None  # run_remote refuses user commands
        run_user(users, args)
    elif what == "warehouse list":
        for name in tables.list_warehouses():
            print(name)
    elif what == "warehouse create":
        tables.create_warehouse(check_warehouse(args.warehouse), adopt=args.adopt)
        print(f"{'Adopted bucket as' if args.adopt else 'Created'} warehouse '{args.warehouse}'.")
    elif what == "warehouse defaults":
        run_warehouse_defaults(tables, args)
    elif what == "warehouse remove":
        _require_warehouse(tables, args.warehouse)
        tables.drop_warehouse(args.warehouse)
        print(f"Removed warehouse '{args.warehouse}'.")
    elif what.startswith("namespace "):
        run_namespace(tables, args)
    else:
        run_table_verb(tables, args)


def run_warehouse_defaults(tables: TableBackend, args: argparse.Namespace) -> None:
    """`warehouse defaults W [--set K=V]... [--unset K]...`: keys without `table-default.` get it."""
    name = _require_warehouse(tables, args.warehouse)
    updates: dict[str, str] = {}
    for pair in args.set:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AdminError(f"--set takes KEY=VALUE, e.g. format-version=3, not {pair!r}")
        updates[_table_default(key.strip())] = value
    removals = [_table_default(key.strip()) for key in args.unset]
    if updates or removals:
        tables.update_warehouse_properties(name, removals, updates)
    defaults = tables.warehouse_properties(name)
    if not defaults:
        print(f"Warehouse '{name}' has no table defaults (new tables are format version 2).")
    for key, value in sorted(defaults.items()):
        print(f"{key.removeprefix(TABLE_DEFAULT)}={value}")


def _table_default(key: str) -> str:
    return key if key.startswith(TABLE_DEFAULT) else TABLE_DEFAULT + key


def _require_warehouse(tables: TableBackend, name: str) -> str:
    """The warehouse checked first, so that a misspelt one is named as such, not as a namespace."""
    if not tables.has_warehouse(check_warehouse(name)):
        raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
    return name


def run_namespace(tables: TableBackend, args: argparse.Namespace) -> None:
    warehouse = args.warehouse
    if args.what == "namespace list":
        if args.parent and args.parent_option:
            raise InvalidParameter("name the parent namespace once: as a word or with --parent")
        parent_text = args.parent or args.parent_option
        parent = dotted_namespace(parent_text) if parent_text else ()
        for levels in tables.list_namespaces(_require_warehouse(tables, warehouse), parent):
            print(".".join(levels))
        return
    levels = dotted_namespace(args.namespace)
    _require_warehouse(tables, warehouse)
    if args.what == "namespace create":
        tables.create_namespace(warehouse, levels, {})
        print(f"Created namespace '{'.'.join(levels)}' in warehouse '{warehouse}'.")
    else:
        tables.drop_namespace(warehouse, levels)
        print(f"Removed namespace '{'.'.join(levels)}' from warehouse '{warehouse}'.")


def run_table_verb(tables: TableBackend, args: argparse.Namespace) -> None:
    levels = dotted_namespace(args.namespace)
    if args.what == "table list":
        for name in tables.list_tables(_require_warehouse(tables, args.warehouse), levels):
            print(name)
        return
    table = TableName.of(args.warehouse, levels, args.table)
    if args.what == "table create":
        schema: Schema = parse_model(Schema, args.schema.encode(), "schema")
        spec = partition_spec(schema, args.partition)
        _require_warehouse(tables, table.warehouse)
        properties = {} if args.format_version is None else {"format-version": str(args.format_version)}
        created = tables.create_table(
            table, NewTable(schema, spec, location=args.location, properties=properties)
        )
        partitioned = ", partitioned by " + ", ".join(f.name for f in spec.fields) if spec.fields else ""
        print(
            f"Created table '{table}' in warehouse '{table.warehouse}' "
            f"(format version {created.metadata.format_version}{partitioned})."
        )
        print(f"Location:         {created.metadata.location}")
    elif args.what == "table info":
        _require_warehouse(tables, table.warehouse)
        print_table_info(table, tables.load_table(table))
    elif args.what == "table remove":
        _require_warehouse(tables, table.warehouse)
        tables.drop_table(table, args.purge)
        files = " and deleted its files" if args.purge else " (its files are kept)"
        print(f"Removed table '{table}' from warehouse '{table.warehouse}'{files}.")


def print_table_info(table: TableName, loaded: LoadedTable) -> None:
    metadata = loaded.metadata
    schema, spec = metadata.schema(), metadata.spec()
    print(f"Table:            {table.warehouse}: {table}")
    print(f"Location:         {metadata.location}")
    print(f"Metadata:         {loaded.metadata_location}")
    print(f"Format version:   {metadata.format_version}")
    print(f"Schema (id {schema.schema_id}):")
    for field in schema.fields:
        print(f"  {field.field_id}  {field.name}  {field.field_type}{'  required' if field.required else ''}")
    print(f"Partition spec (id {spec.spec_id}):" if spec.fields else "Partition spec:   unpartitioned")
    for part in spec.fields:
        print(f"  {part.field_id}  {part.name}  {part.transform}({schema.find_column_name(part.source_id)})")
    current = metadata.current_snapshot()
    if current is None:
        print("Current snapshot: none")
    else:
        when = datetime.fromtimestamp(current.timestamp_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        print(f"Current snapshot: {current.snapshot_id} ({when})")
        for key, value in (current.summary.model_dump() if current.summary else {}).items():
            print(f"  {key}: {value}")
    print(f"Snapshots:        {len(metadata.snapshots)}")


def run_user(users: CatalogUsers, args: argparse.Namespace) -> None:
    if args.what == "user create":
        policy = _policy_text(args.policy) if args.policy else None
        issued = users.create(args.name, policy)
        print(f"User:       {issued.name}")
        print(f"Access key: {issued.access_key}")
        print(f"Secret key: {issued.secret_key}")
        print(f"Policy:     {_policy_summary(issued.policy)}")
        print("The secret key is shown once; it is stored only sealed with the server key.")
    elif args.what == "user list":
        for user in users.list():
            print(f"{user.name}\t{user.access_key}\t{_policy_summary(user.policy)}")
    elif args.what == "user remove":
        users.remove(args.name)
        print(f"Removed catalog user '{args.name}'; its keys and tokens stop working.")


def _policy_text(path: Path) -> str:
    try:
        return path.read_bytes().decode()
    except UnicodeDecodeError:
        raise InvalidParameter(f"the policy file {path} is not UTF-8 text") from None


def _policy_summary(policy: Policy) -> str:
    if policy == parse_policy(FULL_ACCESS_POLICY):
        return "full access"
    return f"{len(policy.statements)} statement(s)"
