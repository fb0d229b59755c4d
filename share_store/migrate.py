"""Bring a store's schema to the newest revision, safely from several replicas at once.

Every process that opens a store calls `upgrade`: the first one to start after
a release migrates, the others find nothing to do. On PostgreSQL a
transaction-scoped advisory lock makes replicas that start together take turns;
SQLite serializes writers by itself.
"""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

# Any constant shared by every replica; "shar" in ASCII.
ADVISORY_LOCK_KEY = 0x73686172
# Stores created before migrations existed hold exactly this revision's tables.
BASELINE = "0001"


def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("share_store") / "migrations"))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    script = ScriptDirectory(str(files("share_store") / "migrations"))
    head = script.get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine) -> None:
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
        config = _config(connection)
        if MigrationContext.configure(connection).get_current_revision() is None and inspect(
            connection
        ).has_table("shares"):
            command.stamp(config, BASELINE)
        command.upgrade(config, "head")
