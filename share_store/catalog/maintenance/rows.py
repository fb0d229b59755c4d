"""Maintenance's rows: configurations (a warehouse's under table id "", a table's under its id),
each table's last run of each kind, and the lease of the background runs.

Every function takes the caller's connection, as `catalog.table_pointers` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from share_store.catalog.maintenance.schedule import LastRun, TableState
from share_store.catalog.names import TableName, namespace_levels
from share_store.catalog.table_pointers import TABLE
from share_store.catalog.warehouse_rows import LIVE
from share_store.persistence.mappers import utc, utc_now
from share_store.persistence.sql_schema import (
    maintenance_configs_table,
    maintenance_leases_table,
    maintenance_noncurrent_table,
    maintenance_runs_table,
    warehouse_tables_table,
    warehouses_table,
)

#: The table id under which a warehouse's own configurations are kept.
WAREHOUSE = ""


def configs(conn: Connection, warehouse: str, table_id: str = WAREHOUSE) -> dict[str, dict[str, Any]]:
    """The configurations set for the warehouse (or one of its tables), by kind."""
    t = maintenance_configs_table
    found = conn.execute(
        select(t.c.kind, t.c.value).where(t.c.warehouse == warehouse, t.c.table_id == table_id)
    )
    return {row.kind: json.loads(row.value) for row in found}


def put_config(conn: Connection, warehouse: str, table_id: str, kind: str, value: dict[str, Any]) -> None:
    t = maintenance_configs_table
    key = (t.c.warehouse == warehouse) & (t.c.table_id == table_id) & (t.c.kind == kind)
    conn.execute(delete(t).where(key))
    conn.execute(insert(t).values(warehouse=warehouse, table_id=table_id, kind=kind,
                                  value=json.dumps(value, sort_keys=True), updated_at=utc_now()))  # fmt: skip


@dataclass(frozen=True)
class Run:
    """A table's last run of one kind, as S3 Tables' job status tells it."""

    kind: str
    status: str  # Successful, Failed or Running
    started_at: datetime
    finished_at: datetime | None
    message: str | None
    details: dict[str, Any]


def runs(conn: Connection, table_id: str) -> dict[str, Run]:
    t = maintenance_runs_table
    found = conn.execute(select(t).where(t.c.table_id == table_id))
    return {
        row.kind: Run(
            row.kind,
            row.status,
            utc(row.started_at),
            utc(row.finished_at) if row.finished_at else None,
            row.message,
            json.loads(row.details) if row.details else {},
        )
        for row in found
    }


def record_run(conn: Connection, table_id: str, run: Run) -> None:
    t = maintenance_runs_table
    conn.execute(delete(t).where(t.c.table_id == table_id, t.c.kind == run.kind))
    conn.execute(insert(t).values(
        table_id=table_id, kind=run.kind, status=run.status, started_at=run.started_at,
        finished_at=run.finished_at, message=run.message, details=json.dumps(run.details, sort_keys=True),
    ))  # fmt: skip


# -- the lease: one replica runs the background maintenance at a time ---------------------------


def take_lease(conn: Connection, name: str, holder: str, now: datetime, seconds: float) -> bool:
    """Whether `holder` holds the lease `name` until `now + seconds`: taken when free or expired,
    renewed when it is already the holder's; False while another holder's lease runs."""
    t = maintenance_leases_table
    until = now + timedelta(seconds=seconds)
    renewed = conn.execute(
        update(t)
        .where(t.c.name == name, or_(t.c.holder == holder, t.c.expires_at < now))
        .values(holder=holder, expires_at=until)
    )
    if renewed.rowcount == 1:
        return True
    if conn.execute(select(t.c.name).where(t.c.name == name)).first() is not None:
        return False
    try:
        # A savepoint, so that a replica inserting at the same moment leaves this transaction usable.
        with conn.begin_nested():
            conn.execute(insert(t).values(name=name, holder=holder, expires_at=until))
    except IntegrityError:
        return False
    return True


def release_lease(conn: Connection, name: str, holder: str) -> None:
    t = maintenance_leases_table
    conn.execute(delete(t).where(t.c.name == name, t.c.holder == holder))


def forget_dropped(conn: Connection) -> int:
    """Delete the configurations, runs and marks of tables no longer in the catalog (dropped,
    purged, or gone with their warehouse); a warehouse's own configurations go with it."""
    tables = select(warehouse_tables_table.c.id)
    warehouses = select(warehouses_table.c.name)
    removed = 0
    for t in (maintenance_runs_table, maintenance_noncurrent_table):
        removed += conn.execute(delete(t).where(t.c.table_id.not_in(tables))).rowcount
    c = maintenance_configs_table
    removed += conn.execute(
        delete(c).where(or_(
            (c.c.table_id != WAREHOUSE) & c.c.table_id.not_in(tables), c.c.warehouse.not_in(warehouses)
        ))
    ).rowcount  # fmt: skip
    return removed


def table_states(conn: Connection) -> list[TableState]:
    """Every catalog table (views need no maintenance) with its last commit and each kind's last run."""
    t, r = warehouse_tables_table, maintenance_runs_table
    runs: dict[str, dict[str, LastRun]] = {}
    for run in conn.execute(select(r.c.table_id, r.c.kind, r.c.started_at, r.c.finished_at)):
        runs.setdefault(run.table_id, {})[run.kind] = LastRun(utc(run.started_at), utc(run.finished_at))
    found = conn.execute(  # a dropped table is kept as it was dropped, not maintained
        select(t.c.id, t.c.warehouse, t.c.namespace, t.c.name, t.c.updated_at).where(
            t.c.kind == TABLE, t.c.dropped == LIVE
        )
    )
    states = []
    for row in found:
        name = TableName(row.warehouse, namespace_levels(row.namespace), row.name)
        states.append(TableState(row.id, name, utc(row.updated_at), runs.get(row.id, {})))
    return states
