"""The writable catalog's rows: warehouses, namespaces, the table and view pointers and catalog users.

A table's pointer (its current metadata location) changes only by
compare-and-swap on its `pointer` counter, so two commits racing on one table
cannot both win: the loser gets `CommitConflict` and retries from the new
metadata. A drop without purge keeps the row, marked dropped (`dropped_at`,
and `dropped` set to its id, out of the live rows' unique name): every lookup
by name here sees live rows only, while `tables_in` (the locations claimed)
sees them all. Every function takes the caller's connection, so that
`ShareStore` decides what one transaction holds (a multi-table commit is one).

No savepoints: every refusal of an insert (`AlreadyExists`) ends the caller's
transaction anyway, and with SQLite's Python driver a savepoint opened before
anything else in the transaction is released as a commit of its own, which
would keep a new row (a warehouse whose bucket is then refused, a table of a
multi-table commit that fails on the next) that the transaction rolls back.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from share_store.catalog.errors import (
    AlreadyExists,
    CommitConflict,
    NoSuchNamespace,
    NoSuchTable,
    NoSuchView,
    NoSuchWarehouse,
    NotEmpty,
)
from share_store.catalog.names import TableName, namespace_key, namespace_levels
from share_store.errors import NotFound
from share_store.persistence.rows import utc, utc_now
from share_store.persistence.sql_schema import (
    catalog_users_table,
    warehouse_namespaces_table,
    warehouse_tables_table,
    warehouses_table,
)

#: What a pointer of `warehouse_tables` points at: a table's metadata or a view's.
TABLE, VIEW = "table", "view"
#: `dropped` of a live row.
LIVE = ""


@dataclass(frozen=True)
class TablePointer:
    """Where a catalog table's current metadata is, and the counter its next commit swaps."""

    id: str
    warehouse: str
    namespace: tuple[str, ...]
    name: str
    metadata_location: str
    pointer: int
    #: The table's folder inside its warehouse, as recorded (None: made before it was recorded).
    location: str | None = None
    #: `table`, or `view`: a view is a pointer to its metadata file too, in the tables' name space.
    kind: str = TABLE
    #: When it was dropped without purge; None while it lives.
    dropped_at: datetime | None = None

    @property
    def table(self) -> TableName:
        return TableName(self.warehouse, self.namespace, self.name)


@dataclass(frozen=True)
class CatalogUser:
    name: str
    access_key: str
    sealed_secret: str
    policy: str  # the policy document's JSON text
    created_at: datetime


def _dotted(levels: tuple[str, ...]) -> str:
    return ".".join(levels)


# -- warehouses -----------------------------------------------------------------


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
        raise NotEmpty(f"Warehouse is not empty: {name} holds namespace {_dotted(namespace_levels(held[0]))}")
    # Its dropped tables are still its own (their files are in its bucket, and can be undropped): a
    # warehouse is empty once they are undropped or purged, as Lakekeeper's soft deletion has it.
    t = warehouse_tables_table
    dropped = conn.execute(select(t.c.kind, t.c.namespace, t.c.name).where(t.c.warehouse == name)).first()
    if dropped is not None:
        what = f"{_dotted((*namespace_levels(dropped.namespace), dropped.name))}"
        raise NotEmpty(
            f"Warehouse is not empty: {name} holds dropped {dropped.kind} {what}, kept until its retention "
            "has passed (undrop it, or shorten the warehouse's retention)"
        )
    conn.execute(delete(warehouses_table).where(warehouses_table.c.name == name))


# -- namespaces -------------------------------------------------------------------


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
        raise AlreadyExists(f"Namespace already exists: {_dotted(levels)}") from None


def namespace_exists(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> bool:
    t = warehouse_namespaces_table
    row = conn.execute(
        select(t.c.namespace).where(t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels))
    ).first()
    return row is not None


