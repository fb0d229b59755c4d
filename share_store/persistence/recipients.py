"""Named recipients: the shares granted to each, their tokens, and one-time activation links.

A recipient is a partner known by name. Its token (one credential) opens every
share granted to it, as the Delta Sharing protocol lets a token list several
shares; granting or revoking a share changes what the token opens at once.
Per-share tokens are unchanged. An activation link serves a new token's profile
once: the profile is sealed with the server key until then, and cleared when used.
A recipient's properties are what a restricted table's row filter reads of it
(`CURRENT_RECIPIENT('key')`), kept as one JSON object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from share_store.authentication.tokens import hash_secret, new_token_id
from share_store.errors import AdminConflict, AdminError, NotFound
from share_store.model import Recipient, Share, Token
from share_store.persistence.credentials import insert_token, revoke_where, tokens_where
from share_store.persistence.mappers import Fields, properties_from, share_from, utc, utc_now
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
#: A property's key: what `CURRENT_RECIPIENT('key')` names.
PROPERTY_KEY = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MAX_PROPERTY_VALUE = 1024
MAX_PROPERTIES = 50


def check_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """`properties` as kept, or `AdminError` naming the first key or value that cannot be."""
    for key, value in properties.items():
        if not isinstance(key, str) or not PROPERTY_KEY.fullmatch(key):
            shown = key[:64] + "..." if isinstance(key, str) and len(key) > 64 else key
            raise AdminError(f"invalid property key {shown!r}: 1-128 letters, digits, '_', '-' and '.'")
        if not isinstance(value, str):
            raise AdminError(f"property {key!r}: its value must be a string")
        if len(value) > MAX_PROPERTY_VALUE:
            raise AdminError(
                f"property {key!r}: its value is {len(value)} characters; at most {MAX_PROPERTY_VALUE}"
            )
        if any((ord(char) < 32 and char != "\t") or 0xD800 <= ord(char) <= 0xDFFF for char in value):
            raise AdminError(f"property {key!r}: its value holds a control character or a lone surrogate")
    if len(properties) > MAX_PROPERTIES:
        raise AdminError(f"a recipient has at most {MAX_PROPERTIES} properties ({len(properties)} given)")
    return dict(properties)


def _properties_text(properties: Mapping[str, str]) -> str | None:
    return json.dumps(dict(sorted(properties.items()))) if properties else None


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
    properties = properties_from(row.get("properties"))
    return Recipient(row["id"], row["name"], utc(row["created_at"]), tuple(shares), properties)


def create_recipient(conn: Connection, name: str, properties: Mapping[str, str] | None = None) -> Recipient:
    if not NAME.fullmatch(name):
        raise AdminError(f"invalid recipient name {name!r}: letters, digits, '-', '_' and '.', at most 128")
    checked = check_properties(properties or {})
    taken = select(recipients_table.c.id).where(recipients_table.c.name_key == name.lower())
    if conn.execute(taken).first() is not None:
        raise AdminConflict(f"recipient '{name}' already exists")
    recipient = Recipient(new_token_id(), name, utc_now(), properties=checked)
    # The unique name_key settles a race between two creations.
    conn.execute(
        insert(recipients_table).values(
            id=recipient.id,
            name=name,
            name_key=name.lower(),
            created_at=recipient.created_at,
            properties=_properties_text(checked),
        )
    )
    return recipient


def update_properties(
    conn: Connection, name: str, given: Mapping[str, str], unset: Iterable[str]
) -> Recipient:
    """Set `given` and remove `unset` of a recipient's properties, all checked before any is kept;
    removing a key the recipient lacks is an error, so that a typo is not taken for done."""
    row = _recipient_row(conn, name)
    properties = properties_from(row["properties"])
    removed = list(unset)
    for key in removed:
        if key in given:
            raise AdminError(f"property {key!r} is both set and unset")
        if key not in properties:
            raise AdminError(f"recipient '{row['name']}' has no property {key!r} to unset")
        del properties[key]
    checked = check_properties({**properties, **given})
    conn.execute(
        update(recipients_table)
        .where(recipients_table.c.id == row["id"])
        .values(properties=_properties_text(checked))
    )
    return _recipient(conn, {**row, "properties": _properties_text(checked)})


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
        Recipient(
            row["id"],
            row["name"],
            utc(row["created_at"]),
            tuple(granted.get(row["id"], ())),
            properties_from(row["properties"]),
        )
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
