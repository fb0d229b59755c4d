"""Bearer tokens and OAuth clients: issuing, rotating, revoking, and checking a secret.

Only SHA-256 hashes of secrets are stored; a secret is returned once, when it
is made. OAuth clients exchange their secret for short-lived tokens of the
same share, marked with the client's id, which the admin's token listings
leave out.
"""

from __future__ import annotations

import hmac
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from share_store.authentication.tokens import CLIENT_SECRET_PREFIX, hash_secret, new_secret, new_token_id
from share_store.errors import AdminError, NotFound, Unauthenticated
from share_store.model import OAuthClient, Token
from share_store.persistence.mappers import Fields, oauth_client_from, token_from, utc_now
from share_store.persistence.shares import share_row
from share_store.persistence.sql_schema import oauth_clients_table, tokens_table

# -- checking a secret ---------------------------------------------------------


def active_token(fields: Fields | None, digest: str) -> Token:
    """The token of `fields` (found by `digest`) if it may be used now, else `Unauthenticated`."""
    # The lookup is by hash, so timing reveals nothing about the secret; the
    # compare below keeps the final check constant-time all the same.
    if fields is None or not hmac.compare_digest(fields["secret_hash"], digest):
        raise Unauthenticated("The bearer token is missing, invalid or unknown.")
    token = token_from(fields)
    if token.revoked_at is not None:
        raise Unauthenticated("The bearer token has been revoked.", token.id, token.share or None)
    if not token.is_active(utc_now()):
        raise Unauthenticated("The bearer token has expired.", token.id, token.share or None)
    return token


# Made once, as `access`'s lookups are: every /shares request runs it.
TOKEN_BY_HASH = select(tokens_table).where(tokens_table.c.secret_hash == bindparam("digest"))


def authenticate(conn: Connection, secret: str) -> Token:
    """The active token holding `secret`, or `Unauthenticated`."""
    digest = hash_secret(secret)
    row = conn.execute(TOKEN_BY_HASH, {"digest": digest}).mappings().first()
    return active_token(row, digest)


# -- bearer tokens -------------------------------------------------------------


def insert_token(
    conn: Connection,
    share_id: str,
    share_name: str,
    description: str,
    now: datetime,
    expires_at: datetime | None,
    oauth_client_id: str | None = None,
) -> tuple[Token, str]:
    secret = new_secret()
    token = Token(
        id=new_token_id(),
        share_id=share_id,
        share=share_name,
        description=description,
        created_at=now,
        expires_at=expires_at,
        oauth_client_id=oauth_client_id,
    )
    conn.execute(
        insert(tokens_table).values(
            id=token.id,
            share_id=share_id,
            share_name=share_name,
            secret_hash=hash_secret(secret),
            description=description,
            created_at=now,
            expires_at=expires_at,
            oauth_client_id=oauth_client_id,
        )
    )
    return token, secret


def create_token(
    conn: Connection, share: str, expires_in: timedelta | None, description: str
) -> tuple[Token, str]:
    now = utc_now()
    found = share_row(conn, share)
    expires_at = now + expires_in if expires_in else None
    return insert_token(conn, found["id"], found["name"], description, now, expires_at)


def rotate_token(conn: Connection, share: str, token_id: str, grace: timedelta) -> tuple[Token, str]:
    """Replace a token by a new one of the same lifetime; the old one works `grace` longer.

    Recipients can then switch profiles without a moment in which neither
    token works. The grace period never extends the old token's own expiry.
    """
    now = utc_now()
    found = share_row(conn, share)
    row = (
        conn.execute(
            select(tokens_table).where(
                tokens_table.c.id == token_id,
                tokens_table.c.share_id == found["id"],
                tokens_table.c.oauth_client_id.is_(None),
            )
        )
        .mappings()
        .first()
    )
    old = token_from(row) if row else None
    if old is None or not old.is_active(now):
        raise NotFound(f"no active token '{token_id}' in share '{share}'")
    if old.replaced_by:
        raise AdminError(f"token '{token_id}' was already rotated: rotate '{old.replaced_by}' instead")
    lifetime = old.expires_at - old.created_at if old.expires_at else None
    expires_at = now + lifetime if lifetime else None
    token, secret = insert_token(conn, found["id"], found["name"], old.description, now, expires_at)
    grace_end = now + grace
    if old.expires_at is not None:
        grace_end = min(grace_end, old.expires_at)
    conn.execute(
        update(tokens_table)
        .where(tokens_table.c.id == old.id)
        .values(expires_at=grace_end, replaced_by=token.id)
    )
    return token, secret


def tokens_where(conn: Connection, *where: ColumnElement[bool]) -> list[Token]:
    """The bearer tokens `where` selects (a share's, a recipient's), oldest first."""
    rows = conn.execute(select(tokens_table).where(*where).order_by(tokens_table.c.created_at)).mappings()
    return [token_from(row) for row in rows]


def revoke_where(conn: Connection, *where: ColumnElement[bool]) -> int:
    """Revoke the live tokens `where` selects (the rows stay, for audit); how many were."""
    query = (
        update(tokens_table).where(tokens_table.c.revoked_at.is_(None), *where).values(revoked_at=utc_now())
    )
    return conn.execute(query).rowcount or 0


