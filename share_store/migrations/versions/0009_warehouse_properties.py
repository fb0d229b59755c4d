"""A warehouse's properties: the `table-default.*` its new tables start with, under the namespace's.

Revision ID: 0009
Revises: 0008

Warehouses made before this revision have none: their tables get the server's
defaults (format version 2) and their namespaces' `table-default.*`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("warehouses") as batch:
        batch.add_column(sa.Column("properties", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("warehouses") as batch:
        batch.drop_column("properties")
