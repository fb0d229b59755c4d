"""Maintenance's rows: configurations (a warehouse's under table id "", a table's under its id),
and each table's last run of each kind.

Every function takes the caller's connection, as `own_warehouses.rows` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from share_store.persistence.rows import utc, utc_now
from share_store.persistence.schema import (
    maintenance_configs_table,
    maintenance_runs_table,
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
