"""Admin operations on shares, tokens and OAuth clients, answered as JSON-ready dicts.

One implementation serves the CLI on the store's host, the `/admin/v1` REST
API and the console, so all accept the same input (the AIStor table-spec
grammar, durations like `30d`), check the same things (a table added is there,
unless told it is written later) and report the same errors.
`sharing_server.admin.client` speaks the same interface over HTTP for `--server`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from share_store.errors import AdminError, ShareStoreError
from share_store.lifetimes import MAX_TOKEN_LIFETIME, bounded_lifetime, parse_duration
from share_store.model import SharedTable, TableSpec, parse_create_args, parse_table_ref
from share_store.outages import outages_unavailable
from share_store.persistence import ShareStore
from share_store.persistence.activity import ActivityRow
from share_store.persistence.share_metadata import NO_CHANGE, MetadataChange
from share_store.readers.table_readers import TableReaders
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from sharing_server import paths
from sharing_server.admin.entries import admin_not_found, client_entry, iso, issued_token, token_entry
from sharing_server.admin.recipient_commands import RecipientCommands
from sharing_server.admin.restriction_commands import RestrictionCommands, restriction_entry
from sharing_server.admin.share_metadata import metadata_entry, record_metadata_change
from sharing_server.auth.profiles import oauth_profile_document

# The CLI and the admin API default to the same lifetimes: tokens and OAuth
# clients alike live 30 days unless told otherwise, and a rotated token works
# one more hour.
DEFAULT_EXPIRES = "30d"
#: The mark of admin tokens (`sharing-server admin-token`, the demo's).
DEFAULT_GRACE = "1h"

#: How to share a table that is not there yet, said on every path's refusal alike.
NO_CHECK_HINT = (
    '(to share it before it is written: --no-check, "check": false in the admin API, '
    'or the console\'s "Share before it is written")'
)


def table_entry(table: SharedTable) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "schema": table.schema,
        "name": table.name,
        "format": table.format,
        "historyShared": table.history_shared,
        "restriction": restriction_entry(table),
    }
    if table.is_iceberg:
        warehouse, name, namespace = table.iceberg_identifier
        entry.update(warehouse=warehouse, namespace=".".join(namespace), table=name)
    else:
        entry.update(bucket=table.bucket, path=table.path)
    return entry


def check_delta_table(storage: ObjectStorage, spec: TableSpec) -> None:
    """AdminError unless the Delta table of `spec` has a `_delta_log/` (one listing, no read)."""
    try:
        found = next(iter(storage.list(spec.bucket, f"{spec.path}/_delta_log/")), None)
    except (OSError, ShareStoreError, ClientError, BotoCoreError) as error:
        reason = error.message if isinstance(error, ShareStoreError) else error
        raise AdminError(f"cannot look for table {spec.bucket}/{spec.path}: {reason}") from error
    if found is None:
        raise AdminError(
            f"no Delta table at {spec.bucket}/{spec.path}: it has no _delta_log/ {NO_CHECK_HINT}"
        )


def check_iceberg_table(catalogs: CatalogRegistry, spec: TableSpec) -> None:
    """AdminError unless the Iceberg table of `spec` loads from its warehouse's catalog."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, RESTError

    warehouse = spec.bucket
    namespace_text, _, table = spec.path.rpartition("/")
    namespace = tuple(namespace_text.split("."))
    name = ".".join((*namespace, table))
    try:
        with outages_unavailable(f"the Iceberg catalog for warehouse '{warehouse}'"):
            catalogs.catalog(warehouse).load_table((*namespace, table))
    except (NoSuchTableError, NoSuchNamespaceError) as error:
        raise AdminError(f"no Iceberg table {name} in warehouse '{warehouse}' {NO_CHECK_HINT}") from error
    except (ShareStoreError, OSError, ValueError, RESTError) as error:
        reason = error.message if isinstance(error, ShareStoreError) else error
        raise AdminError(f"cannot look for Iceberg table {name}: {reason}") from error


