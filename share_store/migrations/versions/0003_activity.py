"""The console's tables: recent audit events (so every replica's console sees the same
activity) and the console sessions signed out before they expired.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# SQLite only numbers rows by itself for an INTEGER primary key.
EVENT_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "activity_events",
        sa.Column("id", EVENT_ID, primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("token_id", sa.String(32), index=True),
        sa.Column("share_name", sa.String(128)),
        sa.Column("schema_name", sa.String(128)),
        sa.Column("table_name", sa.String(128)),
        sa.Column("route", sa.String(64), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("error_code", sa.String(64)),
        sa.Column("version", sa.BigInteger),
        sa.Column("files", sa.Integer, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
    )
    op.create_table(
        "console_sessions_ended",
        sa.Column("id", sa.String(32), primary_key=True),
        # When the session would have expired anyway: past it, the row can go.
        sa.Column("until", sa.DateTime(timezone=True), nullable=False, index=True),
    )
