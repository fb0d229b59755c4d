"""Store migrations on SQLite and PostgreSQL: fresh stores, stores from before migrations, models in sync."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from share_store.migrate import BASELINE, _config, current_revision, head_revision, upgrade
from share_store.model import parse_create_args
from share_store.persistence import ShareStore, metadata, sqlite_url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "store.db")
    return request.getfixturevalue("postgres_url")


def test_fresh_store_is_at_head_and_matches_the_model(store_url: str) -> None:
    store = ShareStore(store_url)
    try:
        assert current_revision(store.engine) == head_revision()
        with store.engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    finally:
        store.close()


def test_a_store_from_before_migrations_is_upgraded_in_place(store_url: str) -> None:
    engine = create_engine(store_url)
    # What the first release created: the baseline tables and no version table.
    with engine.begin() as connection:
        command.upgrade(_config(connection), BASELINE)
        connection.execute(text("DROP TABLE alembic_version"))
        connection.execute(
            text(
                "INSERT INTO shares (id, name, name_key, created_at) "
                "VALUES ('s1', 'Legacy', 'legacy', CURRENT_TIMESTAMP)"
            )
        )
    assert "oauth_clients" not in inspect(engine).get_table_names()
    engine.dispose()

    store = ShareStore(store_url)
    try:
        assert current_revision(store.engine) == head_revision()
        assert [share.name for share in store.list_shares()] == ["Legacy"]
        store.update_share("legacy", parse_create_args(["s", "t:delta:bucket:path"]))
        store.create_oauth_client("legacy", None)
        assert store.list_oauth_clients("legacy")
    finally:
        store.close()


def test_upgrading_twice_is_a_no_op(store_url: str) -> None:
    engine = create_engine(store_url)
    upgrade(engine)
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_activity_kept_before_the_day_sums_is_summed_by_the_migration(store_url: str) -> None:
    from datetime import UTC, datetime, timedelta

    from share_store.persistence.activity import ActivityEvent
    from share_store.persistence.sql_schema import activity_table

    engine = create_engine(store_url)
    now = datetime.now(UTC).replace(microsecond=0)
    events = [
        ActivityEvent(time=now - timedelta(days=days, minutes=1), route="q", status=status, token_id="t",
                      share_name="s", schema_name="d", table_name="x", version=version, files=2, bytes=10)
        for days, status, version in ((3, 200, 1), (3, 404, 2), (2, 200, None))
    ]  # fmt: skip
    with engine.begin() as connection:
        command.upgrade(_config(connection), "0006")
        connection.execute(activity_table.insert(), [event.__dict__ for event in events])
    engine.dispose()
    store = ShareStore(store_url)  # upgrades to the head: 0007 sums what is kept
    try:
        with store.engine.connect() as connection:
            days = connection.execute(text("SELECT requests, errors, files FROM activity_days")).all()
        assert sorted(tuple(row) for row in days) == [(1, 0, 2), (1, 0, 2), (1, 1, 2)]
        shares = store.activity_summaries(now - timedelta(days=5), now)["share"]
        assert [(row.key, row.requests, row.versions, row.errors) for row in shares] == [(("s",), 3, 2, 1)]
    finally:
        store.close()
