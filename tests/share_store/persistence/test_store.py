"""The share store on SQLite and PostgreSQL: transactions, case-insensitive names, token hashing."""

from __future__ import annotations

import errno
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, make_url

from share_store.errors import AdminError, NotFound, StoreDiskFull, Unauthenticated
from share_store.model import TableSpec, Token, parse_create_args
from share_store.outages import disk_full, is_outage
from share_store.persistence import ShareStore, sqlite_url
from share_store.restrictions.restriction import Audience
from share_store.tables.summaries import SnapshotSummary


@dataclass
class Backend:
    url: str
    dump: Callable[[], str]  # the whole database as SQL text


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "store.db"

        def dump() -> str:
            with sqlite3.connect(path) as db:
                return "\n".join(db.iterdump())

        return Backend(sqlite_url(path), dump)
    # Only the postgres cases start the session's cluster (`-k sqlite` never does).
    postgres = request.getfixturevalue("postgres")
    url = request.getfixturevalue("postgres_url")
    return Backend(url, lambda: postgres.dump(make_url(url).database))


@pytest.fixture
def store(backend: Backend) -> ShareStore:
    store = ShareStore(backend.url)
    yield store
    store.close()


def snapshot(store: ShareStore) -> list:
    return [
        (s.name, [(t.schema, t.name, t.path) for t in store.list_tables(s.name)]) for s in store.list_shares()
    ]


def test_create_and_read(store: ShareStore) -> None:
    store.create_share("Sales", parse_create_args(["Q1", "Orders:delta:bucket:a/b"]))
    assert store.get_share("sales").name == "Sales"
    table = store.get_table("SALES", "q1", "ORDERS")
    assert (table.share, table.schema, table.name, table.bucket, table.path) == (
        "Sales",
        "Q1",
        "Orders",
        "bucket",
        "a/b",
    )
    assert store.list_schemas("sales") == ["Q1"]
    with pytest.raises(NotFound, match="schema 'q2' not found"):
        store.list_tables("sales", "q2")


def test_list_tables_by_name_or_share_alike(store: ShareStore) -> None:
    """`list_tables` reads a share named in one joined SELECT: the same tables, in order, with the
    share's stored name, as for the share read first; a share that is not there is a 404, an empty
    one no tables, and a neighbour's tables (a name differing in case only is the same share) never
    come with them."""
    store.create_share("Sales", parse_create_args(["Q2", "b:delta:bucket:b", "Q1", "a:delta:bucket:a"]))
    store.create_share("Sales2", parse_create_args(["Q1", "other:delta:bucket:o"]))
    store.create_share("Empty")
    named = store.list_tables("sALES")
    assert [(t.share, t.schema, t.name) for t in named] == [("Sales", "Q1", "a"), ("Sales", "Q2", "b")]
    assert named == store.list_tables(store.get_share("sales"))
    assert store.list_tables("sales", "q2") == store.list_tables(store.get_share("sales"), "Q2")
    assert [t.name for t in store.list_tables("sales", "q2")] == ["b"]
    audience = Audience("r", {"region": "eu"})
    assert [t.audience for t in store.list_tables("sales", audience=audience)] == [audience, audience]
    assert store.list_tables("empty") == []
    with pytest.raises(NotFound, match="share 'nope' not found"):
        store.list_tables("nope")
    with pytest.raises(NotFound, match="share 'nope' not found"):
        store.list_tables("nope", "q1")
    with pytest.raises(NotFound, match="schema 'q1' not found"):
        store.list_tables("empty", "q1")


def test_duplicate_share_and_table_leave_store_untouched(store: ShareStore) -> None:
    store.create_share("s", parse_create_args(["sc", "t:delta:bucket:p"]))
    before = snapshot(store)
    with pytest.raises(AdminError, match="already exists"):
        store.create_share("S")
    with pytest.raises(AdminError, match="already in this share"):
        store.update_share(
            "s", add=[TableSpec.parse("sc:new:delta:bucket:n"), TableSpec.parse("sc:T:delta:bucket:x")]
        )
    with pytest.raises(NotFound, match="is not in share"):
        store.update_share("s", add=[TableSpec.parse("sc:new:delta:bucket:n")], remove=[("sc", "missing")])
    with pytest.raises(AdminError, match="already in this share"):
        store.create_share("other", parse_create_args(["sc", "t:delta:bucket:p", "T:delta:bucket:p"]))
    assert snapshot(store) == before


def test_update_add_and_remove(store: ShareStore) -> None:
    store.create_share("s", parse_create_args(["sc", "a:delta:bucket:a", "b:delta:bucket:b"]))
    store.update_share("s", add=[TableSpec.parse("sc2:c:delta:bucket:c")], remove=[("SC", "A")])
    assert snapshot(store) == [("s", [("sc", "b", "b"), ("sc2", "c", "c")])]


