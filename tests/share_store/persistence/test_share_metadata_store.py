"""Share metadata in the store (issue 51, the 2026-02 protocol): revision 0014 on a store of 0013,
round trips through every read a share comes back by, and every limit refused with nothing kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text

from share_store.errors import AdminConflict, AdminError, NotFound
from share_store.migrate import _config, current_revision, head_revision
from share_store.model import Share, parse_create_args
from share_store.persistence import ShareStore, sqlite_url
from share_store.persistence.share_metadata import MetadataChange

SPECS = ["q1", "orders:delta:bucket:orders"]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareStore]:
    """A store on SQLite, and on PostgreSQL (which refuses NUL characters outright, and counts a
    VARCHAR(255) in characters): what is kept and what is refused must be the same on both."""
    url = (
        sqlite_url(tmp_path / "store.db")
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    store = ShareStore(url)
    yield store
    store.close()


def test_revision_0014_adds_the_columns_to_a_store_of_0013_and_keeps_its_rows(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "old.db")
    engine = create_engine(url)
    with engine.begin() as connection:
        command.upgrade(_config(connection), "0013")
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
    engine.dispose()
    store = ShareStore(url)  # upgrades to the head
    try:
        assert current_revision(store.engine) == head_revision()
        columns = {c["name"] for c in inspect(store.engine).get_columns("shares")}
        assert {"display_name", "comment", "properties"} <= columns
        old = store.get_share("old")
        assert (old.id, old.name, old.display_name, old.comment, old.properties) == (
            "s1",
            "Old",
            None,
            None,
            {},
        )
        assert [t.name for t in store.list_tables("old")] == ["t"]
        store.update_share("old", metadata=MetadataChange(display_name="Old share", properties={"k": "v"}))
        assert store.get_share("old").display_name == "Old share"
        assert store.get_share("old").properties == {"k": "v"}
    finally:
        store.close()


def _metadata(share: Share) -> tuple[str | None, str | None, dict[str, str]]:
    return share.display_name, share.comment, dict(share.properties)


def test_metadata_is_kept_and_read_back_by_every_read_of_a_share(store: ShareStore) -> None:
    given = MetadataChange(
        display_name="Sales – EU 🇪🇺", comment="line one\nline\ttwo", properties={"team": "sales", "é": "ü"}
    )
    created = store.create_share("sales", parse_create_args(SPECS), metadata=given)
    expected = ("Sales – EU 🇪🇺", "line one\nline\ttwo", {"team": "sales", "é": "ü"})
    assert _metadata(created) == expected
    assert _metadata(store.get_share("SALES")) == expected
    found = store.get_share_by_id(created.id)
    assert found is not None and _metadata(found) == expected
    assert [_metadata(s) for s in store.list_shares()] == [expected]
    assert [_metadata(c.share) for c in store.share_counts()] == [expected]
    # A named recipient's /shares (granted_shares) and a token's share (the one SELECT).
    store.create_recipient("acme")
    store.grant_share("acme", "sales")
    assert [_metadata(s) for s in store.granted_shares(store.get_recipient("acme").id)] == [expected]
    _, secret = store.create_token("sales", None)
    _, authorized = store.authorized_share(secret, "sales")
    assert _metadata(authorized) == expected
    # A share with none has none: None, None and {}.
    assert _metadata(store.create_share("plain")) == (None, None, {})


def test_an_update_sets_clears_and_unsets_all_at_once(store: ShareStore) -> None:
    store.create_share(
        "s", metadata=MetadataChange(display_name="S", comment="c", properties={"a": "1", "b": "2"})
    )
    store.update_share(
        "s", metadata=MetadataChange(comment="new", properties={"c": "3", "a": "9"}, unset=("b",))
    )
    assert _metadata(store.get_share("s")) == ("S", "new", {"a": "9", "c": "3"})
    # "" clears a display name or comment; None leaves it as it is.
    store.update_share("s", metadata=MetadataChange(display_name="", unset=("a", "c")))
    assert _metadata(store.get_share("s")) == (None, "new", {})
    store.update_share("s", metadata=MetadataChange(comment=""))
    with store.engine.connect() as connection:
        row = connection.exec_driver_sql("SELECT display_name, comment, properties FROM shares").one()
    assert tuple(row) == (None, None, None)  # nothing set is NULL, not "" or "{}"
    # Tables and metadata in one change.
    store.update_share("s", add=parse_create_args(SPECS), metadata=MetadataChange(display_name="With tables"))
    assert store.get_share("s").display_name == "With tables" and len(store.list_tables("s")) == 1


def test_a_share_is_still_hashable_and_equal_by_value(store: ShareStore) -> None:
    made = store.create_share("s", metadata=MetadataChange(properties={"a": "1"}))
    assert made == store.get_share("s") and len({made, store.get_share("s")}) == 1


LONG_KEY = "k" * 256
#: (what is asked, what the one error says): each refused on create and on update, nothing kept.
REFUSED: list[tuple[MetadataChange, str]] = [
    (MetadataChange(display_name="d" * 256), "display name is 256 characters; at most 255"),
    (MetadataChange(display_name="a\nb"), "display name holds a control character"),
    (MetadataChange(display_name="a\x00b"), "display name holds a control character"),
    (MetadataChange(display_name="evil\u202egnp.exe"), "display name holds a control character"),
    (MetadataChange(display_name="\ud800"), "display name holds a control character"),
    (MetadataChange(comment="c" * 65_537), "comment is 65537 characters; at most 65536"),
    (MetadataChange(comment="nul\x00here"), "comment holds a control character"),
    (MetadataChange(comment="\x1b[2Jgone"), "comment holds a control character"),
    (
        MetadataChange(properties={f"k{i}": "v" for i in range(51)}),
        "at most 50 properties (this would make 5",
    ),
    (MetadataChange(properties={LONG_KEY: "v"}), "is 256 characters; at most 255"),
    (MetadataChange(properties={"": "v"}), "property key '' is empty"),
    (MetadataChange(properties={"a\tb": "v"}), "holds a control character"),
    (MetadataChange(properties={"a=b": "v"}), "holds '='"),
    (MetadataChange(properties={"k": "v" * 65_537}), "its value is 65537 characters; at most 65536"),
    (MetadataChange(properties={"k": "a\x07b"}), "its value holds a control character"),
    (MetadataChange(properties={"k": 1}), "its value must be a string"),  # type: ignore[dict-item]
    (MetadataChange(properties={1: "v"}), "property key 1 must be a string"),  # type: ignore[dict-item]
    (
        MetadataChange(properties={f"k{i}": "v" * 60_000 for i in range(3)}),
        "together; at most 131072",
    ),
    (MetadataChange(display_name=5), "display name must be a string"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("change", "message"), REFUSED)
def test_every_limit_is_one_clear_error_and_nothing_is_kept(
    store: ShareStore, change: MetadataChange, message: str
) -> None:
    with pytest.raises(AdminError, match=message.replace("(", r"\(").replace(")", r"\)")):
        store.create_share("new", parse_create_args(SPECS), metadata=change)
    with pytest.raises(NotFound):
        store.get_share("new")
    kept = MetadataChange(display_name="Kept", comment="kept", properties={"a": "1"})
    store.create_share("s", metadata=kept)
    with pytest.raises(AdminError, match=message.replace("(", r"\(").replace(")", r"\)")):
        store.update_share("s", add=parse_create_args(SPECS), metadata=change)
    assert _metadata(store.get_share("s")) == ("Kept", "kept", {"a": "1"})
    assert store.list_tables("s") == []


def test_the_limits_themselves_are_kept(store: ShareStore) -> None:
    most = MetadataChange(
        display_name="d" * 255,
        comment="😀" * 65_536,
        properties={f"{i:0>255}": "v" * 2_000 for i in range(50)},
    )
    made = store.create_share("most", metadata=most)
    assert len(made.display_name or "") == 255 and made.comment == "😀" * 65_536
    assert len(store.get_share("most").properties) == 50


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (MetadataChange(unset=("missing",)), "share 's' has no property 'missing' to unset"),
        (MetadataChange(properties={"a": "2"}, unset=("a",)), "property 'a' is both set and unset"),
        (
            MetadataChange(properties={f"n{i}": "v" for i in range(50)}),
            "at most 50 properties (this would make 51)",
        ),
    ],
)
def test_an_update_that_cannot_be_applied_changes_nothing(
    store: ShareStore, change: MetadataChange, message: str
) -> None:
    store.create_share("s", metadata=MetadataChange(properties={"a": "1"}))
    with pytest.raises(AdminError, match=message.replace("(", r"\(").replace(")", r"\)")):
        store.update_share("s", metadata=change)
    assert store.get_share("s").properties == {"a": "1"}


def test_a_name_taken_is_still_a_conflict(store: ShareStore) -> None:
    store.create_share("s")
    with pytest.raises(AdminConflict):
        store.create_share("S", metadata=MetadataChange(display_name="x"))
    assert store.get_share("s").display_name is None
