"""Activity summed per day, for the console's week- and month-long views; providers' changes and
refused admin tokens, for its administration view.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "activity_days",
        sa.Column("day", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("share_name", sa.String(128), primary_key=True),
        sa.Column("schema_name", sa.String(128), primary_key=True),
        sa.Column("table_name", sa.String(128), primary_key=True),
        sa.Column("version", sa.BigInteger, primary_key=True),
        sa.Column("requests", sa.BigInteger, nullable=False),
        sa.Column("errors", sa.BigInteger, nullable=False),
        sa.Column("files", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("last", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "admin_events",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True
        ),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("client", sa.String(64), nullable=False),
        sa.Column("method", sa.String(8), nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("sign_in", sa.String(16)),
    )
    op.create_index("ix_admin_events_time", "admin_events", ["time"])
    # Events already kept are summed once here; new ones as they are written.
    op.execute(_BACKFILL_SQLITE if op.get_bind().dialect.name == "sqlite" else _BACKFILL_POSTGRESQL)


_COLUMNS = """INSERT INTO activity_days (day, token_id, share_name, schema_name, table_name, version,
                           requests, errors, files, bytes, last)
"""
_SUMS = """coalesce(token_id, ''), coalesce(share_name, ''), coalesce(schema_name, ''),
    coalesce(table_name, ''), coalesce(version, -1), count(*),
    sum(CASE WHEN status >= 400 THEN 1 ELSE 0 END), sum(files), sum(bytes), max(time)
FROM activity_events GROUP BY 1, 2, 3, 4, 5, 6
"""
# SQLite keeps the UTC wall time as text, "YYYY-MM-DD HH:MM:SS.ffffff": its day is the first ten.
_BACKFILL_SQLITE = _COLUMNS + "SELECT substr(time, 1, 10) || ' 00:00:00.000000', " + _SUMS
_BACKFILL_POSTGRESQL = (
    _COLUMNS + "SELECT date_trunc('day', time AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', " + _SUMS
)


def downgrade() -> None:
    op.drop_index("ix_admin_events_time", "admin_events")
    op.drop_table("admin_events")
    op.drop_table("activity_days")