def require_namespace(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> None:
    if not namespace_exists(conn, warehouse, levels):
        raise NoSuchNamespace(f"Namespace does not exist: {_dotted(levels)}")


def namespace_properties(conn: Connection, warehouse: str, levels: tuple[str, ...]) -> dict[str, str]:
    t = warehouse_namespaces_table
    row = conn.execute(
        select(t.c.properties).where(t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels))
    ).first()
    if row is None:
        raise NoSuchNamespace(f"Namespace does not exist: {_dotted(levels)}")
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
        raise NotEmpty(f"Namespace is not empty: {_dotted(levels)} holds {table[0]} {table[1]}")
    children = list_namespaces(conn, warehouse, levels)
    if children:
        raise NotEmpty(f"Namespace is not empty: {_dotted(levels)} holds namespace {_dotted(children[0])}")
    conn.execute(delete(n).where(n.c.warehouse == warehouse, n.c.namespace == key))


# -- tables ---------------------------------------------------------------------------


def _pointer(row: Row[Any]) -> TablePointer:
    return TablePointer(
        row.id, row.warehouse, namespace_levels(row.namespace), row.name, row.metadata_location, row.pointer,
        row.location, row.kind, utc(row.dropped_at) if row.dropped_at is not None else None,
    )  # fmt: skip


def table_pointer(
    conn: Connection, warehouse: str, levels: tuple[str, ...], name: str, kind: str = TABLE
) -> TablePointer:
    """The pointer of the table (or, with `kind`, the view) of that name; a view is no table."""
    t = warehouse_tables_table
    row = conn.execute(
        select(t).where(t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels), t.c.name == name,
                        t.c.kind == kind, t.c.dropped == LIVE)
    ).first()  # fmt: skip
    if row is None:
        missing = NoSuchView if kind == VIEW else NoSuchTable
        raise missing(f"{kind.title()} does not exist: {_dotted(levels)}.{name}")
    return _pointer(row)


def find_table_pointer(
    conn: Connection, warehouse: str, levels: tuple[str, ...], name: str, kind: str = TABLE
) -> TablePointer | None:
    try:
        return table_pointer(conn, warehouse, levels, name, kind)
    except (NoSuchTable, NoSuchView):
        return None


def kind_named(conn: Connection, warehouse: str, levels: tuple[str, ...], name: str) -> str | None:
    """What holds the name in the namespace (`table` or `view`), if anything: they share one."""
    t = warehouse_tables_table
    query = select(t.c.kind).where(
        t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels), t.c.name == name,
        t.c.dropped == LIVE,
    )  # fmt: skip
    found = conn.execute(query).first()
    return str(found[0]) if found is not None else None


def list_tables(conn: Connection, warehouse: str, levels: tuple[str, ...], kind: str = TABLE) -> list[str]:
    require_namespace(conn, warehouse, levels)
    t = warehouse_tables_table
    query = select(t.c.name).where(
        t.c.warehouse == warehouse, t.c.namespace == namespace_key(levels), t.c.kind == kind,
        t.c.dropped == LIVE,
    )  # fmt: skip
    return list(conn.execute(query.order_by(t.c.name)).scalars())


def insert_table(
    conn: Connection,
    warehouse: str,
    levels: tuple[str, ...],
    name: str,
    metadata_location: str,
    location: str,
    kind: str = TABLE,
) -> TablePointer:
    require_namespace(conn, warehouse, levels)
    now = utc_now()
    table_id = str(uuid.uuid4())
    values: dict[str, object] = {
        "id": table_id, "warehouse": warehouse, "namespace": namespace_key(levels), "name": name,
        "metadata_location": metadata_location, "location": location, "pointer": 1, "created_at": now,
        "updated_at": now, "kind": kind,
    }  # fmt: skip
    try:
        conn.execute(insert(warehouse_tables_table).values(**values))
    except IntegrityError:
        # Nothing more is asked of this transaction (PostgreSQL's is aborted): the name is taken.
        raise AlreadyExists(f"{_taken(kind)}: {_dotted(levels)}.{name}") from None
    return TablePointer(table_id, warehouse, levels, name, metadata_location, 1, location, kind)


