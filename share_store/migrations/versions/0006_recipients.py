"""Named recipients: recipients, the shares granted to them, their tokens, one-time activation links.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recipients",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("name_key", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "recipient_shares",
        sa.Column(
            "recipient_id",
            sa.String(32),
            sa.ForeignKey("recipients.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column(
            "share_id", sa.String(36), sa.ForeignKey("shares.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("granted_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_recipient_shares_share_id", "recipient_shares", ["share_id"])
    op.create_table(
        "activations",
        sa.Column("code_hash", sa.String(64), primary_key=True),
        sa.Column("token_id", sa.String(32), nullable=False),
        sa.Column("sealed_profile", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True)),
    )
    with op.batch_alter_table("tokens") as batch:
        batch.add_column(sa.Column("recipient_id", sa.String(32)))
        batch.create_index("ix_tokens_recipient_id", ["recipient_id"])


def downgrade() -> None:
    with op.batch_alter_table("tokens") as batch:
        batch.drop_index("ix_tokens_recipient_id")
        batch.drop_column("recipient_id")
    op.drop_table("activations")
    op.drop_index("ix_recipient_shares_share_id", "recipient_shares")
    op.drop_table("recipient_shares")
    op.drop_table("recipients")
