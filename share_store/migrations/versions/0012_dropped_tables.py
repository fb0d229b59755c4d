"""Dropped tables stay owned: a drop without purge keeps the table's row, marked dropped.

Revision ID: 0012
Revises: 0011

`dropped_at` is when a table (or view) was dropped without purge, NULL while it
lives. `dropped` is "" for a live row and the row's own id once dropped; the
unique name of `warehouse_tables` becomes (warehouse, namespace, name, dropped),
so that it binds live rows only: a dropped table's name is free for a new table
at once (as Lakekeeper's soft deletion has it), while its row, and so its
location, stays until the warehouse's retention has passed or it is undropped.
A discriminator column rather than a partial index: both dialects take it, and
an undrop whose name is taken now fails on the same constraint (a 409).
Rows made before this revision are live.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

NAME = ["warehouse", "namespace", "name"]
#: What revision 0005's unnamed constraint is called once reflected (SQLite keeps no name).
UNNAMED = {"uq": "uq_%(table_name)s_%(column_0_N_name)s"}


def _old_constraint() -> str | None:
    """Revision 0005's unique (warehouse, namespace, name) by the name the database gave it."""
    for constraint in sa.inspect(op.get_bind()).get_unique_constraints("warehouse_tables"):
        if constraint["column_names"] == NAME:
            return constraint["name"]
    return None


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    old = "uq_warehouse_tables_warehouse_namespace_name" if sqlite else _old_constraint()
    with op.batch_alter_table("warehouse_tables", naming_convention=UNNAMED) as batch:
        batch.add_column(sa.Column("dropped_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("dropped", sa.String(36), nullable=False, server_default=""))
        if old is not None:
            batch.drop_constraint(old, type_="unique")
        batch.create_unique_constraint("uq_warehouse_tables_name", [*NAME, "dropped"])


def downgrade() -> None:
    # Dropped rows cannot keep their names under the old constraint: they are forgotten (their
    # files stay, as a drop left them before this revision).
    op.execute("DELETE FROM warehouse_tables WHERE dropped <> ''")
    with op.batch_alter_table("warehouse_tables") as batch:
        batch.drop_constraint("uq_warehouse_tables_name", type_="unique")
        batch.create_unique_constraint("uq_warehouse_tables_warehouse_namespace_name", NAME)
        batch.drop_column("dropped")
        batch.drop_column("dropped_at")
