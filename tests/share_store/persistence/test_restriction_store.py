"""Restrictions and recipient properties in the store (issue 50): revision 0013, round trips, and
the one SELECT that authorizes a table and tells who it is read for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, event, inspect, text

from share_store.errors import AdminError, NotFound
from share_store.migrate import _config, current_revision, head_revision
from share_store.model import parse_create_args
from share_store.persistence import ShareStore, sqlite_url
from share_store.restrictions.restriction import Audience, TableRestriction


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShareStore]:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    store.create_share("sales", parse_create_args(["q1", "orders:delta:bucket:orders"]))
    yield store
    store.close()


def test_revision_0013_adds_the_columns_to_a_store_of_0012_and_keeps_its_rows(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "old.db")
    engine = create_engine(url)
    with engine.begin() as connection:
        command.upgrade(_config(connection), "0012")
    engine.dispose()
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO shares (id, name, name_key, created_at)"
                " VALUES ('s1', 'Old', 'old', CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO shared_tables (id, share_id, schema_name, schema_key, name, name_key,"
                " format, bucket, path, history_shared, created_at)"
                " VALUES ('t1', 's1', 'd', 'd', 't', 't', 'delta', 'bkt', 'p', 1, CURRENT_TIMESTAMP)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO recipients (id, name, name_key, created_at)"
                " VALUES ('r1', 'acme', 'acme', CURRENT_TIMESTAMP)"
            )
        )
    engine.dispose()
    store = ShareStore(url)  # upgrades to the head
    try:
        assert current_revision(store.engine) == head_revision()
        columns = {table: {c["name"] for c in inspect(store.engine).get_columns(table)}
                   for table in ("shared_tables", "recipients", "admin_events")}  # fmt: skip
        assert "restriction" in columns["shared_tables"]
        assert "properties" in columns["recipients"]
        assert "detail" in columns["admin_events"]
        assert store.get_table("old", "d", "t").restriction is None
        assert store.get_recipient("acme").properties == {}
        restricted = store.set_restriction("old", "d", "t", TableRestriction("x = 1"))
        assert restricted.restriction == TableRestriction("x = 1")
    finally:
        store.close()


def test_a_restriction_is_kept_read_back_everywhere_and_cleared(store: ShareStore) -> None:
    restriction = TableRestriction("region = CURRENT_RECIPIENT('region')", ("id", "region"))
    store.set_restriction("SALES", "Q1", "Orders", restriction)
    assert store.get_table("sales", "q1", "orders").restriction == restriction
    assert [t.restriction for t in store.list_tables("sales")] == [restriction]
    assert [t.restriction for t in store.all_tables()] == [restriction]
    assert [t.restriction for t in store.tables_page("sales", None, None, 10)] == [restriction]
    # The admin's reads carry no audience: only a token's lookup sets one.
    assert store.get_table("sales", "q1", "orders").audience is None
    store.set_restriction("sales", "q1", "orders", None)
    assert store.get_table("sales", "q1", "orders").restriction is None


def test_a_restriction_of_a_table_not_shared_is_not_found_and_stores_nothing(store: ShareStore) -> None:
    with pytest.raises(NotFound):
        store.set_restriction("sales", "q1", "nope", TableRestriction("x = 1"))
    with pytest.raises(NotFound):
        store.set_restriction("nope", "q1", "orders", TableRestriction("x = 1"))
    assert store.get_table("sales", "q1", "orders").restriction is None


def test_properties_are_created_updated_unset_and_listed(store: ShareStore) -> None:
    created = store.create_recipient("acme", {"nation": "JAPAN", "tier": "gold"})
    assert created.properties == {"nation": "JAPAN", "tier": "gold"}
    assert store.get_recipient("ACME").properties == {"nation": "JAPAN", "tier": "gold"}
    updated = store.update_recipient_properties("acme", {"nation": "PERU", "k.v-1_": "x"}, ["tier"])
    assert updated.properties == {"nation": "PERU", "k.v-1_": "x"}
    assert [r.properties for r in store.list_recipients()] == [{"k.v-1_": "x", "nation": "PERU"}]


@pytest.mark.parametrize(
    ("given", "unset", "message"),
    [
        ({"bad key": "v"}, [], "invalid property key"),
        ({"": "v"}, [], "invalid property key"),
        ({"k" * 129: "v"}, [], "invalid property key"),
        ({"ключ": "v"}, [], "invalid property key"),
        ({"k": "v" * 1025}, [], "at most 1024"),
        ({"k": "a\nb"}, [], "control character"),
        ({f"k{i}": "v" for i in range(51)}, [], "at most 50"),
        ({}, ["missing"], "no property 'missing'"),
        ({"nation": "x"}, ["nation"], "both set and unset"),
    ],
)
def test_bad_properties_are_one_clear_error_and_nothing_changes(
    store: ShareStore, given: dict[str, str], unset: list[str], message: str
) -> None:
    store.create_recipient("acme", {"nation": "JAPAN"})
    with pytest.raises(AdminError, match=message):
        store.update_recipient_properties("acme", given, unset)
    assert store.get_recipient("acme").properties == {"nation": "JAPAN"}
    if not unset:
        with pytest.raises(AdminError, match=message):
            store.create_recipient("other", given)
        with pytest.raises(NotFound):
            store.get_recipient("other")


def test_a_token_authorizes_a_table_with_its_audience_in_one_select(store: ShareStore) -> None:
    store.set_restriction("sales", "q1", "orders", TableRestriction("nation = CURRENT_RECIPIENT('nation')"))
    store.create_recipient("acme", {"nation": "JAPAN"})
    store.grant_share("acme", "sales")
    _, named = store.create_recipient_token("acme", None)
    _, own = store.create_token("sales", None)
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        _, table = store.authorized_table(named, "sales", "q1", "orders")
        assert len(statements) == 1
        assert table.audience == Audience("acme", {"nation": "JAPAN"})
        assert table.restriction == TableRestriction("nation = CURRENT_RECIPIENT('nation')")
        statements.clear()
        _, table = store.authorized_table(own, "sales", "q1", "orders")
        assert len(statements) == 1
        assert table.audience == Audience(None, {})
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
    # A property changed is read by the next lookup.
    store.update_recipient_properties("acme", {"nation": "PERU"}, [])
    assert store.authorized_table(named, "sales", "q1", "orders")[1].audience == Audience(
        "acme", {"nation": "PERU"}
    )


def test_a_share_tokens_tables_at_iceberg_are_read_for_no_recipient(store: ShareStore) -> None:
    assert store.get_table("sales", "q1", "orders", audience=Audience()).audience == Audience(None, {})
    assert [t.audience for t in store.list_tables("sales", audience=Audience())] == [Audience(None, {})]
