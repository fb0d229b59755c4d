"""The writable catalog's table and view pointers: where each one's current metadata is.

A table's pointer (its current metadata location) changes only by
compare-and-swap on its `pointer` counter, so two commits racing on one table
cannot both win: the loser gets `CommitConflict` and retries from the new
metadata. A drop without purge keeps the row, marked dropped (`dropped_at`,
and `dropped` set to its id, out of the live rows' unique name): every lookup
by name here sees live rows only, while `tables_in` (the locations claimed)
sees them all. A view is a pointer to its metadata file too, in the tables'
name space (one row per name, its `kind` beside it). Every function takes the
caller's connection, and none opens a savepoint (`warehouse_rows` says why).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from share_store.catalog.errors import AlreadyExists, CommitConflict, NoSuchTable, NoSuchView
from share_store.catalog.names import TableName, namespace_key, namespace_levels
from share_store.catalog.warehouse_rows import LIVE, dotted, require_namespace
from share_store.persistence.mappers import utc, utc_now
from share_store.persistence.sql_schema import warehouse_tables_table

#: What a pointer of `warehouse_tables` points at: a table's metadata or a view's.
TABLE, VIEW = "table", "view"


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
        raise missing(f"{kind.title()} does not exist: {dotted(levels)}.{name}")
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
        raise AlreadyExists(f"{_taken(kind)}: {dotted(levels)}.{name}") from None
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
            f"Commit failed: {current.kind} {dotted(current.namespace)}.{current.name} was changed by "
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
        raise AlreadyExists(f"{_taken(current.kind)}: {dotted(levels)}.{name}") from None


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
        raise missing(f"No dropped {kind}{which}: {dotted(levels)}.{name}")
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
            f"{_taken(current.kind)}: {dotted(current.namespace)}.{current.name} (drop it, or rename it, "
            "before undropping the dropped one)"
        ) from None
    if done.rowcount != 1:
        missing = NoSuchView if current.kind == VIEW else NoSuchTable
        raise missing(f"No dropped {current.kind}: {dotted(current.namespace)}.{current.name}")
