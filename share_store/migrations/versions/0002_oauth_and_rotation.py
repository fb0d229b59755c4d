"""OAuth clients with their access tokens, and token rotation.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "oauth_clients",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("share_id", sa.String(36), nullable=False, index=True),
        sa.Column("share_name", sa.String(128), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.String(1024), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True)),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    with op.batch_alter_table("tokens") as tokens:
        # Access tokens issued to an OAuth client; NULL for tokens an admin made.
        tokens.add_column(sa.Column("oauth_client_id", sa.String(32), nullable=True))
        # The token that replaced this one when it was rotated.
        tokens.add_column(sa.Column("replaced_by", sa.String(32), nullable=True))
        tokens.create_index("ix_tokens_oauth_client_id", ["oauth_client_id"])
