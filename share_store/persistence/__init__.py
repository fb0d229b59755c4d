"""Share store persistence on SQLAlchemy: SQLite by default, any SQLAlchemy URL.

Every admin change runs in one transaction, so an interrupted or rejected
command leaves the store exactly as it was.

    store.py              ShareStore: one engine, one connection or transaction per call
    engine.py             the engine: pre-ping, SQLite pragmas
    schema.py             the tables (Alembic's revisions in share_store/migrations make them)
    rows.py               rows → model objects, UTC times
    shares.py             shares and their tables
    credentials.py        bearer tokens and OAuth clients
    access.py             a token with the share or table it asks for, in one SELECT
    snapshot_versions.py  the Delta versions of Iceberg snapshots
    snapshot_summaries.py a Delta table's latest version as its head lines say (restarts)
    activity.py           recent audit events, bounded, for the console
    console_sessions.py   console sessions signed out before they expired
"""

from __future__ import annotations

from share_store.persistence.engine import sqlite_url
from share_store.persistence.sql_schema import metadata
from share_store.persistence.store import ShareStore

__all__ = ["ShareStore", "metadata", "sqlite_url"]
