"""Named recipients: the shares granted to each, their tokens, and one-time activation links.

A recipient is a partner known by name. Its token (one credential) opens every
share granted to it, as the Delta Sharing protocol lets a token list several
shares; granting or revoking a share changes what the token opens at once.
Per-share tokens are unchanged. An activation link serves a new token's profile
once: the profile is sealed with the server key until then, and cleared when used.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from share_store.authentication.tokens import hash_secret, new_token_id
from share_store.errors import AdminConflict, AdminError, NotFound
from share_store.model import Recipient, Share, Token
from share_store.persistence.credentials import insert_token, revoke_where, tokens_where
from share_store.persistence.mappers import Fields, share_from, utc, utc_now
from share_store.persistence.shares import share_row
from share_store.persistence.sql_schema import (
    activations_table,
    recipient_shares_table,
    recipients_table,
    shares_table,
    tokens_table,
)

#: Like share names: letters, digits, '-', '_' and '.', at most 128.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _recipient_row(conn: Connection, name: str) -> Fields:
    row = (
        conn.execute(select(recipients_table).where(recipients_table.c.name_key == name.lower()))
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound(f"recipient '{name}' not found")
    return row


def _recipient(conn: Connection, row: Fields) -> Recipient:
    shares = conn.execute(
        select(shares_table.c.name)
        .join(recipient_shares_table, recipient_shares_table.c.share_id == shares_table.c.id)
        .where(recipient_shares_table.c.recipient_id == row["id"])
        .order_by(shares_table.c.name_key)
    ).scalars()
    return Recipient(row["id"], row["name"], utc(row["created_at"]), tuple(shares))


def create_recipient(conn: Connection, name: str) -> Recipient:
    if not NAME.fullmatch(name):
        raise AdminError(f"invalid recipient name {name!r}: letters, digits, '-', '_' and '.', at most 128")
    taken = select(recipients_table.c.id).where(recipients_table.c.name_key == name.lower())
    if conn.execute(taken).first() is not None:
        raise AdminConflict(f"recipient '{name}' already exists")
    recipient = Recipient(new_token_id(), name, utc_now())
    # The unique name_key settles a race between two creations.
    conn.execute(
        insert(recipients_table).values(
            id=recipient.id, name=name, name_key=name.lower(), created_at=recipient.created_at
        )
    )
    return recipient


def list_recipients(conn: Connection) -> list[Recipient]:
    """Every recipient with its shares: two queries however many recipients there are."""
    rows = list(conn.execute(select(recipients_table).order_by(recipients_table.c.name_key)).mappings())
    granted: dict[str, list[str]] = {}
    query = (
        select(recipient_shares_table.c.recipient_id, shares_table.c.name)
        .join(shares_table, recipient_shares_table.c.share_id == shares_table.c.id)
        .order_by(shares_table.c.name_key)
    )
    for recipient_id, share in conn.execute(query):
        granted.setdefault(recipient_id, []).append(share)
    return [
        Recipient(row["id"], row["name"], utc(row["created_at"]), tuple(granted.get(row["id"], ())))
        for row in rows
    ]


def get_recipient(conn: Connection, name: str) -> Recipient:
    return _recipient(conn, _recipient_row(conn, name))


def remove_recipient(conn: Connection, name: str) -> None:
    """Remove a recipient and its grants; its tokens are revoked (their rows stay for audit)."""
    row = _recipient_row(conn, name)
    revoke_where(conn, tokens_table.c.recipient_id == row["id"])
    conn.execute(delete(recipient_shares_table).where(recipient_shares_table.c.recipient_id == row["id"]))
    conn.execute(delete(recipients_table).where(recipients_table.c.id == row["id"]))


def grant_share(conn: Connection, name: str, share: str) -> None:
    recipient, found = _recipient_row(conn, name), share_row(conn, share)
    granted = select(recipient_shares_table).where(
        recipient_shares_table.c.recipient_id == recipient["id"],
        recipient_shares_table.c.share_id == found["id"],
    )
    if conn.execute(granted).first() is not None:
        raise AdminConflict(f"share '{found['name']}' is already granted to recipient '{recipient['name']}'")
    conn.execute(
        insert(recipient_shares_table).values(
            recipient_id=recipient["id"], share_id=found["id"], granted_at=utc_now()
        )
    )


def revoke_share(conn: Connection, name: str, share: str) -> None:
    recipient, found = _recipient_row(conn, name), share_row(conn, share)
    result = conn.execute(
        delete(recipient_shares_table).where(
            recipient_shares_table.c.recipient_id == recipient["id"],
            recipient_shares_table.c.share_id == found["id"],
        )
    )
    if result.rowcount == 0:
        raise NotFound(f"share '{found['name']}' is not granted to recipient '{recipient['name']}'")


def granted_shares(
    conn: Connection, recipient_id: str, after: str | None = None, limit: int | None = None
) -> list[Share]:
    """The shares a recipient's token opens, in name order (`/shares` of its token): all, or at most
    `limit` named after `after`."""
    query = (
        select(shares_table)
        .join(recipient_shares_table, recipient_shares_table.c.share_id == shares_table.c.id)
        .where(recipient_shares_table.c.recipient_id == recipient_id)
        .order_by(shares_table.c.name_key)
    )
    if after is not None:
        query = query.where(shares_table.c.name_key > after)
    if limit is not None:
        query = query.limit(limit)
    return [share_from(row) for row in conn.execute(query).mappings()]


def recipients_of_tokens(conn: Connection, token_ids: list[str]) -> dict[str, str]:
    """The recipient's name of each of `token_ids` that is a named recipient's token."""
    if not token_ids:
        return {}
    query = (
        select(tokens_table.c.id, recipients_table.c.name)
        .join(recipients_table, recipients_table.c.id == tokens_table.c.recipient_id)
        .where(tokens_table.c.id.in_(token_ids))
    )
    return {token_id: name for token_id, name in conn.execute(query)}


# -- tokens --------------------------------------------------------------------------


def create_token(
    conn: Connection, name: str, expires_in: timedelta | None, description: str
) -> tuple[Token, str]:
    recipient = _recipient_row(conn, name)
    now = utc_now()
    expires_at = now + expires_in if expires_in else None
    token, secret = insert_token(conn, "", "", description, now, expires_at)
    conn.execute(
        update(tokens_table).where(tokens_table.c.id == token.id).values(recipient_id=recipient["id"])
    )
    return Token(**{**token.__dict__, "recipient_id": recipient["id"]}), secret


def list_tokens(conn: Connection, name: str) -> list[Token]:
    return tokens_where(conn, tokens_table.c.recipient_id == _recipient_row(conn, name)["id"])


def revoke_token(conn: Connection, name: str, token_id: str) -> None:
    recipient = _recipient_row(conn, name)
    if not revoke_where(conn, tokens_table.c.id == token_id, tokens_table.c.recipient_id == recipient["id"]):
        raise NotFound(f"no active token '{token_id}' of recipient '{recipient['name']}'")


# -- activation links ------------------------------------------------------------------


def create_activation(
    conn: Connection, code: str, token_id: str, sealed_profile: str, expires_at: datetime
) -> None:
    conn.execute(
        insert(activations_table).values(
            code_hash=hash_secret(code),
            token_id=token_id,
            sealed_profile=sealed_profile,
            created_at=utc_now(),
            expires_at=expires_at,
        )
    )


class ActivationGone(NotFound):
    """The link was used, or has expired: 410, and nothing is served."""

    error_code = "ACTIVATION_USED"
    status_code = 410


def use_activation(conn: Connection, code: str) -> str:
    """The sealed profile of an unused, unexpired link, cleared in the same transaction."""
    digest = hash_secret(code)
    row = (
        conn.execute(select(activations_table).where(activations_table.c.code_hash == digest))
        .mappings()
        .first()
    )
    if row is None:
        raise NotFound("no such activation link")
    if row["used_at"] is not None or row["sealed_profile"] is None:
        raise ActivationGone("this activation link was already used: ask the provider for a new one")
    if utc(row["expires_at"]) <= utc_now():
        raise ActivationGone("this activation link has expired: ask the provider for a new one")
    # Used once: only the first of two racing requests updates the row.
    result = conn.execute(
        update(activations_table)
        .where(activations_table.c.code_hash == digest, activations_table.c.used_at.is_(None))
        .values(used_at=utc_now(), sealed_profile=None)
    )
    if result.rowcount == 0:
        raise ActivationGone("this activation link was already used: ask the provider for a new one")
    return str(row["sealed_profile"])
