"""Shares, their tables, bearer tokens and Iceberg snapshot versions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "shares",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("name_key", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "shared_tables",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("share_id", sa.String(36), sa.ForeignKey("shares.id", ondelete="CASCADE"), nullable=False),
        sa.Column("schema_name", sa.String(128), nullable=False),
        sa.Column("schema_key", sa.String(128), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("name_key", sa.String(128), nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("bucket", sa.String(63), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("history_shared", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("share_id", "schema_key", "name_key"),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("share_id", sa.String(36), nullable=False, index=True),
        sa.Column("share_name", sa.String(128), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.String(1024), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "iceberg_versions",
        sa.Column("table_id", sa.String(36), nullable=False, primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False, primary_key=True),
        sa.Column("snapshot_id", sa.BigInteger, nullable=False),
        sa.Column("timestamp_ms", sa.BigInteger, nullable=False),
        sa.UniqueConstraint("table_id", "snapshot_id"),
    )
