"""The Delta versions given to Iceberg snapshots, kept so they never change meaning.

share_store.iceberg.versions decides the numbers; this module only stores and
reads them. Rows are keyed by the shared table's id and go when the table
leaves its share.
"""

from __future__ import annotations

from sqlalchemy import Select, delete, insert, select
from sqlalchemy.engine import Connection

from share_store.iceberg.versions import SnapshotVersion
from share_store.persistence.sql_schema import iceberg_versions_table


def snapshot_versions(conn: Connection, table_id: str) -> list[SnapshotVersion]:
    rows = conn.execute(
        select(iceberg_versions_table)
        .where(iceberg_versions_table.c.table_id == table_id)
        .order_by(iceberg_versions_table.c.version)
    )
    return [SnapshotVersion(row.version, row.snapshot_id, row.timestamp_ms) for row in rows]


def insert_snapshot_versions(conn: Connection, table_id: str, versions: list[SnapshotVersion]) -> None:
    """Insert `versions`; an IntegrityError means another replica numbered them first."""
    conn.execute(
        insert(iceberg_versions_table),
        [
            {
                "table_id": table_id,
                "version": v.version,
                "snapshot_id": v.snapshot_id,
                "timestamp_ms": v.timestamp_ms,
            }
            for v in versions
        ],
    )


def forget_tables(conn: Connection, table_ids: list[str] | Select) -> None:
    """Drop the versions of tables leaving their share (ids, or a SELECT of them)."""
    conn.execute(delete(iceberg_versions_table).where(iceberg_versions_table.c.table_id.in_(table_ids)))
