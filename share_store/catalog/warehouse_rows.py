"""The writable catalog's rows of warehouses and namespaces: what holds its tables and views.

Every function takes the caller's connection, so that `ShareStore` decides what
one transaction holds (a multi-table commit is one). The tables' and views'
pointers are `table_pointers`; a warehouse or namespace holding one is not empty.

No savepoints: every refusal of an insert (`AlreadyExists`) ends the caller's
transaction anyway, and with SQLite's Python driver a savepoint opened before
anything else in the transaction is released as a commit of its own, which
would keep a new row (a warehouse whose bucket is then refused, a table of a
multi-table commit that fails on the next) that the transaction rolls back.
"""

from __future__ import annotations

import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from share_store.catalog.errors import AlreadyExists, NoSuchNamespace, NoSuchWarehouse, NotEmpty
from share_store.catalog.names import namespace_key, namespace_levels
from share_store.persistence.mappers import utc_now
from share_store.persistence.sql_schema import (
    warehouse_namespaces_table,
    warehouse_tables_table,
    warehouses_table,
)

#: `dropped` of a live table's or view's row (`table_pointers`): a namespace holding one is not empty.
LIVE = ""


def dotted(levels: tuple[str, ...]) -> str:
    """A namespace's levels (and a name) as messages write them."""
    return ".".join(levels)


def create_warehouse(conn: Connection, name: str) -> None:
    try:
        conn.execute(insert(warehouses_table).values(name=name, created_at=utc_now()))
    except IntegrityError:
        raise AlreadyExists(f"Warehouse already exists: {name}") from None


def list_warehouses(conn: Connection) -> list[str]:
    return list(conn.execute(select(warehouses_table.c.name).order_by(warehouses_table.c.name)).scalars())


def warehouse_exists(conn: Connection, name: str) -> bool:
    found = conn.execute(select(warehouses_table.c.name).where(warehouses_table.c.name == name)).first()
    return found is not None


def lock_warehouse(conn: Connection, name: str) -> None:
    """Hold the warehouse's row until the transaction ends, so that the tables' locations read next
    are still all of them when the transaction records one more (SQLite: the write lock; PostgreSQL:
    the row's lock)."""
    conn.execute(update(warehouses_table).where(warehouses_table.c.name == name).values(name=name))


def warehouse_properties(conn: Connection, name: str) -> dict[str, str]:
    t = warehouses_table
    row = conn.execute(select(t.c.properties).where(t.c.name == name)).first()
    if row is None:
        raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
    return dict(json.loads(row[0])) if row[0] else {}


def set_warehouse_properties(conn: Connection, name: str, properties: dict[str, str]) -> None:
    t = warehouses_table
    conn.execute(update(t).where(t.c.name == name).values(properties=json.dumps(properties)))


def check_warehouse_exists(conn: Connection, name: str) -> None:
    if not warehouse_exists(conn, name):
        raise NoSuchWarehouse(f"Warehouse does not exist: {name}")


def drop_warehouse(conn: Connection, name: str) -> None:
    check_warehouse_exists(conn, name)
    held = conn.execute(
        select(warehouse_namespaces_table.c.namespace).where(warehouse_namespaces_table.c.warehouse == name)
    ).first()
    if held is not None:
        raise NotEmpty(f"Warehouse is not empty: {name} holds namespace {dotted(namespace_levels(held[0]))}")
    # Its dropped tables are still its own (their files are in its bucket, and can be undropped): a
    # warehouse is empty once they are undropped or purged, as Lakekeeper's soft deletion has it.
    t = warehouse_tables_table
    dropped = conn.execute(select(t.c.kind, t.c.namespace, t.c.name).where(t.c.warehouse == name)).first()
    if dropped is not None:
        what = f"{dotted((*namespace_levels(dropped.namespace), dropped.name))}"
        raise NotEmpty(
            f"Warehouse is not empty: {name} holds dropped {dropped.kind} {what}, kept until its retention "
            "has passed (undrop it, or shorten the warehouse's retention)"
        )
    conn.execute(delete(warehouses_table).where(warehouses_table.c.name == name))


def create_namespace(
    conn: Connection, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]
) -> None:
    check_warehouse_exists(conn, warehouse)
    if len(levels) > 1:
        require_namespace(conn, warehouse, levels[:-1])
    try:
        conn.execute(
            insert(warehouse_namespaces_table).values(
                warehouse=warehouse, namespace=namespace_key(levels),
                properties=json.dumps(properties), created_at=utc_now(),
            )
        )  # fmt: skip
    except IntegrityError:
        raise AlreadyExists(f"Namespace already exists: {dotted(levels)}") from None


def namespace_exists(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> bool:
    t = warehouse_namespaces_table
    row = conn.execute(
        select(t.c.namespace).where(t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels))
    ).first()
    return row is not None


def require_namespace(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> None:
    if not namespace_exists(conn, warehouse, levels):
        raise NoSuchNamespace(f"Namespace does not exist: {dotted(levels)}")


def namespace_properties(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> dict[str, str]:
    t = warehouse_namespaces_table
    row = conn.execute(
        select(t.c.properties).where(t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels))
    ).first()
    if row is None:
        raise NoSuchNamespace(f"Namespace does not exist: {dotted(levels)}")
    return dict(json.loads(row[0]))


def set_namespace_properties(
    conn: Connection, warehouse: str, levels: tuple[str, ...], properties: dict[str, str]
) -> None:
    t = warehouse_namespaces_table
    conn.execute(
        update(t)
        .where(t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels))
        .values(properties=json.dumps(properties))
    )


def list_namespaces(conn: Connection, warehouse: str, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The namespaces directly under `parent` (top-level ones without it)."""
    check_warehouse_exists(conn, warehouse)
    if parent:
        require_namespace(conn, warehouse, parent)
    t = warehouse_namespaces_table
    keys = conn.execute(select(t.c.namespace).where(t.c.warehouse == warehouse).order_by(t.c.namespace))
    found = [namespace_levels(key) for key in keys.scalars()]
    return [levels for levels in found if len(levels) == len(parent) + 1 and levels[: len(parent)] == parent]


def drop_namespace(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> None:
    require_namespace(conn, warehouse, levels)
    key = namespace_key(levels)
    t, n = warehouse_tables_table, warehouse_namespaces_table
    # Dropped tables do not hold it (pyiceberg's suite drops a table, then its namespace): they stay,
    # owned and undroppable once the namespace is made again, until their retention has passed.
    held = conn.execute(
        select(t.c.kind, t.c.name).where(
            t.c.warehouse == warehouse, t.c.namespace == key, t.c.dropped == LIVE
        )
    )
    table = held.first()
    if table is not None:
        raise NotEmpty(f"Namespace is not empty: {dotted(levels)} holds {table[0]} {table[1]}")
    children = list_namespaces(conn, warehouse, levels)
    if children:
        raise NotEmpty(f"Namespace is not empty: {dotted(levels)} holds namespace {dotted(children[0])}")
    conn.execute(delete(n).where(n.c.warehouse == warehouse, n.c.namespace == key))
