"""Idempotency keys of the own warehouses' mutations (issue 52).

Revision ID: 0015
Revises: 0014

`idempotency_keys` holds Iceberg REST 1.11's `Idempotency-Key`s of `/_iceberg`'s
mutations: one row per (caller, key), so that whichever replica a retry lands on
replays the one answer, and two requests with one key cannot both run (the
primary key lets one insert). `caller` is `provider` or `user:<access key>`;
`key` the client's UUID, lowercased; `binding` the SHA-256 of the request the key
was given for (method, route, path and query, the body's SHA-256), so the key
reused for another request is told apart; `claim` the id of the request running
it; `status` `in-progress` or `done`; `answer_status` and `answer` the finalized
answer (its kept headers and body, sealed with the server key: a create's answer
may carry vended keys or a signing grant). Rows are removed by maintenance once
`expires_at` passes.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("caller", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(36), primary_key=True),
        sa.Column("binding", sa.String(64), nullable=False),
        sa.Column("claim", sa.String(36), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answer_status", sa.Integer, nullable=True),
        sa.Column("answer", sa.Text, nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False, index=True),
    )


def downgrade() -> None:
    op.drop_table("idempotency_keys")