class AdminBackend(Protocol):
    """What the CLI needs: `Admin` on the store's host, `RemoteAdmin` through `/admin/v1`.

    `check=False` shares tables without looking for them (written later: `--no-check`).
    """

    def list_shares(self) -> list[dict[str, Any]]: ...
    def create_share(
        self,
        name: str,
        tables: list[str],
        history: bool = True,
        check: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> dict[str, Any]: ...
    def share_info(self, name: str) -> dict[str, Any]: ...
    def update_share(
        self,
        name: str,
        add: list[str],
        remove: list[str],
        history: bool = True,
        check: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> dict[str, Any]: ...
    def remove_share(self, name: str) -> None: ...
    def create_token(self, share: str, expires: str, description: str) -> dict[str, Any]: ...
    def list_tokens(self, share: str) -> list[dict[str, Any]]: ...
    def rotate_token(self, share: str, token_id: str, grace: str) -> dict[str, Any]: ...
    def update_token(
        self, share: str, token_id: str, expires: str | None = None, description: str | None = None
    ) -> dict[str, Any]: ...
    def revoke_token(self, share: str, token_id: str) -> None: ...
    def create_oauth_client(self, share: str, expires: str, description: str) -> dict[str, Any]: ...
    def list_oauth_clients(self, share: str) -> list[dict[str, Any]]: ...
    def revoke_oauth_client(self, share: str, client_id: str) -> None: ...
    def restrict(
        self,
        share: str,
        table: str,
        where: str | None = None,
        columns: str | list[str] | None = None,
        clear: bool = False,
    ) -> dict[str, Any]: ...


class Admin(RecipientCommands, RestrictionCommands):
    """Admin operations against a store, checking added tables against the storage and catalogs.

    `catalogs` and `storage` are called only when a table is added (the CLI
    makes them then; the server hands over its own), `readers` only when a
    restriction is checked against a table's schema (made from them unless given).
    """

    def __init__(
        self,
        store: ShareStore,
        endpoint: str,
        catalogs: Callable[[], CatalogRegistry | None],
        storage: Callable[[], ObjectStorage],
        max_lifetime: timedelta | None = MAX_TOKEN_LIFETIME,
        server_key: bytes | None = None,
        readers: Callable[[], TableReaders] | None = None,
    ) -> None:
        self.store = store
        #: Seals activation links' profiles (`recipient_commands`); None where it cannot be read.
        self.server_key = server_key
        self.endpoint = endpoint.rstrip("/")
        #: `[admin] max_token_lifetime`: no token or OAuth client lasts longer (None: no bound).
        self.max_lifetime = max_lifetime
        self._catalogs = catalogs
        self._storage = storage
        self._readers = readers or self._own_readers
        self._made_readers: TableReaders | None = None

    def _own_readers(self) -> TableReaders:
        """Readers of the CLI's own, made once on first use."""
        if self._made_readers is None:
            self._made_readers = TableReaders(self._storage(), self._catalogs(), self.store)
        return self._made_readers

    def catalog_health(self) -> list[dict[str, Any]]:
        """Each configured Iceberg catalog with its backend and last load error (none configured: [])."""
        catalogs = self._catalogs()
        return catalogs.health() if catalogs is not None else []

    def _check_tables(self, specs: list[TableSpec], check: bool) -> None:
        """Refuse Iceberg specs whose warehouse no configured catalog serves and, unless `check`
        is False, any table that is not there: a Delta table without a `_delta_log/`, an
        Iceberg table its catalog cannot load. Every spec is checked before anything is written.
        """
        uniform = [spec for spec in specs if spec.format == "uniform"]
        catalogs = None
        if uniform:
            catalogs = self._catalogs()
            if catalogs is None:
                raise AdminError("no Iceberg catalog is configured: add a [catalogs.<name>] block")
            for spec in uniform:
                catalogs.check_warehouse(spec.bucket)
        if not check:
            return
        delta = [spec for spec in specs if spec.format != "uniform"]
        storage = self._storage() if delta else None
        for spec in specs:
            if spec.format == "uniform":
                assert catalogs is not None
                check_iceberg_table(catalogs, spec)
            else:
                assert storage is not None
                check_delta_table(storage, spec)

    # -- shares ----------------------------------------------------------------

    @admin_not_found
    def list_shares(
        self, search: str = "", after: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Shares with their counts, in name order: those whose name holds `search`, after `after`."""
        return [
            {
                "name": found.share.name,
                "id": found.share.id,
                "createdAt": iso(found.share.created_at),
                "tables": found.tables,
                "activeTokens": found.active_tokens,
                **metadata_entry(found.share),
            }
            for found in self.store.share_counts(search, after, limit)
        ]

    @admin_not_found
    def create_share(
        self,
        name: str,
        tables: list[str],
        history: bool = True,
        check: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> dict[str, Any]:
        """A share with `tables` and `metadata`, all checked before anything is kept."""
        specs = parse_create_args(tables)
        self._check_tables(specs, check)
        share = self.store.create_share(name, specs, history_shared=history, metadata=metadata)
        record_metadata_change(self.store, "POST", share.name, metadata)
        return {"name": share.name, "id": share.id, "tables": len(specs), **metadata_entry(share)}

    @admin_not_found
    def share_info(self, name: str) -> dict[str, Any]:
        share = self.store.get_share(name)
        now = datetime.now(UTC)
        tokens = [t for t in self.store.list_tokens(share.name) if t.is_active(now)]
        clients = [c for c in self.store.list_oauth_clients(share.name) if c.is_active(now)]
        return {
            "name": share.name,
            "id": share.id,
            "createdAt": iso(share.created_at),
            "tables": [table_entry(table) for table in self.store.list_tables(share.name)],
            "activeTokens": len(tokens),
            "activeOAuthClients": len(clients),
            **metadata_entry(share),
        }

    @admin_not_found
    def update_share(
        self,
        name: str,
        add: list[str],
        remove: list[str],
        history: bool = True,
        check: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> dict[str, Any]:
        """Add and remove tables and change the metadata: all or none."""
        if not add and not remove and metadata.is_empty:
            raise AdminError(
                "nothing to do: give --add, --remove, --display-name, --comment, --property or --unset"
            )
        specs = [TableSpec.parse(spec) for spec in add]
        refs = [parse_table_ref(ref) for ref in remove]
        self._check_tables(specs, check)
        share = self.store.update_share(name, specs, refs, history_shared=history, metadata=metadata)
        record_metadata_change(self.store, "PATCH", share.name, metadata)
        return {"name": share.name, "added": len(specs), "removed": len(refs), **metadata_entry(share)}

    @admin_not_found
    def get_table(self, share: str, schema: str, name: str) -> SharedTable:
        """One shared table, as the store holds it (the console's table page reads it)."""
        return self.store.get_table(share, schema, name)

    @admin_not_found
    def remove_share(self, name: str) -> None:
        self.store.remove_share(name)

    # -- bearer tokens -----------------------------------------------------------

    @admin_not_found
    def create_token(self, share: str, expires: str, description: str) -> dict[str, Any]:
        lifetime = bounded_lifetime(expires, self.max_lifetime)
        token, secret = self.store.create_token(share, lifetime, description)
        return issued_token(self.endpoint, token, secret)

    @admin_not_found
    def list_tokens(self, share: str) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        return [token_entry(token, now) for token in self.store.list_tokens(share)]

    @admin_not_found
    def rotate_token(self, share: str, token_id: str, grace: str) -> dict[str, Any]:
        grace_period = parse_duration(grace, allow_never=False)
        assert grace_period is not None
        token, secret = self.store.rotate_token(share, token_id, grace_period)
        issued = issued_token(self.endpoint, token, secret)
        issued["replaces"] = token_id
        issued["graceEndsAt"] = iso(
            next(t.expires_at for t in self.store.list_tokens(share) if t.id == token_id)
        )
        return issued

    @admin_not_found
    def update_token(
        self, share: str, token_id: str, expires: str | None = None, description: str | None = None
    ) -> dict[str, Any]:
        """Change a token's description and/or expiry (from now, bounded as a new token's)."""
        lifetime = bounded_lifetime(expires, self.max_lifetime) if expires is not None else None
        never = expires is not None and lifetime is None
        token = self.store.update_token(share, token_id, description, lifetime, never)
        return token_entry(token, datetime.now(UTC))

    @admin_not_found
    def revoke_token(self, share: str, token_id: str) -> None:
        self.store.revoke_token(share, token_id)

    # -- OAuth clients -------------------------------------------------------------

    @admin_not_found
    def create_oauth_client(self, share: str, expires: str, description: str) -> dict[str, Any]:
        lifetime = bounded_lifetime(expires, self.max_lifetime)
        client, secret = self.store.create_oauth_client(share, lifetime, description)
        return {
            "clientId": client.id,
            "clientSecret": secret,
            "expiresAt": iso(client.expires_at),
            "endpoint": self.endpoint,
            "tokenEndpoint": self.endpoint + paths.OAUTH_TOKEN,
            "profile": oauth_profile_document(
                self.endpoint, self.endpoint + paths.OAUTH_TOKEN, client.id, secret
            ),
        }

    @admin_not_found
    def list_oauth_clients(self, share: str) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        return [client_entry(client, now) for client in self.store.list_oauth_clients(share)]

    @admin_not_found
    def revoke_oauth_client(self, share: str, client_id: str) -> None:
        self.store.revoke_oauth_client(share, client_id)

    # -- recent activity (kept in the store by sharing_server.observability.activity) ------------

    def activity(self, group: str, since: datetime, until: datetime) -> list[ActivityRow]:
        """Requests, versions, files, bytes and errors per share, table or token."""
        return self.store.activity_summary(group, since, until)

    def activity_summaries(self, since: datetime, until: datetime) -> dict[str, list[ActivityRow]]:
        """`activity` for shares, tables and tokens at once (one read of the store)."""
        return self.store.activity_summaries(since, until)

    def admin_events(self, since: datetime, until: datetime, limit: int = 50) -> list[dict[str, Any]]:
        """Providers' changes and refused admin tokens, newest first."""
        return self.store.recent_admin_events(since, until, limit)

    def activity_per_hour(self, since: datetime, until: datetime) -> dict[datetime, int]:
        return self.store.activity_per_hour(since, until)

    def recent_activity(self, since: datetime, until: datetime, limit: int = 50) -> list[dict[str, Any]]:
        return self.store.recent_activity(since, until, limit)

    def token_last_use(self, token_ids: list[str]) -> dict[str, str | None]:
        """When each token was last used, as far as the activity kept goes back."""
        seen = self.store.token_last_use(token_ids)
        return {token_id: iso(seen.get(token_id)) for token_id in token_ids}

    # -- console sessions ----------------------------------------------------------

    def end_console_session(self, session_id: str, until: datetime) -> None:
        self.store.end_console_session(session_id, until)

    def console_session_ended(self, session_id: str) -> bool:
        return self.store.console_session_ended(session_id)
