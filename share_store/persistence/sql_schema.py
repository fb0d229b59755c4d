"""The store's tables, as SQLAlchemy sees them.

The Alembic revisions in share_store/migrations create and change these tables
in the database; this module is what the code queries. tests/share_store/test_migrate.py
checks that a migrated store matches `metadata`, so a column added here needs a
revision too.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

shares_table = Table(
    "shares",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("name_key", String(128), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # What the 2026-02 protocol lets a listing say of a share (revision 0014); NULL: none.
    Column("display_name", String(255)),
    Column("comment", Text),
    # JSON object of str to str, at most 50 pairs.
    Column("properties", Text),
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
    # JSON of `TableRestriction.to_json` (revision 0013): the rows and columns served; NULL: all.
    Column("restriction", Text),
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
    # A named recipient's token: it opens every share granted to the recipient (share_id "").
    Column("recipient_id", String(32), index=True),
)

recipients_table = Table(
    "recipients",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(128), nullable=False),
    Column("name_key", String(128), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # JSON object of str to str (revision 0013): what `CURRENT_RECIPIENT('key')` reads; NULL: none.
    Column("properties", Text),
)

recipient_shares_table = Table(
    "recipient_shares",
    metadata,
    Column("recipient_id", String(32), ForeignKey("recipients.id", ondelete="CASCADE"), primary_key=True),
    Column("share_id", String(36), ForeignKey("shares.id", ondelete="CASCADE"), primary_key=True, index=True),
    Column("granted_at", DateTime(timezone=True), nullable=False),
)

#: One-time links that serve a recipient token's profile once: the secret sealed until then.
activations_table = Table(
    "activations",
    metadata,
    Column("code_hash", String(64), primary_key=True),
    Column("token_id", String(32), nullable=False),
    Column("sealed_profile", Text),  # cleared when used
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True)),
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

# Each Delta table's latest version as its head lines describe it (see
# share_store/tables/summaries.py): what a restarted server answers /metadata with.
snapshot_summaries_table = Table(
    "snapshot_summaries",
    metadata,
    Column("table_id", String(36), primary_key=True),
    Column("bucket", String(63), nullable=False),
    Column("path", String(1024), nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("commit_time", BigInteger),
    Column("size", BigInteger, nullable=False),
    Column("num_files", BigInteger, nullable=False),
    Column("deletion_vectors", Boolean, nullable=False),
    Column("protocol", Text, nullable=False),
    Column("metadata", Text, nullable=False),
)

# Recent audit events of recipients' requests (see persistence/activity.py);
# SQLite only numbers rows by itself for an INTEGER primary key.
activity_table = Table(
    "activity_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False, index=True),
    Column("token_id", String(32), index=True),
    Column("share_name", String(128)),
    Column("schema_name", String(128)),
    Column("table_name", String(128)),
    Column("route", String(64), nullable=False),
    Column("status", Integer, nullable=False),
    Column("error_code", String(64)),
    Column("version", BigInteger),
    Column("files", Integer, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("duration_ms", Float, nullable=False),
)

#: Providers' changes (admin API and console, every method but GET) and refused admin tokens.
admin_events_table = Table(
    "admin_events",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False, index=True),
    Column("client", String(64), nullable=False),
    Column("method", String(8), nullable=False),
    Column("path", String(512), nullable=False),
    Column("status", Integer, nullable=False),
    #: "failed" or "throttled" for a wrong admin token; None for a change.
    Column("sign_in", String(16)),
    #: What the change set where its path does not say it (revision 0013: a restriction's text).
    Column("detail", Text),
)

#: `activity_events` summed per UTC day and (token, share, schema, table, version), kept as events
#: are written, so that week- and month-long views read days, not events. "" and -1 stand for none
#: (a primary key takes no NULL).
activity_days_table = Table(
    "activity_days",
    metadata,
    Column("day", DateTime(timezone=True), primary_key=True),
    Column("token_id", String(32), primary_key=True),
    Column("share_name", String(128), primary_key=True),
    Column("schema_name", String(128), primary_key=True),
    Column("table_name", String(128), primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("requests", BigInteger, nullable=False),
    Column("errors", BigInteger, nullable=False),
    Column("files", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("last", DateTime(timezone=True), nullable=False),
)

# Console sessions signed out before their end (see persistence/console_sessions.py).
console_sessions_ended_table = Table(
    "console_sessions_ended",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("until", DateTime(timezone=True), nullable=False, index=True),
)

# -- AIStor Tables: the writable catalog (see warehouses/rows.py) --------------

warehouses_table = Table(
    "warehouses",
    metadata,
    Column("name", String(63), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # JSON: the warehouse's `table-default.*` properties, under every namespace's own (0009).
    Column("properties", Text, nullable=True),
)

# A nested namespace's levels are joined with the unit separator (\x1f).
warehouse_namespaces_table = Table(
    "warehouse_namespaces",
    metadata,
    Column("warehouse", String(63), ForeignKey("warehouses.name"), primary_key=True),
    Column("namespace", String(1024), primary_key=True),
    Column("properties", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# The table pointer: its current metadata file, swapped by compare-and-swap on `pointer`.
warehouse_tables_table = Table(
    "warehouse_tables",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("warehouse", String(63), ForeignKey("warehouses.name"), nullable=False),
    Column("namespace", String(1024), nullable=False),
    Column("name", String(255), nullable=False),
    Column("metadata_location", Text, nullable=False),
    # The table's folder inside its warehouse (a key prefix, no slashes at the ends), fixed when the
    # table is made; NULL for tables made before revision 0008 until the catalog records it.
    Column("location", Text),
    Column("pointer", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # `table` or `view` (revision 0010): both are pointers to a metadata file, in one name space.
    Column("kind", String(8), nullable=False, server_default="table"),
    # A drop without purge (revision 0012) keeps the row, and its location claimed, until its
    # warehouse's retention has passed: `dropped_at` is when; `dropped` is "" for a live table and
    # the row's own id once dropped, so that the unique name below binds live rows only (a dropped
    # table's name is free at once, as in Lakekeeper) on SQLite and PostgreSQL alike.
    Column("dropped_at", DateTime(timezone=True)),
    Column("dropped", String(36), nullable=False, server_default=""),
    UniqueConstraint("warehouse", "namespace", "name", "dropped", name="uq_warehouse_tables_name"),
)

# -- Maintenance of the own warehouses' tables (share_store/catalog/maintenance/, revision 0011) ----------

# S3 Tables' maintenance configurations: per warehouse (table_id "") and per table, one per kind.
maintenance_configs_table = Table(
    "maintenance_configs",
    metadata,
    Column("warehouse", String(63), primary_key=True),
    Column("table_id", String(36), primary_key=True),
    Column("kind", String(40), primary_key=True),
    # JSON: {"status": "enabled"|"disabled", "settings": {kind: {...}}}, as checked by settings.py.
    Column("value", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# Each table's last run of each kind (S3 Tables' job status).
maintenance_runs_table = Table(
    "maintenance_runs",
    metadata,
    Column("table_id", String(36), primary_key=True),
    Column("kind", String(40), primary_key=True),
    Column("status", String(16), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("message", Text),
    # JSON: what the run did (files rewritten, snapshots expired, files deleted, bytes).
    Column("details", Text),
)

# Files found unreferenced, and since when: deleted `nonCurrentDays` after they were marked.
maintenance_noncurrent_table = Table(
    "maintenance_noncurrent",
    metadata,
    Column("table_id", String(36), primary_key=True),
    Column("key", String(1024), primary_key=True),
    Column("since", DateTime(timezone=True), nullable=False),
)

# One replica runs maintenance at a time: the lease's holder, until it expires (for the background
# runs, which are still to come; revision 0011 made it with the rest).
maintenance_leases_table = Table(
    "maintenance_leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(64), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# Catalog users sign with SigV4, so their secrets are kept sealed with the server key, not hashed.
catalog_users_table = Table(
    "catalog_users",
    metadata,
    Column("access_key", String(32), primary_key=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("sealed_secret", Text, nullable=False),
    Column("policy", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)


#: The 2026-07 protocol's async queries (revision 0014): one row per (caller, table, key), so that
#: any replica answers a poll. See the revision's docstring for each column.
async_queries_table = Table(
    "async_queries",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("caller", String(64), nullable=False),
    Column("table_id", String(36), nullable=False),
    Column("key_hash", String(64), nullable=False),
    Column("parameters", Text, nullable=False),
    Column("parameters_hash", String(64), nullable=False),
    Column("version", BigInteger),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
    UniqueConstraint("caller", "table_id", "key_hash"),
)


#: Iceberg REST 1.11's idempotency keys of the own warehouses' mutations (revision 0015): one row
#: per (caller, key), so that every replica replays one answer. See the revision's docstring.
idempotency_keys_table = Table(
    "idempotency_keys",
    metadata,
    Column("caller", String(64), primary_key=True),
    Column("key", String(36), primary_key=True),
    Column("binding", String(64), nullable=False),
    Column("claim", String(36), nullable=False),
    Column("status", String(16), nullable=False),
    Column("answer_status", Integer),
    Column("answer", Text),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
)