def list_tokens(conn: Connection, share: str) -> list[Token]:
    found = share_row(conn, share)
    return tokens_where(
        conn, tokens_table.c.share_id == found["id"], tokens_table.c.oauth_client_id.is_(None)
    )


def revoke_token(conn: Connection, share: str, token_id: str) -> None:
    found = share_row(conn, share)
    of_share = (tokens_table.c.share_id == found["id"], tokens_table.c.oauth_client_id.is_(None))
    if not revoke_where(conn, tokens_table.c.id == token_id, *of_share):
        raise NotFound(f"no active token '{token_id}' in share '{share}'")


def update_token(
    conn: Connection,
    share: str,
    token_id: str,
    description: str | None,
    expires_in: timedelta | None,
    never: bool = False,
) -> Token:
    """Change an active token's description, and its expiry to now + `expires_in` (or none, `never`)."""
    found = share_row(conn, share)
    where = (
        tokens_table.c.id == token_id,
        tokens_table.c.share_id == found["id"],
        tokens_table.c.oauth_client_id.is_(None),
    )
    row = conn.execute(select(tokens_table).where(*where)).mappings().first()
    now = utc_now()
    if row is None or not token_from(row).is_active(now):
        raise NotFound(f"no active token '{token_id}' in share '{share}'")
    values: dict[str, object] = {}
    if description is not None:
        values["description"] = description
    if never:
        values["expires_at"] = None
    elif expires_in is not None:
        values["expires_at"] = now + expires_in
    if not values:
        raise AdminError("nothing to change: give a description and/or an expiry")
    conn.execute(update(tokens_table).where(*where).values(**values))
    row = conn.execute(select(tokens_table).where(*where)).mappings().first()
    assert row is not None
    return token_from(row)


def revoke_share(conn: Connection, share_id: str) -> None:
    """Revoke every token and client of a share that is going away; the rows stay for audit."""
    for credentials in (tokens_table, oauth_clients_table):
        conn.execute(
            update(credentials)
            .where(credentials.c.share_id == share_id, credentials.c.revoked_at.is_(None))
            .values(revoked_at=utc_now())
        )


# -- OAuth clients -------------------------------------------------------------


def create_oauth_client(
    conn: Connection, share: str, expires_in: timedelta | None, description: str
) -> tuple[OAuthClient, str]:
    secret = new_secret(CLIENT_SECRET_PREFIX)
    now = utc_now()
    found = share_row(conn, share)
    client = OAuthClient(
        id=new_token_id(),
        share_id=found["id"],
        share=found["name"],
        description=description,
        created_at=now,
        expires_at=now + expires_in if expires_in else None,
    )
    conn.execute(
        insert(oauth_clients_table).values(
            id=client.id,
            share_id=client.share_id,
            share_name=client.share,
            secret_hash=hash_secret(secret),
            description=description,
            created_at=now,
            expires_at=client.expires_at,
        )
    )
    return client, secret


def list_oauth_clients(conn: Connection, share: str) -> list[OAuthClient]:
    found = share_row(conn, share)
    rows = conn.execute(
        select(oauth_clients_table)
        .where(oauth_clients_table.c.share_id == found["id"])
        .order_by(oauth_clients_table.c.created_at)
    ).mappings()
    return [oauth_client_from(row) for row in rows]


def revoke_oauth_client(conn: Connection, share: str, client_id: str) -> None:
    """Revoke a client and every access token it was issued."""
    now = utc_now()
    found = share_row(conn, share)
    result = conn.execute(
        update(oauth_clients_table)
        .where(
            oauth_clients_table.c.id == client_id,
            oauth_clients_table.c.share_id == found["id"],
            oauth_clients_table.c.revoked_at.is_(None),
        )
        .values(revoked_at=now)
    )
    if result.rowcount == 0:
        raise NotFound(f"no active OAuth client '{client_id}' in share '{share}'")
    conn.execute(
        update(tokens_table)
        .where(tokens_table.c.oauth_client_id == client_id, tokens_table.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )


def issue_access_token(
    conn: Connection, client_id: str, client_secret: str, lifetime: timedelta
) -> tuple[Token, str]:
    """Exchange client credentials for an access token (OAuth2 client_credentials grant)."""
    digest = hash_secret(client_secret)
    now = utc_now()
    row = (
        conn.execute(select(oauth_clients_table).where(oauth_clients_table.c.id == client_id))
        .mappings()
        .first()
    )
    if row is None or not hmac.compare_digest(row["secret_hash"], digest):
        raise Unauthenticated("invalid client credentials")
    client = oauth_client_from(row)
    if not client.is_active(now):
        raise Unauthenticated("the OAuth client has been revoked or has expired")
    expires_at = now + lifetime
    if client.expires_at is not None:
        expires_at = min(expires_at, client.expires_at)
    # Access tokens are short-lived and renewed often: drop the spent ones.
    conn.execute(
        delete(tokens_table).where(
            tokens_table.c.oauth_client_id == client.id, tokens_table.c.expires_at < now
        )
    )
    return insert_token(conn, client.share_id, client.share, "OAuth access token", now, expires_at, client.id)
