"""`sharing-server table warehouse|namespace …` and `table create|list|info|remove|undrop`: the
catalog's tree, through a `TableBackend` (the store as the provider, or a server's API).

`table remove` without `--purge` drops the table as the catalog's API does: kept, its files and
folder its own, for its warehouse's retention (`table warehouse retention`), listed by `table list
--dropped` and brought back by `table undrop`."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

from pyiceberg.schema import Schema

from share_store.catalog.catalog import LoadedTable, NewTable
from share_store.catalog.commits import TABLE_DEFAULT, parse_model
from share_store.catalog.errors import NoSuchWarehouse
from share_store.catalog.names import TableName, check_warehouse
from share_store.catalog.warehouses import DROPPED_RETENTION, dropped_retention, duration_text
from share_store.errors import AdminError, InvalidParameter
from share_store.lifetimes import parse_duration
from sharing_server.admin.catalog.backend import TableBackend
from sharing_server.admin.catalog.parsing import dotted_namespace, partition_spec


def require_warehouse(tables: TableBackend, name: str) -> str:
    """The warehouse checked first, so that a misspelt one is named as such, not as a namespace."""
    if not tables.has_warehouse(check_warehouse(name)):
        raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
    return name


def run_warehouse(tables: TableBackend, args: argparse.Namespace) -> None:
    if args.what == "warehouse list":
        for name in tables.list_warehouses():
            print(name)
    elif args.what == "warehouse create":
        tables.create_warehouse(check_warehouse(args.warehouse), adopt=args.adopt)
        print(f"{'Adopted bucket as' if args.adopt else 'Created'} warehouse '{args.warehouse}'.")
    elif args.what == "warehouse defaults":
        run_warehouse_defaults(tables, args)
    elif args.what == "warehouse retention":
        run_warehouse_retention(tables, args)
    elif args.what == "warehouse remove":
        require_warehouse(tables, args.warehouse)
        tables.drop_warehouse(args.warehouse)
        print(f"Removed warehouse '{args.warehouse}'.")


def run_warehouse_defaults(tables: TableBackend, args: argparse.Namespace) -> None:
    """`warehouse defaults W [--set K=V]... [--unset K]...`: keys without `table-default.` get it."""
    name = require_warehouse(tables, args.warehouse)
    updates: dict[str, str] = {}
    for pair in args.set:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AdminError(f"--set takes KEY=VALUE, e.g. format-version=3, not {pair!r}")
        updates[_table_default(key.strip())] = value
    removals = [_table_default(key.strip()) for key in args.unset]
    if updates or removals:
        tables.update_warehouse_properties(name, removals, updates)
    properties = tables.warehouse_properties(name)
    defaults = {key: value for key, value in properties.items() if key.startswith(TABLE_DEFAULT)}
    if not defaults:
        print(f"Warehouse '{name}' has no table defaults (new tables are format version 2).")
    for key, value in sorted(defaults.items()):
        print(f"{key.removeprefix(TABLE_DEFAULT)}={value}")


def run_warehouse_retention(tables: TableBackend, args: argparse.Namespace) -> None:
    """`warehouse retention W [--set DURATION]`: how long W keeps its dropped tables, undroppable."""
    name = require_warehouse(tables, args.warehouse)
    if args.retention is not None:
        text = args.retention.strip()
        # `0s` purges at the next maintenance round; parse_duration takes no zero.
        kept = timedelta(0) if text in ("0", "0s") else parse_duration(text, allow_never=False)
        assert kept is not None  # no "never" allowed
        tables.update_warehouse_properties(name, [], {DROPPED_RETENTION: str(int(kept.total_seconds()))})
    kept = dropped_retention(tables.warehouse_properties(name))
    print(f"Dropped tables of warehouse '{name}' are kept {duration_text(kept)} before they are purged.")


def _table_default(key: str) -> str:
    return key if key.startswith(TABLE_DEFAULT) else TABLE_DEFAULT + key


def run_namespace(tables: TableBackend, args: argparse.Namespace) -> None:
    warehouse = args.warehouse
    if args.what == "namespace list":
        if args.parent and args.parent_option:
            raise InvalidParameter("name the parent namespace once: as a word or with --parent")
        parent_text = args.parent or args.parent_option
        parent = dotted_namespace(parent_text) if parent_text else ()
        for levels in tables.list_namespaces(require_warehouse(tables, warehouse), parent):
            print(".".join(levels))
        return
    levels = dotted_namespace(args.namespace)
    require_warehouse(tables, warehouse)
    if args.what == "namespace create":
        tables.create_namespace(warehouse, levels, {})
        print(f"Created namespace '{'.'.join(levels)}' in warehouse '{warehouse}'.")
    else:
        tables.drop_namespace(warehouse, levels)
        print(f"Removed namespace '{'.'.join(levels)}' from warehouse '{warehouse}'.")


def run_table_verb(tables: TableBackend, args: argparse.Namespace) -> None:
    levels = dotted_namespace(args.namespace)
    if args.what == "table list":
        warehouse = require_warehouse(tables, args.warehouse)
        if args.dropped:
            for dropped in tables.list_dropped(warehouse, levels):
                print(f"{dropped.name.name}\tid {dropped.id}\tdropped {_when(dropped.dropped_at)}"
                      f"\tpurged after {_when(dropped.purge_after)}")  # fmt: skip
            return
        for name in tables.list_tables(warehouse, levels):
            print(name)
        return
    table = TableName.of(args.warehouse, levels, args.table)
    if args.what == "table undrop":
        require_warehouse(tables, table.warehouse)
        tables.undrop([(table, args.table_id)])
        print(f"Undropped table '{table}' in warehouse '{table.warehouse}'.")
        return
    if args.what == "table create":
        schema: Schema = parse_model(Schema, args.schema.encode(), "schema")
        spec = partition_spec(schema, args.partition)
        require_warehouse(tables, table.warehouse)
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
        require_warehouse(tables, table.warehouse)
        print_table_info(table, tables.load_table(table))
    elif args.what == "table remove":
        require_warehouse(tables, table.warehouse)
        tables.drop_table(table, args.purge)
        if args.purge:
            print(f"Removed table '{table}' from warehouse '{table.warehouse}' and deleted its files.")
            return
        kept = duration_text(dropped_retention(tables.warehouse_properties(table.warehouse)))
        words = " ".join((table.warehouse, ".".join(table.namespace), table.name))
        print(
            f"Dropped table '{table}' from warehouse '{table.warehouse}': kept with its files for {kept}, "
            f"then purged; `sharing-server table undrop {words}` brings it back."
        )


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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
