"""Rows to model objects, and the clock every stored time is read against.

One mapper per model keeps column names out of the query modules' logic.
Mappers take a row's mapping (`result.mappings()`), so that a join, whose
tables share column names such as `id`, can hand each mapper its own table's
columns through `columns`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, overload

from sqlalchemy import Table
from sqlalchemy.engine import Row

from share_store.model import OAuthClient, Share, SharedTable, Token
from share_store.restrictions.restriction import Audience, TableRestriction

# Keyed by column name (SQLAlchemy's RowMapping also takes Column objects).
Fields = Mapping[Any, Any]


@overload
def utc(value: datetime) -> datetime: ...
@overload
def utc(value: None) -> None: ...
def utc(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything we store is UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def utc_now() -> datetime:
    return datetime.now(UTC)


def columns(row: Row, table: Table) -> Fields:
    """`table`'s columns of a joined row, by their plain names."""
    mapping = row._mapping
    return {column.name: mapping[column] for column in table.c}


def share_from(fields: Fields) -> Share:
    return Share(
        id=fields["id"],
        name=fields["name"],
        created_at=utc(fields["created_at"]),
        display_name=fields.get("display_name"),
        comment=fields.get("comment"),
        properties=properties_from(fields.get("properties")),
    )


def table_from(fields: Fields, share: str, audience: Audience | None = None) -> SharedTable:
    """A shared table; `audience` only where a recipient's (or a share's own) token authorized it,
    so that no table read for a provider or listed by the admin carries one."""
    return SharedTable(
        id=fields["id"],
        share=share,
        schema=fields["schema_name"],
        name=fields["name"],
        format=fields["format"],
        bucket=fields["bucket"],
        path=fields["path"],
        history_shared=fields["history_shared"],
        created_at=utc(fields["created_at"]),
        restriction=TableRestriction.from_json(fields.get("restriction")),
        audience=audience,
    )


def properties_from(text: str | None) -> dict[str, str]:
    """A recipient's or a share's properties as stored (a JSON object, or NULL for none)."""
    return {str(key): str(value) for key, value in json.loads(text).items()} if text else {}


def audience_from(recipient_name: str | None, properties: str | None) -> Audience:
    """Who a token reads for: its named recipient with the properties, or a share's own token."""
    if recipient_name is None:
        return Audience(None, {})
    return Audience(recipient_name, properties_from(properties))


def token_from(fields: Fields) -> Token:
    return Token(
        id=fields["id"],
        share_id=fields["share_id"],
        share=fields["share_name"],
        description=fields["description"],
        created_at=utc(fields["created_at"]),
        expires_at=utc(fields["expires_at"]),
        revoked_at=utc(fields["revoked_at"]),
        oauth_client_id=fields["oauth_client_id"],
        replaced_by=fields["replaced_by"],
        recipient_id=fields.get("recipient_id"),
    )


def oauth_client_from(fields: Fields) -> OAuthClient:
    return OAuthClient(
        id=fields["id"],
        share_id=fields["share_id"],
        share=fields["share_name"],
        description=fields["description"],
        created_at=utc(fields["created_at"]),
        expires_at=utc(fields["expires_at"]),
        revoked_at=utc(fields["revoked_at"]),
    )
