"""`ShareStore`: the one object the server and the CLI hold, in front of one engine.

Each method opens one connection, or one transaction for a change, and hands
it to the module that knows the tables. Every admin change thus commits whole
or not at all. Connections and transactions are opened by `transactions`
(`persistence.transactions.Transactions`), which this store makes over its
engine and hands to the own warehouses' catalog and users as well: one owner of
transactions for the whole store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from share_store.iceberg.versions import SnapshotVersion
from share_store.migrate import upgrade
from share_store.model import OAuthClient, Recipient, Share, SharedTable, TableSpec, Token
from share_store.persistence import (
    activity,
    admin_events,
    console_sessions,
    credentials,
    recipients,
    share_listing,
    shares,
    snapshot_summaries,
    snapshot_versions,
    token_lookup,
)
from share_store.persistence.activity import ActivityEvent, ActivityRow
from share_store.persistence.activity_days import DaySummaries
from share_store.persistence.admin_events import AdminEvent
from share_store.persistence.engine import make_engine
from share_store.persistence.mappers import utc_now
from share_store.persistence.share_listing import ShareCounts
from share_store.persistence.share_metadata import NO_CHANGE, MetadataChange
from share_store.persistence.token_lookup import OnToken
from share_store.persistence.transactions import Transactions
from share_store.restrictions.restriction import Audience, TableRestriction
from share_store.tables.summaries import SnapshotSummary

P = ParamSpec("P")
R = TypeVar("R")


class ShareStore:
    """Shares, their tables and tokens, behind one SQLAlchemy engine."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = make_engine(url)
        upgrade(self.engine)
        self.transactions = Transactions(self.engine)
        #: Settled days' activity summaries, made once (`activity_days`).
        self._activity_days = DaySummaries()

    def close(self) -> None:
        self.engine.dispose()

    def ping(self) -> str:
        """The database's kind ("sqlite", "postgresql"), after one round trip to it."""
        with self.transactions.read() as conn:
            conn.execute(text("SELECT 1"))
        return self.engine.dialect.name

    def _read(self, query: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs) -> R:
        with self.transactions.read() as conn:
            return query(conn, *args, **kwargs)

    def _change(
        self, change: Callable[Concatenate[Connection, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        with self.transactions.change() as conn:
            return change(conn, *args, **kwargs)

    # -- shares and their tables -----------------------------------------------

    def list_shares(self) -> list[Share]:
        return self._read(shares.list_shares)

    def share_counts(
        self, search: str = "", after: str | None = None, limit: int | None = None
    ) -> list[ShareCounts]:
        """Shares with their table and live-token counts: searched by name, paged after a name."""
        return self._read(share_listing.share_counts, utc_now(), search, after, limit)

    def get_share(self, name: str) -> Share:
        return self._read(shares.get_share, name)

    def get_share_by_id(self, share_id: str) -> Share | None:
        return self._read(shares.get_share_by_id, share_id)

    def list_schemas(self, share: str | Share) -> list[str]:
        """Schema names of a share, by name or as already read (one SELECT fewer)."""
        return self._read(shares.list_schemas, share)

    def list_tables(
        self, share: str | Share, schema: str | None = None, audience: Audience | None = None
    ) -> list[SharedTable]:
        """Tables of a share, or of one schema of it (404 if that schema is unknown); with the
        `audience` a token authorized them for (a share token at /iceberg: `Audience()`)."""
        return self._read(shares.list_tables, share, schema, audience)

    def all_tables(self) -> list[SharedTable]:
        """Every shared table of every share."""
        return self._read(shares.all_tables)

    def get_table(self, share: str, schema: str, name: str, audience: Audience | None = None) -> SharedTable:
        return self._read(shares.get_table, share, schema, name, audience)

    def set_restriction(
        self, share: str, schema: str, name: str, restriction: TableRestriction | None
    ) -> SharedTable:
        """Restrict a shared table (None: share it whole again), in one transaction."""
        return self._change(shares.set_restriction, share, schema, name, restriction)

    def create_share(
        self,
        name: str,
        specs: Iterable[TableSpec] = (),
        history_shared: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> Share:
        """A new share with its tables and `metadata` (checked whole first), in one transaction."""
        return self._change(shares.create_share, name, specs, history_shared, metadata)

    def update_share(
        self,
        name: str,
        add: Iterable[TableSpec] = (),
        remove: Iterable[tuple[str, str]] = (),
        history_shared: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> Share:
        """Tables added and removed and the metadata changed: all or none. The share after."""
        return self._change(shares.update_share, name, add, remove, history_shared, metadata)

    def remove_share(self, name: str) -> None:
        with self.transactions.change() as conn:
            share_id = shares.share_row(conn, name)["id"]
            credentials.revoke_share(conn, share_id)
            shares.delete_share(conn, share_id)

    # -- bearer tokens ---------------------------------------------------------

    def authenticate(self, secret: str) -> Token:
        """The active token holding `secret`, or `Unauthenticated`."""
        return self._read(credentials.authenticate, secret)

    def authorized_share(
        self, secret: str, share: str, on_token: OnToken | None = None
    ) -> tuple[Token, Share]:
        """The token holding `secret` and its share named `share`, in one SELECT.

        `Unauthenticated` for a bad secret; `NotFound` for a share that does not
        exist or is not the token's. `on_token` is told the token before the share
        is checked.
        """
        return self._read(token_lookup.authorized_share, secret, share, on_token)

    def authorized_audience(
        self, secret: str, share: str, on_token: OnToken | None = None
    ) -> tuple[Token, Share, Audience]:
        """As `authorized_share`, with whom the token reads for (its recipient and properties), in
        the same SELECT: /iceberg's share-named URLs read a share's tables for that audience."""
        return self._read(token_lookup.authorized_audience, secret, share, on_token)

    def authorized_table(
        self, secret: str, share: str, schema: str, table: str, on_token: OnToken | None = None
    ) -> tuple[Token, SharedTable]:
        """The token holding `secret` and the table `share/schema/table` of its share, in one SELECT.

        As `authorized_share`, and `NotFound` as from `get_table` if the share
        does not hold the table.
        """
        return self._read(token_lookup.authorized_table, secret, share, schema, table, on_token)

    def create_token(
        self, share: str, expires_in: timedelta | None, description: str = ""
    ) -> tuple[Token, str]:
        """Create a token; the secret is returned here and never again."""
        return self._change(credentials.create_token, share, expires_in, description)

    def rotate_token(self, share: str, token_id: str, grace: timedelta) -> tuple[Token, str]:
        """Replace a token by a new one of the same lifetime; the old one works `grace` longer."""
        return self._change(credentials.rotate_token, share, token_id, grace)

    def list_tokens(self, share: str) -> list[Token]:
        return self._read(credentials.list_tokens, share)

    def update_token(
        self,
        share: str,
        token_id: str,
        description: str | None = None,
        expires_in: timedelta | None = None,
        never: bool = False,
    ) -> Token:
        """Change an active token's description and/or expiry (`never`: no expiry)."""
        return self._change(credentials.update_token, share, token_id, description, expires_in, never)

    def revoke_token(self, share: str, token_id: str) -> None:
        self._change(credentials.revoke_token, share, token_id)

    # -- named recipients --------------------------------------------------------

    def create_recipient(self, name: str, properties: dict[str, str] | None = None) -> Recipient:
        return self._change(recipients.create_recipient, name, properties)

    def update_recipient_properties(self, name: str, given: dict[str, str], unset: list[str]) -> Recipient:
        """Set and unset a recipient's properties: all or none."""
        return self._change(recipients.update_properties, name, given, unset)

    def list_recipients(self) -> list[Recipient]:
        return self._read(recipients.list_recipients)

    def get_recipient(self, name: str) -> Recipient:
        return self._read(recipients.get_recipient, name)

    def remove_recipient(self, name: str) -> None:
        self._change(recipients.remove_recipient, name)

    def grant_share(self, recipient: str, share: str) -> None:
        self._change(recipients.grant_share, recipient, share)

    def revoke_recipient_share(self, recipient: str, share: str) -> None:
        self._change(recipients.revoke_share, recipient, share)

    def recipients_of_tokens(self, token_ids: list[str]) -> dict[str, str]:
        return self._read(recipients.recipients_of_tokens, token_ids)

    def granted_shares(
        self, recipient_id: str, after: str | None = None, limit: int | None = None
    ) -> list[Share]:
        return self._read(recipients.granted_shares, recipient_id, after, limit)

    def tables_page(
        self, share: str | Share, schema: str | None, after: tuple[str, str] | None, limit: int
    ) -> list[SharedTable]:
        """One page of a share's (or a schema's) tables, read from the store (keyset: after a key)."""
        return self._read(shares.tables_page, share, schema, after, limit)

    def schemas_page(self, share: str | Share, after: str | None, limit: int) -> list[tuple[str, str]]:
        return self._read(shares.schemas_page, share, after, limit)

    def create_recipient_token(
        self, recipient: str, expires_in: timedelta | None, description: str = ""
    ) -> tuple[Token, str]:
        return self._change(recipients.create_token, recipient, expires_in, description)

    def list_recipient_tokens(self, recipient: str) -> list[Token]:
        return self._read(recipients.list_tokens, recipient)

    def revoke_recipient_token(self, recipient: str, token_id: str) -> None:
        self._change(recipients.revoke_token, recipient, token_id)

    def create_activation(self, code: str, token_id: str, sealed_profile: str, expires_at: datetime) -> None:
        self._change(recipients.create_activation, code, token_id, sealed_profile, expires_at)

    def use_activation(self, code: str) -> str:
        return self._change(recipients.use_activation, code)

    # -- OAuth clients ---------------------------------------------------------

    def create_oauth_client(
        self, share: str, expires_in: timedelta | None, description: str = ""
    ) -> tuple[OAuthClient, str]:
        """Create a client of `share`; its secret is returned here and never again."""
        return self._change(credentials.create_oauth_client, share, expires_in, description)

    def list_oauth_clients(self, share: str) -> list[OAuthClient]:
        return self._read(credentials.list_oauth_clients, share)

    def revoke_oauth_client(self, share: str, client_id: str) -> None:
        """Revoke a client and every access token it was issued."""
        self._change(credentials.revoke_oauth_client, share, client_id)

    def issue_access_token(
        self, client_id: str, client_secret: str, lifetime: timedelta
    ) -> tuple[Token, str]:
        """Exchange client credentials for an access token (OAuth2 client_credentials grant)."""
        return self._change(credentials.issue_access_token, client_id, client_secret, lifetime)

    # -- Iceberg snapshot versions ---------------------------------------------

    def snapshot_versions(self, table_id: str) -> list[SnapshotVersion]:
        return self._read(snapshot_versions.snapshot_versions, table_id)

    def add_snapshot_versions(self, table_id: str, versions: list[SnapshotVersion]) -> list[SnapshotVersion]:
        """Record new versions; if another replica numbered them first, keep its numbers."""
        if versions:
            # A transaction of its own: on PostgreSQL a failed insert spoils the
            # transaction it ran in, and the numbers are read afresh below anyway.
            try:
                self._change(snapshot_versions.insert_snapshot_versions, table_id, versions)
            except IntegrityError:
                pass
        return self.snapshot_versions(table_id)

    # -- Delta snapshot summaries ----------------------------------------------

    def snapshot_summary(self, table_id: str) -> SnapshotSummary | None:
        return self._read(snapshot_summaries.snapshot_summary, table_id)

    def save_snapshot_summaries(self, summaries: list[tuple[str, SnapshotSummary]]) -> None:
        """Keep many tables' summaries in one transaction (the warmer's start); if another replica
        saved one of them meanwhile, each is kept on its own instead."""
        try:
            with self.transactions.change() as conn:
                for table_id, summary in summaries:
                    snapshot_summaries.save_snapshot_summary(conn, table_id, summary)
        except IntegrityError:
            for table_id, summary in summaries:
                self.save_snapshot_summary(table_id, summary)

    def save_snapshot_summary(self, table_id: str, summary: SnapshotSummary) -> None:
        """Keep `summary` as the table's; if another replica saved one at the same time, keep that."""
        try:
            self._change(snapshot_summaries.save_snapshot_summary, table_id, summary)
        except IntegrityError:
            pass

    # -- recent activity (the console's) ---------------------------------------

    def record_activity(self, events: list[ActivityEvent]) -> None:
        self._change(activity.insert_events, events)

    def prune_activity(self, before: datetime, max_events: int) -> int:
        """Drop events older than `before`, then the oldest beyond `max_events`."""
        with self.transactions.change() as conn:
            admin_events.prune(conn, before)
            return activity.prune(conn, before, max_events)

    def activity_summary(self, group: str, since: datetime, until: datetime) -> list[ActivityRow]:
        """Requests per `group` ("share", "table" or "token") in [since, until)."""
        return self._read(activity.summary, group, since, until, self._activity_days)

    def record_admin_events(self, events: list[AdminEvent]) -> None:
        self._change(admin_events.insert_events, events)

    def recent_admin_events(self, since: datetime, until: datetime, limit: int = 50) -> list[dict[str, Any]]:
        return self._read(admin_events.recent, since, until, limit)

    def activity_summaries(self, since: datetime, until: datetime) -> dict[str, list[ActivityRow]]:
        """Requests per share, table and token in [since, until), in one read."""
        return self._read(activity.summaries, since, until, self._activity_days)

    def activity_per_hour(self, since: datetime, until: datetime) -> dict[datetime, int]:
        """Requests in [since, until) per hour (UTC), keyed by the hour's start."""
        return self._read(activity.hourly, since, until)

    def recent_activity(self, since: datetime, until: datetime, limit: int = 50) -> list[dict[str, Any]]:
        return self._read(activity.recent, since, until, limit)

    def read_tables(self, since: datetime) -> set[tuple[str, str, str]]:
        """The tables recipients read since `since`, as (share, schema, table) lower-cased."""
        return self._read(activity.read_tables, since)

    def token_last_use(self, token_ids: list[str]) -> dict[str, datetime]:
        return self._read(activity.last_use, token_ids)

    def end_console_session(self, session_id: str, until: datetime) -> None:
        """Mark a console session signed out (kept until it would have expired anyway)."""
        self._change(console_sessions.end_session, session_id, until)

    def console_session_ended(self, session_id: str) -> bool:
        return self._read(console_sessions.session_ended, session_id)