def swap_table_pointer(
    conn: Connection, current: TablePointer, metadata_location: str, location: str | None = None
) -> TablePointer:
    """Point the table at `metadata_location` if nobody committed since `current` was read.

    With `location`, the table's recorded location changes too: a register that
    overwrites the table with metadata of its own, checked by the catalog.
    """
    t = warehouse_tables_table
    values: dict[str, object] = {
        "metadata_location": metadata_location,
        "pointer": current.pointer + 1,
        "updated_at": utc_now(),
    }
    if location is not None:
        values["location"] = location
    # Live only: a commit decided before a drop must not go on pointing a dropped table.
    result = conn.execute(
        update(t)
        .where(t.c.id == current.id, t.c.pointer == current.pointer, t.c.dropped == LIVE)
        .values(**values)
    )
    if result.rowcount != 1:
        raise CommitConflict(
            f"Commit failed: {current.kind} {_dotted(current.namespace)}.{current.name} was changed by "
            "another commit; refresh it and retry"
        )
    recorded = location if location is not None else current.location
    pointer = current.pointer + 1
    return TablePointer(
        current.id, current.warehouse, current.namespace, current.name, metadata_location, pointer, recorded,
        current.kind,
    )  # fmt: skip


def tables_in(conn: Connection, warehouse: str) -> list[TablePointer]:
    """Every table of the warehouse, dropped ones too (their folders are still theirs), for the check
    that a new location overlaps none of theirs."""
    t = warehouse_tables_table
    return [_pointer(row) for row in conn.execute(select(t).where(t.c.warehouse == warehouse))]


def record_location(conn: Connection, table_id: str, location: str) -> None:
    """Record a table's location where none was (tables made before locations were recorded)."""
    t = warehouse_tables_table
    conn.execute(update(t).where(t.c.id == table_id, t.c.location.is_(None)).values(location=location))


def rename_table(conn: Connection, current: TablePointer, levels: tuple[str, ...], name: str) -> None:
    require_namespace(conn, current.warehouse, levels)
    t = warehouse_tables_table
    try:
        conn.execute(update(t).where(t.c.id == current.id).values(namespace=namespace_key(levels), name=name))
    except IntegrityError:
        raise AlreadyExists(f"{_taken(current.kind)}: {_dotted(levels)}.{name}") from None


def _taken(kind: str) -> str:
    return "Table already exists" if kind == TABLE else "A table or view of that name already exists"


def delete_table(conn: Connection, current: TablePointer) -> bool:
    """The row gone (a purge, a dropped table's expiry or take-over); whether it was there."""
    t = warehouse_tables_table
    return conn.execute(delete(t).where(t.c.id == current.id)).rowcount == 1


def drop_table(conn: Connection, current: TablePointer, now: datetime) -> None:
    """Mark the table dropped: out of every lookup by name (its name free), its location still claimed.

    The pointer counter moves on a drop and an undrop, so that a purge decided on a dropped table
    (`begin_purge`) cannot take one undropped, or dropped again, since."""
    t = warehouse_tables_table
    conn.execute(
        update(t)
        .where(t.c.id == current.id, t.c.dropped == LIVE)
        .values(dropped=current.id, dropped_at=now, pointer=t.c.pointer + 1)
    )


def forget_dropped_table(conn: Connection, current: TablePointer) -> bool:
    """The dropped table's row gone, its folder taken over by a new table; whether it was still that
    dropped table (not undropped, dropped again or being purged since `current` was read)."""
    t = warehouse_tables_table
    gone = conn.execute(
        delete(t).where(t.c.id == current.id, t.c.pointer == current.pointer, t.c.dropped != LIVE,
                        t.c.dropped_at.is_not(None))
    )  # fmt: skip
    return gone.rowcount == 1


def begin_purge(conn: Connection, current: TablePointer) -> bool:
    """The dropped table, as `current` saw it, marked as being purged (its `dropped_at` cleared): it can
    no longer be undropped or taken over, and its folder stays claimed until `delete_table`. Whether
    it still was that dropped table (not undropped, taken over or dropped again since)."""
    t = warehouse_tables_table
    marked = conn.execute(
        update(t)
        .where(t.c.id == current.id, t.c.pointer == current.pointer, t.c.dropped != LIVE)
        .values(dropped_at=None)
    )
    return marked.rowcount == 1