def test_every_table_of_every_share_in_one_read(store: ShareStore) -> None:
    store.create_share("Zed", parse_create_args(["sc", "a:delta:bucket:za"]))
    store.create_share("ant", parse_create_args(["SC", "b:delta:bucket:ab", "a:delta:bucket:aa"]))
    everything = store.all_tables()
    assert [(t.share, t.schema, t.name, t.path) for t in everything] == [
        ("ant", "SC", "a", "aa"),
        ("ant", "SC", "b", "ab"),
        ("Zed", "sc", "a", "za"),
    ]
    assert everything == [table for share in store.list_shares() for table in store.list_tables(share)]


def test_tokens_are_hashed_expire_and_revoke(store: ShareStore, backend: Backend) -> None:
    store.create_share("s")
    token, secret = store.create_token("s", timedelta(days=1), "for bob")
    assert store.authenticate(secret).id == token.id
    dump = backend.dump()
    assert secret not in dump and secret[4:] not in dump
    with pytest.raises(Unauthenticated):
        store.authenticate(secret + "x")
    store.revoke_token("s", token.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        store.authenticate(secret)
    with pytest.raises(NotFound, match="no active token"):
        store.revoke_token("s", token.id)
    _, short = store.create_token("s", timedelta(microseconds=1), "")
    with pytest.raises(Unauthenticated, match="expired"):
        store.authenticate(short)


def test_one_lookup_gives_a_token_with_its_share_or_table(store: ShareStore) -> None:
    store.create_share("Sales", parse_create_args(["Q1", "Orders:delta:bucket:a/b"]))
    store.create_share("other", parse_create_args(["q1", "orders:delta:bucket:c"]))
    token, secret = store.create_token("sales", None, "")
    seen: list[Token] = []
    found, share = store.authorized_share(secret, "SALES", on_token=seen.append)
    assert (found.id, share) == (token.id, store.get_share("sales")) and seen == [found]
    found, table = store.authorized_table(secret, "sales", "q1", "ORDERS")
    # Read for the share's own token: an audience with no recipient (a restriction's filter needs it).
    assert (found.id, table) == (token.id, store.get_table("sales", "Q1", "orders", audience=Audience()))
    # Another's share and no share at all read the same; the caller still learns who asked.
    for name in ("other", "nope"):
        seen.clear()
        with pytest.raises(NotFound, match=f"^share '{name}' not found$"):
            store.authorized_table(secret, name, "q1", "orders", on_token=seen.append)
        assert [t.id for t in seen] == [token.id]
        with pytest.raises(NotFound, match=f"^share '{name}' not found$"):
            store.authorized_share(secret, name)
    with pytest.raises(NotFound, match="'sales/q1/nope' does not exist"):
        store.authorized_table(secret, "sales", "q1", "nope")
    with pytest.raises(NotFound, match="'sales/q2/orders' does not exist"):
        store.authorized_table(secret, "sales", "q2", "orders")
    with pytest.raises(Unauthenticated, match="missing, invalid or unknown"):
        store.authorized_table(secret + "x", "sales", "q1", "orders", on_token=seen.append)
    store.revoke_token("sales", token.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        store.authorized_share(secret, "sales", on_token=seen.append)
    _, short = store.create_token("sales", timedelta(microseconds=1), "")
    with pytest.raises(Unauthenticated, match="expired"):
        store.authorized_table(short, "sales", "q1", "orders", on_token=seen.append)
    assert [t.id for t in seen] == [token.id]  # refused tokens are not reported


def test_remove_share_revokes_tokens_and_recreation_does_not_revive_them(store: ShareStore) -> None:
    store.create_share("s", parse_create_args(["sc", "a:delta:bucket:a"]))
    _, secret = store.create_token("s", None, "")
    store.remove_share("s")
    with pytest.raises(Unauthenticated):
        store.authenticate(secret)
    store.create_share("s")
    with pytest.raises(Unauthenticated):
        store.authenticate(secret)
    assert store.list_tables("s") == []


def test_unknown_share_for_admin_commands(store: ShareStore) -> None:
    for call in (
        lambda: store.update_share("x", add=[]),
        lambda: store.remove_share("x"),
        lambda: store.create_token("x", None),
        lambda: store.list_tokens("x"),
    ):
        with pytest.raises(NotFound, match="does not exist"):
            call()


def test_rotation_keeps_the_old_token_for_its_grace_period(store: ShareStore) -> None:
    store.create_share("s")
    old, old_secret = store.create_token("s", timedelta(days=30), "team")
    new, new_secret = store.rotate_token("s", old.id, timedelta(seconds=1))
    assert new.description == "team" and new.expires_at - new.created_at == timedelta(days=30)
    assert store.authenticate(old_secret).id == old.id
    assert store.authenticate(new_secret).id == new.id
    with pytest.raises(AdminError, match="already rotated"):
        store.rotate_token("s", old.id, timedelta(hours=1))
    time.sleep(1.1)
    with pytest.raises(Unauthenticated, match="expired"):
        store.authenticate(old_secret)
    assert store.authenticate(new_secret).id == new.id
    # A grace period never outlives the old token itself.
    short, _ = store.create_token("s", timedelta(minutes=5))
    store.rotate_token("s", short.id, timedelta(days=7))
    graced = next(t for t in store.list_tokens("s") if t.id == short.id)
    assert graced.expires_at == short.expires_at


def test_oauth_clients_issue_short_lived_tokens_of_their_share(store: ShareStore) -> None:
    store.create_share("s")
    client, secret = store.create_oauth_client("s", None, "partner")
    token, access = store.issue_access_token(client.id, secret, timedelta(hours=1))
    assert store.authenticate(access).share == "s"
    assert token.oauth_client_id == client.id
    assert store.list_tokens("s") == []  # access tokens are not the admin's tokens
    with pytest.raises(Unauthenticated, match="invalid client credentials"):
        store.issue_access_token(client.id, secret + "x", timedelta(hours=1))
    with pytest.raises(Unauthenticated, match="invalid client credentials"):
        store.issue_access_token("unknown", secret, timedelta(hours=1))
    # Spent access tokens are dropped when the client asks for a new one.
    store.issue_access_token(client.id, secret, timedelta(seconds=-1))
    store.issue_access_token(client.id, secret, timedelta(hours=1))
    store.revoke_oauth_client("s", client.id)
    with pytest.raises(Unauthenticated, match="revoked"):
        store.authenticate(access)
    with pytest.raises(Unauthenticated, match="revoked or has expired"):
        store.issue_access_token(client.id, secret, timedelta(hours=1))
    other, other_secret = store.create_oauth_client("s", timedelta(days=1))
    store.remove_share("s")
    with pytest.raises(Unauthenticated):
        store.issue_access_token(other.id, other_secret, timedelta(hours=1))


def test_a_full_sqlite_store_says_its_disk_is_full(tmp_path: Path) -> None:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    store.create_share("first")

    @event.listens_for(store.engine, "connect")
    def no_more_pages(dbapi_connection, _record) -> None:
        # SQLite's own "database or disk is full" (SQLITE_FULL), as on a full disk.
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    store.engine.dispose()  # connections made from now on have no room left
    try:
        with pytest.raises(StoreDiskFull, match="no space left"):
            for i in range(200):  # until a new page is needed
                store.create_share(f"share-{i}", parse_create_args([f"s{i}", f"t:delta:bucket:{'p' * 200}"]))
        assert "first" in [share.name for share in store.list_shares()]  # reads still work
    finally:
        store.close()


@pytest.mark.parametrize(
    ("error", "full"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
        (OSError(errno.EFBIG, "File too large"), True),
        (OSError(errno.ECONNREFUSED, "Connection refused"), False),
        (RuntimeError("unrelated"), False),
    ],
)
def test_disk_full_is_no_outage(error: BaseException, full: bool) -> None:
    chained = RuntimeError("wrapping")
    chained.__cause__ = error
    assert disk_full(error) is full and disk_full(chained) is full
    if full:
        assert not is_outage(error)  # nothing is unreachable: someone must free space


def test_a_snapshot_summary_is_kept_replaced_and_forgotten_with_its_table(store: ShareStore) -> None:
    store.create_share("s", parse_create_args(["default", "t:delta:bkt:p/t", "u:delta:bkt:p/u"]))
    table, other = store.get_table("s", "default", "t"), store.get_table("s", "default", "u")
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]}
    metadata = {"id": "m", "schemaString": '{"type":"struct","fields":[]}', "configuration": {"k": "ü"}}
    first = SnapshotSummary("bkt", "p/t", 4, 1_700_000_000_123, 1234, 5, True, protocol, metadata)
    store.save_snapshot_summary(table.id, first)
    assert store.snapshot_summary(table.id) == first
    newer = SnapshotSummary("bkt", "p/t", 2**40, None, 2**50, 100_000, False, protocol, metadata)
    store.save_snapshot_summary(table.id, newer)  # one row a table: the newest replaces the older
    assert store.snapshot_summary(table.id) == newer
    store.save_snapshot_summary(other.id, first)
    store.update_share("s", add=[], remove=[("default", "t")])
    assert store.snapshot_summary(table.id) is None
    store.remove_share("s")
    assert store.snapshot_summary(other.id) is None
