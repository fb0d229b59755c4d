"""The writable catalog's users' rows: each an access key, its sealed secret and its policy.

Every function takes the caller's connection, as `warehouse_rows` and `table_pointers` do;
`users.CatalogUsers` makes and checks them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from share_store.catalog.errors import AlreadyExists
from share_store.errors import NotFound
from share_store.persistence.mappers import utc
from share_store.persistence.sql_schema import catalog_users_table


@dataclass(frozen=True)
class CatalogUser:
    name: str
    access_key: str
    sealed_secret: str
    policy: str  # the policy document's JSON text
    created_at: datetime


def create_user(conn: Connection, user: CatalogUser) -> None:
    try:
        conn.execute(
            insert(catalog_users_table).values(
                name=user.name, access_key=user.access_key, sealed_secret=user.sealed_secret,
                policy=user.policy, created_at=user.created_at,
            )
        )  # fmt: skip
    except IntegrityError:
        raise AlreadyExists(f"Catalog user already exists: {user.name}") from None


def _user(row: Row[Any]) -> CatalogUser:
    return CatalogUser(row.name, row.access_key, row.sealed_secret, row.policy, utc(row.created_at))


def user_by_access_key(conn: Connection, access_key: str) -> CatalogUser | None:
    t = catalog_users_table
    row = conn.execute(select(t).where(t.c.access_key == access_key)).first()
    return _user(row) if row is not None else None


def list_users(conn: Connection) -> list[CatalogUser]:
    t = catalog_users_table
    return [_user(row) for row in conn.execute(select(t).order_by(t.c.name))]


def delete_user(conn: Connection, name: str) -> None:
    t = catalog_users_table
    if conn.execute(delete(t).where(t.c.name == name)).rowcount != 1:
        raise NotFound(f"Catalog user does not exist: {name}")