def dropped_tables(
    conn: Connection,
    warehouse: str | None = None,
    levels: tuple[str, ...] | None = None,
    kind: str | None = None,
    purging: bool = False,
) -> list[TablePointer]:
    """The dropped tables (or views, with `kind`) of a warehouse's namespace, of a warehouse, or of
    every warehouse, by name and the latest drop of a name first; with `purging`, those being purged
    too (their `dropped_at` is None)."""
    t = warehouse_tables_table
    query = select(t).where(t.c.dropped != LIVE)
    if not purging:
        query = query.where(t.c.dropped_at.is_not(None))
    if warehouse is not None:
        query = query.where(t.c.warehouse == warehouse)
    if levels is not None:
        query = query.where(t.c.namespace == namespace_key(levels))
    if kind is not None:
        query = query.where(t.c.kind == kind)
    return [_pointer(row) for row in conn.execute(query.order_by(t.c.name, t.c.dropped_at.desc(), t.c.id))]


def dropped_pointer(
    conn: Connection, warehouse: str, levels: tuple[str, ...], name: str, kind: str, table_id: str | None
) -> TablePointer:
    """The dropped table of that name to undrop: the one `table_id` names, else the latest dropped."""
    candidates = [p for p in dropped_tables(conn, warehouse, levels, kind) if p.name == name]
    if table_id is not None:
        candidates = [p for p in candidates if p.id == table_id]
    if not candidates:
        missing = NoSuchView if kind == VIEW else NoSuchTable
        which = f" with id {table_id}" if table_id is not None else ""
        raise missing(f"No dropped {kind}{which}: {_dotted(levels)}.{name}")
    return candidates[0]  # `dropped_tables` has the latest drop first


def undrop_table(conn: Connection, current: TablePointer) -> None:
    """A dropped table live again under its name; `AlreadyExists` if a table or view holds it now."""
    t = warehouse_tables_table
    try:
        done = conn.execute(
            update(t)
            .where(t.c.id == current.id, t.c.dropped != LIVE, t.c.dropped_at.is_not(None))
            .values(dropped=LIVE, dropped_at=None, pointer=t.c.pointer + 1)
        )
    except IntegrityError:
        raise AlreadyExists(
            f"{_taken(current.kind)}: {_dotted(current.namespace)}.{current.name} (drop it, or rename it, "
            "before undropping the dropped one)"
        ) from None
    if done.rowcount != 1:
        missing = NoSuchView if current.kind == VIEW else NoSuchTable
        raise missing(f"No dropped {current.kind}: {_dotted(current.namespace)}.{current.name}")


# -- catalog users ------------------------------------------------------------------------


def create_user(conn: Connection, user: CatalogUser) -> None:
    try:
        conn.execute(
            insert(catalog_users_table).values(
                name=user.name, access_key=user.access_key, sealed_secret=user.sealed_secret,
                policy=user.policy, created_at=user.created_at,
            )
        )  # fmt: skip
    except IntegrityError:
        raise AlreadyExists(f"Catalog user already exists: {user.name}") from None


def _user(row: Row[Any]) -> CatalogUser:
    return CatalogUser(row.name, row.access_key, row.sealed_secret, row.policy, utc(row.created_at))


def user_by_access_key(conn: Connection, access_key: str) -> CatalogUser | None:
    t = catalog_users_table
    row = conn.execute(select(t).where(t.c.access_key == access_key)).first()
    return _user(row) if row is not None else None


def list_users(conn: Connection) -> list[CatalogUser]:
    t = catalog_users_table
    return [_user(row) for row in conn.execute(select(t).order_by(t.c.name))]


def delete_user(conn: Connection, name: str) -> None:
    t = catalog_users_table
    if conn.execute(delete(t).where(t.c.name == name)).rowcount != 1:
        raise NotFound(f"Catalog user does not exist: {name}")
