"""Maintenance of the own warehouses' tables: configurations, last runs, noncurrent files, a lease.

Revision ID: 0011
Revises: 0010

`maintenance_configs` holds S3 Tables' maintenance configurations (a
warehouse's under table_id "", a table's under its id); `maintenance_runs` each
table's last run of each kind; `maintenance_noncurrent` the files found
unreferenced and when, deleted a grace period later; `maintenance_leases` the
lease that lets one replica at a time run maintenance. No rows: every table is
maintained with the defaults until configured otherwise.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "maintenance_configs",
        sa.Column("warehouse", sa.String(63), primary_key=True),
        sa.Column("table_id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(40), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "maintenance_runs",
        sa.Column("table_id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(40), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.Column("message", sa.Text),
        sa.Column("details", sa.Text),
    )
    op.create_table(
        "maintenance_noncurrent",
        sa.Column("table_id", sa.String(36), primary_key=True),
        sa.Column("key", sa.String(1024), primary_key=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "maintenance_leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for name in ("maintenance_leases", "maintenance_noncurrent", "maintenance_runs", "maintenance_configs"):
        op.drop_table(name)
