"""What one bearer token may open, found in one SELECT.

Every protocol request carries a secret and names a share, and most name a
table too. Joining tokens → shares → shared_tables answers all of it in one
round trip. The joins are outer so that the answers recipients must tell
apart stay apart: a bad secret is 401; a share that does not exist and a share
that is not the token's are the same 404, so that a token cannot probe share
names; a table not in the share is the 404 `get_table` gives. A table's lookup
joins the token's named recipient too, in the same SELECT, so that the table
comes back with its audience (who it is read for: a restricted table's filter
reads the recipient's properties), never a second round trip.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Select, and_, bindparam, exists, or_, select
from sqlalchemy.engine import Connection, Row

from share_store.authentication.tokens import hash_secret
from share_store.errors import NotFound
from share_store.model import Share, SharedTable, Token
from share_store.persistence.credentials import active_token
from share_store.persistence.mappers import audience_from, columns, share_from, table_from
from share_store.persistence.shares import table_not_found
from share_store.persistence.sql_schema import (
    recipient_shares_table,
    recipients_table,
    shares_table,
    tables_table,
    tokens_table,
)
from share_store.restrictions.restriction import Audience

#: Told the token as soon as it is known good, before the share or table is looked at:
#: the audit log then says who asked even when the answer is 404.
OnToken = Callable[[Token], None]


def _query(with_table: bool, with_audience: bool = False) -> Select:
    # The share joins only if it has the name asked for and is the token's own, or granted to
    # the named recipient whose token it is.
    granted = (
        exists()
        .where(
            recipient_shares_table.c.recipient_id == tokens_table.c.recipient_id,
            recipient_shares_table.c.share_id == shares_table.c.id,
        )
        .correlate(tokens_table, shares_table)
    )
    share_join = and_(
        shares_table.c.name_key == bindparam("share_key"),
        or_(shares_table.c.id == tokens_table.c.share_id, granted),
    )
    query = select(tokens_table, shares_table).select_from(tokens_table).outerjoin(shares_table, share_join)
    if with_table:
        table_join = and_(
            tables_table.c.share_id == shares_table.c.id,
            tables_table.c.schema_key == bindparam("schema_key"),
            tables_table.c.name_key == bindparam("table_key"),
        )
        query = (
            query.add_columns(
                tables_table,
                recipients_table.c.name.label("recipient_name"),
                recipients_table.c.properties.label("recipient_properties"),
            )
            .outerjoin(tables_table, table_join)
            .outerjoin(recipients_table, recipients_table.c.id == tokens_table.c.recipient_id)
        )
    elif with_audience:
        query = query.add_columns(
            recipients_table.c.name.label("recipient_name"),
            recipients_table.c.properties.label("recipient_properties"),
        ).outerjoin(recipients_table, recipients_table.c.id == tokens_table.c.recipient_id)
    return query.where(tokens_table.c.secret_hash == bindparam("digest"))


# Made once, the names bound at each run: made per request, with the names in it, a statement
# cost more to build and for SQLAlchemy to walk for its cache key than the database took to
# answer it (every protocol request makes one). SQLAlchemy keeps a statement's key once made.
SHARE_QUERY = _query(with_table=False)
TABLE_QUERY = _query(with_table=True)
#: A share with who its token reads for (/iceberg's share-named URLs, which list and sign tables).
AUDIENCE_QUERY = _query(with_table=False, with_audience=True)


def _lookup(
    conn: Connection,
    secret: str,
    share: str,
    on_token: OnToken | None,
    table: tuple[str, str] | None = None,
    query: Select = SHARE_QUERY,
) -> tuple[Row, Token, Share]:
    digest = hash_secret(secret)
    params = {"digest": digest, "share_key": share.lower()}
    if table is not None:
        params.update(schema_key=table[0].lower(), table_key=table[1].lower())
        query = TABLE_QUERY
    row = conn.execute(query, params).first()
    token = active_token(None if row is None else columns(row, tokens_table), digest)
    assert row is not None  # active_token refuses a secret no token holds
    if on_token is not None:
        on_token(token)
    fields = columns(row, shares_table)
    if fields["id"] is None:
        # Clients' tests grep this text: keep it as it is.
        raise NotFound(f"share '{share}' not found")
    return row, token, share_from(fields)


def authorized_share(
    conn: Connection, secret: str, share: str, on_token: OnToken | None = None
) -> tuple[Token, Share]:
    """The active token holding `secret` and its share, if the share is the one named `share`."""
    _, token, found = _lookup(conn, secret, share, on_token)
    return token, found


def authorized_audience(
    conn: Connection, secret: str, share: str, on_token: OnToken | None = None
) -> tuple[Token, Share, Audience]:
    """As `authorized_share`, with who the token reads the share's tables for: its named recipient
    and the recipient's properties, or a share's own token's."""
    row, token, found = _lookup(conn, secret, share, on_token, query=AUDIENCE_QUERY)
    mapping = row._mapping
    return token, found, audience_from(mapping["recipient_name"], mapping["recipient_properties"])


def authorized_table(
    conn: Connection, secret: str, share: str, schema: str, table: str, on_token: OnToken | None = None
) -> tuple[Token, SharedTable]:
    """The active token holding `secret` and the table `share/schema/table`, if in the token's share,
    with its audience: the token's named recipient and its properties, or a share's own token's."""
    row, token, found = _lookup(conn, secret, share, on_token, (schema, table))
    fields = columns(row, tables_table)
    if fields["id"] is None:
        raise table_not_found(share, schema, table)
    mapping = row._mapping
    audience = audience_from(mapping["recipient_name"], mapping["recipient_properties"])
    return token, table_from(fields, found.name, audience)
