"""Restricted tables (issue 50): a shared table's restriction, a recipient's properties.

Revision ID: 0013
Revises: 0012

`shared_tables.restriction` is the JSON of `TableRestriction.to_json` (the row
filter as the provider typed it and the columns served), NULL for a table shared
whole. `recipients.properties` is a JSON object of str to str, what a row filter's
`CURRENT_RECIPIENT('key')` reads; NULL for none. `admin_events.detail` is what a
change set, where the path alone does not say it (a restriction's text): never a
secret. Rows made before this revision are unrestricted, without properties.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("shared_tables") as batch:
        batch.add_column(sa.Column("restriction", sa.Text, nullable=True))
    with op.batch_alter_table("recipients") as batch:
        batch.add_column(sa.Column("properties", sa.Text, nullable=True))
    with op.batch_alter_table("admin_events") as batch:
        batch.add_column(sa.Column("detail", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("admin_events") as batch:
        batch.drop_column("detail")
    with op.batch_alter_table("recipients") as batch:
        batch.drop_column("properties")
    with op.batch_alter_table("shared_tables") as batch:
        batch.drop_column("restriction")
