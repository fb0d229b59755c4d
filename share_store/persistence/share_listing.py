"""The admin's list of shares with their table and live-token counts: searched and paged in the store.

One page costs three queries whatever the store holds (10,000 shares, 100,000
tokens): the page of shares by name (keyset: after the last name shown), then
the tables and the live tokens of those shares only, counted by the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.engine import Connection

from share_store.model import Share
from share_store.persistence.mappers import share_from
from share_store.persistence.sql_schema import shares_table, tables_table, tokens_table


@dataclass(frozen=True)
class ShareCounts:
    share: Share
    tables: int
    active_tokens: int


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _live(now: datetime) -> ColumnElement[bool]:
    return and_(
        tokens_table.c.revoked_at.is_(None),
        tokens_table.c.oauth_client_id.is_(None),
        or_(tokens_table.c.expires_at.is_(None), tokens_table.c.expires_at > now),
    )


def _counts(
    conn: Connection, column: ColumnElement[str], ids: Sequence[str] | None, *where: ColumnElement[bool]
) -> dict[str, int]:
    query = select(column, func.count()).where(*where).group_by(column)
    if ids is not None:
        query = query.where(column.in_(ids))
    return {key: int(count) for key, count in conn.execute(query)}


def share_counts(
    conn: Connection, now: datetime, search: str = "", after: str | None = None, limit: int | None = None
) -> list[ShareCounts]:
    """Shares whose name holds `search` (any case), in name order after `after`, at most `limit`."""
    query = select(shares_table).order_by(shares_table.c.name_key)
    if search:
        query = query.where(shares_table.c.name_key.like(f"%{_escaped(search.lower())}%", escape="\\"))
    if after is not None:
        query = query.where(shares_table.c.name_key > after.lower())
    if limit is not None:
        query = query.limit(limit)
    shares = [share_from(row) for row in conn.execute(query).mappings()]
    # A page names its shares; the whole list counts everything in one pass instead.
    ids = [share.id for share in shares] if limit is not None or search else None
    tables = _counts(conn, tables_table.c.share_id, ids)
    tokens = _counts(conn, tokens_table.c.share_id, ids, _live(now))
    return [ShareCounts(share, tables.get(share.id, 0), tokens.get(share.id, 0)) for share in shares]
