"""Share metadata and async queries (issue 51).

Revision ID: 0014
Revises: 0013

`shares.display_name`, `shares.comment` and `shares.properties` are what the
2026-02 protocol lets `/shares` and `/shares/{share}` say of a share (a display
name of at most 255 characters, a comment of at most 65,536, at most 50
properties as a JSON object of str to str); NULL for none.

`async_queries` holds the 2026-07 protocol's async queries: one row per
(caller, table, idempotency key), so that any replica answers a poll and a key
given again finds its query. `caller` is the recipient's id for a named
recipient's token (its tokens rotate, its queries stay) or `token:<id>` for a
share's own token; `key_hash` is the SHA-256 of the client's key (its length is
the client's choice, the column's is not); `parameters` the request as parsed
(JSON), `parameters_hash` its SHA-256, so the same key with other parameters is
told apart; `version` the snapshot version the query reads, pinned when it was
made; `status` `pending`, `ready` or `failed`, with `error` the protocol's error
body for a failed one. Rows are removed once `expires_at` passes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("shares") as batch:
        batch.add_column(sa.Column("display_name", sa.String(255), nullable=True))
        batch.add_column(sa.Column("comment", sa.Text, nullable=True))
        batch.add_column(sa.Column("properties", sa.Text, nullable=True))
    op.create_table(
        "async_queries",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("table_id", sa.String(36), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("parameters", sa.Text, nullable=False),
        sa.Column("parameters_hash", sa.String(64), nullable=False),
        sa.Column("version", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.UniqueConstraint("caller", "table_id", "key_hash"),
    )


def downgrade() -> None:
    op.drop_table("async_queries")
    with op.batch_alter_table("shares") as batch:
        batch.drop_column("properties")
        batch.drop_column("comment")
        batch.drop_column("display_name")
