"""Views in the own warehouses: a `kind` beside each pointer of `warehouse_tables` (`table` or `view`).

Revision ID: 0010
Revises: 0009

A view is a pointer to its metadata file, as a table is, and shares the
table's name space in its namespace (the Iceberg REST spec: a view cannot be
created where a table of that name is, nor a table where a view is). One
row per name, its kind beside it, lets the existing unique constraint on
(warehouse, namespace, name) hold that rule even between two racing creates,
and keeps views' locations in the overlap checks with the tables'. Rows made
before this revision are tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("warehouse_tables") as batch:
        batch.add_column(sa.Column("kind", sa.String(8), nullable=False, server_default="table"))


def downgrade() -> None:
    op.execute("DELETE FROM warehouse_tables WHERE kind = 'view'")
    with op.batch_alter_table("warehouse_tables") as batch:
        batch.drop_column("kind")
