"""Snapshot summaries (share_store.tables.summaries): one row per Delta table, its latest version built.

Rows are keyed by the shared table's id and go when the table leaves its share.
"""

from __future__ import annotations

import json

from sqlalchemy import Select, delete, insert, select
from sqlalchemy.engine import Connection

from share_store.persistence.sql_schema import snapshot_summaries_table as summaries
from share_store.tables.summaries import SnapshotSummary


def snapshot_summary(conn: Connection, table_id: str) -> SnapshotSummary | None:
    row = conn.execute(select(summaries).where(summaries.c.table_id == table_id)).first()
    if row is None:
        return None
    return SnapshotSummary(
        row.bucket, row.path, row.version, row.commit_time, row.size, row.num_files, row.deletion_vectors,
        json.loads(row.protocol), json.loads(row.metadata),
    )  # fmt: skip


def save_snapshot_summary(conn: Connection, table_id: str, summary: SnapshotSummary) -> None:
    """Replace the table's summary; an IntegrityError means another replica saved one at the same time."""
    conn.execute(delete(summaries).where(summaries.c.table_id == table_id))
    conn.execute(
        insert(summaries).values(
            table_id=table_id,
            bucket=summary.bucket,
            path=summary.path,
            version=summary.version,
            commit_time=summary.commit_time,
            size=summary.size,
            num_files=summary.num_files,
            deletion_vectors=summary.deletion_vectors,
            protocol=summary.protocol_text(),
            metadata=summary.metadata_text(),
        )
    )


def forget_summaries(conn: Connection, table_ids: list[str] | Select) -> None:
    """Drop the summaries of tables leaving their share (ids, or a SELECT of them)."""
    conn.execute(delete(summaries).where(summaries.c.table_id.in_(table_ids)))
