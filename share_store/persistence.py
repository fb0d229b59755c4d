"""Share store persistence on SQLAlchemy: SQLite by default, any SQLAlchemy URL.

Every admin change runs in one transaction, so an interrupted or rejected
command leaves the store exactly as it was.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from share_store.errors import AdminConflict, AdminError, NotFound, Unauthenticated
from share_store.iceberg.versions import SnapshotVersion
from share_store.migrate import upgrade
from share_store.model import OAuthClient, Share, SharedTable, TableSpec, Token, validate_name
from share_store.tokens import CLIENT_SECRET_PREFIX, hash_secret, new_secret, new_token_id

metadata = MetaData()

shares_table = Table(
    "shares",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("name_key", String(128), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

tables_table = Table(
    "shared_tables",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("share_id", String(36), ForeignKey("shares.id", ondelete="CASCADE"), nullable=False),
    Column("schema_name", String(128), nullable=False),
    Column("schema_key", String(128), nullable=False),
    Column("name", String(128), nullable=False),
    Column("name_key", String(128), nullable=False),
    Column("format", String(16), nullable=False),
    Column("bucket", String(63), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("history_shared", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("share_id", "schema_key", "name_key"),
)

tokens_table = Table(
    "tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    # Not a foreign key: a removed share keeps its (revoked) tokens for audit.
    Column("share_id", String(36), nullable=False, index=True),
    Column("share_name", String(128), nullable=False),
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("description", String(1024), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True)),
    Column("revoked_at", DateTime(timezone=True)),
    Column("oauth_client_id", String(32), index=True),
    Column("replaced_by", String(32)),
)

oauth_clients_table = Table(
    "oauth_clients",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("share_id", String(36), nullable=False, index=True),
    Column("share_name", String(128), nullable=False),
    Column("secret_hash", String(64), nullable=False, unique=True),
    Column("description", String(1024), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True)),
    Column("revoked_at", DateTime(timezone=True)),
)

iceberg_versions_table = Table(
    "iceberg_versions",
    metadata,
    Column("table_id", String(36), nullable=False, primary_key=True),
    Column("version", BigInteger, nullable=False, primary_key=True),
    Column("snapshot_id", BigInteger, nullable=False),
    Column("timestamp_ms", BigInteger, nullable=False),
    UniqueConstraint("table_id", "snapshot_id"),
)


def _utc(value: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes; everything we store is UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _now() -> datetime:
    return datetime.now(UTC)


def _share(row: Row) -> Share:
    return Share(id=row.id, name=row.name, created_at=_utc(row.created_at))


def _table(row: Row, share: str) -> SharedTable:
    return SharedTable(
        id=row.id,
        share=share,
        schema=row.schema_name,
        name=row.name,
        format=row.format,
        bucket=row.bucket,
        path=row.path,
        history_shared=row.history_shared,
        created_at=_utc(row.created_at),
    )


def _token(row: Row) -> Token:
    return Token(
        id=row.id,
        share_id=row.share_id,
        share=row.share_name,
        description=row.description,
        created_at=_utc(row.created_at),
        expires_at=_utc(row.expires_at),
        revoked_at=_utc(row.revoked_at),
        oauth_client_id=row.oauth_client_id,
        replaced_by=row.replaced_by,
    )


def _oauth_client(row: Row) -> OAuthClient:
    return OAuthClient(
        id=row.id,
        share_id=row.share_id,
        share=row.share_name,
        description=row.description,
        created_at=_utc(row.created_at),
        expires_at=_utc(row.expires_at),
        revoked_at=_utc(row.revoked_at),
    )


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


class ShareStore:
    """Shares, their tables and tokens, behind one SQLAlchemy engine."""

    def __init__(self, url: str) -> None:
        # Pre-ping: after the database restarts or fails over, pooled connections are
        # dead; checking each before use lets service resume without a restart.
        self.engine: Engine = create_engine(url, future=True, pool_pre_ping=True)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        upgrade(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # -- reads -------------------------------------------------------------

    def list_shares(self) -> list[Share]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(shares_table).order_by(shares_table.c.name_key))
            return [_share(row) for row in rows]

    def get_share(self, name: str) -> Share:
        with self.engine.connect() as conn:
            return self._share_row(conn, name)

    def get_share_by_id(self, share_id: str) -> Share | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(shares_table).where(shares_table.c.id == share_id)).first()
            return _share(row) if row else None

    def list_schemas(self, share: str) -> list[str]:
        with self.engine.connect() as conn:
            share_row = self._share_row(conn, share)
            rows = conn.execute(
                select(tables_table.c.schema_name, tables_table.c.schema_key)
                .where(tables_table.c.share_id == share_row.id)
                .order_by(tables_table.c.schema_key, tables_table.c.name_key)
            )
            names: dict[str, str] = {}
            for row in rows:
                names.setdefault(row.schema_key, row.schema_name)
            return list(names.values())

    def list_tables(self, share: str, schema: str | None = None) -> list[SharedTable]:
        """Tables of a share, or of one schema of it (404 if that schema is unknown)."""
        with self.engine.connect() as conn:
            share_row = self._share_row(conn, share)
            query = select(tables_table).where(tables_table.c.share_id == share_row.id)
            if schema is not None:
                query = query.where(tables_table.c.schema_key == schema.lower())
            rows = conn.execute(query.order_by(tables_table.c.schema_key, tables_table.c.name_key))
            tables = [_table(row, share_row.name) for row in rows]
        if schema is not None and not tables:
            raise NotFound(f"schema '{schema}' not found")
        return tables

    def get_table(self, share: str, schema: str, name: str) -> SharedTable:
        with self.engine.connect() as conn:
            share_row = self._share_row(conn, share)
            row = conn.execute(
                select(tables_table).where(
                    tables_table.c.share_id == share_row.id,
                    tables_table.c.schema_key == schema.lower(),
                    tables_table.c.name_key == name.lower(),
                )
            ).first()
        if row is None:
            raise NotFound(
                f"[Share/Schema/Table] '{share}/{schema}/{name}' does not exist, "
                "please contact your share provider for further information."
            )
        return _table(row, share_row.name)

    # -- admin changes: one transaction each ---------------------------------

    def create_share(self, name: str, specs: Iterable[TableSpec] = (), history_shared: bool = True) -> Share:
        validate_name("share", name)
        with self.engine.begin() as conn:
            if conn.execute(select(shares_table.c.id).where(shares_table.c.name_key == name.lower())).first():
                raise AdminConflict(f"share '{name}' already exists")
            share = Share(id=str(uuid.uuid4()), name=name, created_at=_now())
            conn.execute(
                insert(shares_table).values(
                    id=share.id, name=name, name_key=name.lower(), created_at=share.created_at
                )
            )
            self._add_tables(conn, share.id, specs, history_shared)
        return share

    def update_share(
        self,
        name: str,
        add: Iterable[TableSpec] = (),
        remove: Iterable[tuple[str, str]] = (),
        history_shared: bool = True,
    ) -> None:
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, name)
            for schema, table in remove:
                found = conn.execute(
                    select(tables_table.c.id).where(
                        tables_table.c.share_id == share_row.id,
                        tables_table.c.schema_key == schema.lower(),
                        tables_table.c.name_key == table.lower(),
                    )
                ).first()
                if found is None:
                    raise NotFound(f"table '{schema}/{table}' is not in share '{name}'")
                conn.execute(
                    delete(iceberg_versions_table).where(iceberg_versions_table.c.table_id == found.id)
                )
                conn.execute(delete(tables_table).where(tables_table.c.id == found.id))
            self._add_tables(conn, share_row.id, add, history_shared)

    def remove_share(self, name: str) -> None:
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, name)
            for credentials in (tokens_table, oauth_clients_table):
                conn.execute(
                    update(credentials)
                    .where(credentials.c.share_id == share_row.id, credentials.c.revoked_at.is_(None))
                    .values(revoked_at=_now())
                )
            table_ids = select(tables_table.c.id).where(tables_table.c.share_id == share_row.id)
            conn.execute(
                delete(iceberg_versions_table).where(iceberg_versions_table.c.table_id.in_(table_ids))
            )
            conn.execute(delete(tables_table).where(tables_table.c.share_id == share_row.id))
            conn.execute(delete(shares_table).where(shares_table.c.id == share_row.id))

    def create_token(
        self, share: str, expires_in: timedelta | None, description: str = ""
    ) -> tuple[Token, str]:
        """Create a token; the secret is returned here and never again."""
        now = _now()
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, share)
            expires_at = now + expires_in if expires_in else None
            return self._insert_token(conn, share_row.id, share_row.name, description, now, expires_at)

    def rotate_token(self, share: str, token_id: str, grace: timedelta) -> tuple[Token, str]:
        """Replace a token by a new one of the same lifetime; the old one works `grace` longer.

        Recipients can then switch profiles without a moment in which neither
        token works. The grace period never extends the old token's own expiry.
        """
        now = _now()
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, share)
            row = conn.execute(
                select(tokens_table).where(
                    tokens_table.c.id == token_id,
                    tokens_table.c.share_id == share_row.id,
                    tokens_table.c.oauth_client_id.is_(None),
                )
            ).first()
            old = _token(row) if row else None
            if old is None or not old.is_active(now):
                raise NotFound(f"no active token '{token_id}' in share '{share}'")
            if old.replaced_by:
                raise AdminError(
                    f"token '{token_id}' was already rotated: rotate '{old.replaced_by}' instead"
                )
            lifetime = old.expires_at - old.created_at if old.expires_at else None
            expires_at = now + lifetime if lifetime else None
            token, secret = self._insert_token(
                conn, share_row.id, share_row.name, old.description, now, expires_at
            )
            grace_end = now + grace
            if old.expires_at is not None:
                grace_end = min(grace_end, old.expires_at)
            conn.execute(
                update(tokens_table)
                .where(tokens_table.c.id == old.id)
                .values(expires_at=grace_end, replaced_by=token.id)
            )
        return token, secret

    def list_tokens(self, share: str) -> list[Token]:
        with self.engine.connect() as conn:
            share_row = self._share_row(conn, share)
            rows = conn.execute(
                select(tokens_table)
                .where(tokens_table.c.share_id == share_row.id, tokens_table.c.oauth_client_id.is_(None))
                .order_by(tokens_table.c.created_at)
            )
            return [_token(row) for row in rows]

    def revoke_token(self, share: str, token_id: str) -> None:
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, share)
            result = conn.execute(
                update(tokens_table)
                .where(
                    tokens_table.c.id == token_id,
                    tokens_table.c.share_id == share_row.id,
                    tokens_table.c.oauth_client_id.is_(None),
                    tokens_table.c.revoked_at.is_(None),
                )
                .values(revoked_at=_now())
            )
            if result.rowcount == 0:
                raise NotFound(f"no active token '{token_id}' in share '{share}'")

    def authenticate(self, secret: str) -> Token:
        """The active token holding `secret`, or `Unauthenticated`."""
        digest = hash_secret(secret)
        with self.engine.connect() as conn:
            row = conn.execute(select(tokens_table).where(tokens_table.c.secret_hash == digest)).first()
        # The lookup is by hash, so timing reveals nothing about the secret; the
        # compare below keeps the final check constant-time all the same.
        if row is None or not hmac.compare_digest(row.secret_hash, digest):
            raise Unauthenticated("The bearer token is missing, invalid or unknown.")
        token = _token(row)
        if token.revoked_at is not None:
            raise Unauthenticated("The bearer token has been revoked.")
        if not token.is_active(_now()):
            raise Unauthenticated("The bearer token has expired.")
        return token

    # -- OAuth clients ---------------------------------------------------------

    def create_oauth_client(
        self, share: str, expires_in: timedelta | None, description: str = ""
    ) -> tuple[OAuthClient, str]:
        """Create a client of `share`; its secret is returned here and never again."""
        secret = new_secret(CLIENT_SECRET_PREFIX)
        now = _now()
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, share)
            client = OAuthClient(
                id=new_token_id(),
                share_id=share_row.id,
                share=share_row.name,
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

    def list_oauth_clients(self, share: str) -> list[OAuthClient]:
        with self.engine.connect() as conn:
            share_row = self._share_row(conn, share)
            rows = conn.execute(
                select(oauth_clients_table)
                .where(oauth_clients_table.c.share_id == share_row.id)
                .order_by(oauth_clients_table.c.created_at)
            )
            return [_oauth_client(row) for row in rows]

    def revoke_oauth_client(self, share: str, client_id: str) -> None:
        """Revoke a client and every access token it was issued."""
        now = _now()
        with self.engine.begin() as conn:
            share_row = self._share_row(conn, share)
            result = conn.execute(
                update(oauth_clients_table)
                .where(
                    oauth_clients_table.c.id == client_id,
                    oauth_clients_table.c.share_id == share_row.id,
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
        self, client_id: str, client_secret: str, lifetime: timedelta
    ) -> tuple[Token, str]:
        """Exchange client credentials for an access token (OAuth2 client_credentials grant)."""
        digest = hash_secret(client_secret)
        now = _now()
        with self.engine.begin() as conn:
            row = conn.execute(
                select(oauth_clients_table).where(oauth_clients_table.c.id == client_id)
            ).first()
            if row is None or not hmac.compare_digest(row.secret_hash, digest):
                raise Unauthenticated("invalid client credentials")
            client = _oauth_client(row)
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
            return self._insert_token(
                conn, client.share_id, client.share, "OAuth access token", now, expires_at, client.id
            )

    # -- Iceberg snapshot versions ---------------------------------------------

    def snapshot_versions(self, table_id: str) -> list[SnapshotVersion]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(iceberg_versions_table)
                .where(iceberg_versions_table.c.table_id == table_id)
                .order_by(iceberg_versions_table.c.version)
            )
            return [SnapshotVersion(row.version, row.snapshot_id, row.timestamp_ms) for row in rows]

    def add_snapshot_versions(self, table_id: str, versions: list[SnapshotVersion]) -> list[SnapshotVersion]:
        """Record new versions; if another replica numbered them first, keep its numbers."""
        if versions:
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        insert(iceberg_versions_table),
                        [
                            {
                                "table_id": table_id,
                                "version": v.version,
                                "snapshot_id": v.snapshot_id,
                                "timestamp_ms": v.timestamp_ms,
                            }
                            for v in versions
                        ],
                    )
            except IntegrityError:
                pass
        return self.snapshot_versions(table_id)

    # -- helpers -----------------------------------------------------------

    def _share_row(self, conn: Connection, name: str) -> Row:
        row = conn.execute(select(shares_table).where(shares_table.c.name_key == name.lower())).first()
        if row is None:
            # Both phrasings: admins have long read "does not exist", admin API clients grep "not found".
            raise NotFound(f"share '{name}' not found: it does not exist")
        return row

    def _insert_token(
        self,
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

    def _add_tables(
        self, conn: Connection, share_id: str, specs: Iterable[TableSpec], history_shared: bool
    ) -> None:
        now = _now()
        for spec in specs:
            exists = conn.execute(
                select(tables_table.c.id).where(
                    tables_table.c.share_id == share_id,
                    tables_table.c.schema_key == spec.schema.lower(),
                    tables_table.c.name_key == spec.name.lower(),
                )
            ).first()
            if exists:
                raise AdminConflict(f"table '{spec.schema}/{spec.name}' is already in this share")
            conn.execute(
                insert(tables_table).values(
                    id=str(uuid.uuid4()),
                    share_id=share_id,
                    schema_name=spec.schema,
                    schema_key=spec.schema.lower(),
                    name=spec.name,
                    name_key=spec.name.lower(),
                    format=spec.format,
                    bucket=spec.bucket,
                    path=spec.path,
                    history_shared=history_shared,
                    created_at=now,
                )
            )


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
