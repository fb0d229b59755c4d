"""Snapshot summaries: a Delta table's latest version as its head lines describe it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "snapshot_summaries",
        # One row per shared table: its latest version the server built.
        sa.Column("table_id", sa.String(36), primary_key=True),
        # Where the table was when summarized: a table re-added elsewhere is another table.
        sa.Column("bucket", sa.String(63), nullable=False),
        sa.Column("path", sa.String(1024), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        # When the version's commit file was written (ms; NULL when only its checkpoint is
        # listed): a table deleted and written again anew reaches the same version numbers.
        sa.Column("commit_time", sa.BigInteger),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("num_files", sa.BigInteger, nullable=False),
        sa.Column("deletion_vectors", sa.Boolean, nullable=False),
        sa.Column("protocol", sa.Text, nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
    )
