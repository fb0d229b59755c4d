"""AIStor Tables: warehouses, their namespaces and table pointers, and catalog users.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "warehouses",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "warehouse_namespaces",
        sa.Column("warehouse", sa.String(63), sa.ForeignKey("warehouses.name"), primary_key=True),
        sa.Column("namespace", sa.String(1024), primary_key=True),
        sa.Column("properties", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "warehouse_tables",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("warehouse", sa.String(63), sa.ForeignKey("warehouses.name"), nullable=False),
        sa.Column("namespace", sa.String(1024), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("metadata_location", sa.Text, nullable=False),
        # Swapped by compare-and-swap: a commit names the value it read.
        sa.Column("pointer", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("warehouse", "namespace", "name"),
    )
    op.create_table(
        "catalog_users",
        sa.Column("access_key", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("sealed_secret", sa.Text, nullable=False),
        sa.Column("policy", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
