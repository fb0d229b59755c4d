"""Each own-warehouse table's location, decided by the catalog and recorded beside its pointer.

Revision ID: 0008
Revises: 0007

Tables made before this revision have none recorded; the catalog records
their current metadata's location the first time it needs it, if it takes it
(`share_store/catalog/locations.py`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("warehouse_tables") as batch:
        batch.add_column(sa.Column("location", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("warehouse_tables") as batch:
        batch.drop_column("location")
