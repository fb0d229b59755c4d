"""Directory access (Delta Sharing 2026-02): which tables a recipient may read as a folder with
keys of their own, why the others are `url` only, and which locations keys may be asked for."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from share_store.errors import Forbidden, InvalidParameter, UnsupportedOperation
from share_store.model import SharedTable
from share_store.readers.directory_access import table_access
from share_store.restrictions.restriction import TableRestriction
from share_store.signing.vended_scope import session_policy

TABLE = SharedTable("id-t", "s", "sc", "t", "delta", "bucket", "tables/path", True, datetime.now(UTC))


def test_a_whole_delta_table_with_history_on_s3_with_sts_is_read_by_url_or_by_folder() -> None:
    access = table_access(TABLE, s3=True, vends=True)
    assert access.modes == ("url", "dir")
    assert access.location == "s3://bucket/tables/path"
    assert access.refusal() is None
    assert access.item_fields() == {
        "format": "delta",
        "accessModes": ["url", "dir"],
        "location": "s3://bucket/tables/path",
        "auxiliaryLocations": [],
    }


@pytest.mark.parametrize(
    ("table", "s3", "vends", "reason", "kind"),
    [
        (replace(TABLE, history_shared=False), True, True, "its history is not shared", Forbidden),
        (
            replace(TABLE, restriction=TableRestriction(where="region = 'eu'")),
            True,
            True,
            "it is restricted to part of its rows or columns",
            Forbidden,
        ),
        (
            replace(TABLE, restriction=TableRestriction(columns=("id",))),
            True,
            True,
            "it is restricted to part of its rows or columns",
            Forbidden,
        ),
        (TABLE, True, False, "its storage has no temporary credentials (STS)", UnsupportedOperation),
        (TABLE, False, True, "its storage has no temporary credentials (STS)", UnsupportedOperation),
        (
            replace(TABLE, format="uniform", bucket="wh", path="db/t"),
            True,
            True,
            "it is an Iceberg table",
            UnsupportedOperation,
        ),
        (replace(TABLE, path="tables/pa*th"), True, True, "wildcards", UnsupportedOperation),
    ],
)
def test_a_table_is_url_only_with_the_reason_its_credentials_are_refused(
    table: SharedTable, s3: bool, vends: bool, reason: str, kind: type[Exception]
) -> None:
    access = table_access(table, s3=s3, vends=vends)
    assert access.modes == ("url",)
    fields = access.item_fields()
    # Where a url-only table's files are is not told: a restricted one's folder holds what it cuts.
    assert fields["accessModes"] == ["url"] and "location" not in fields
    refusal = access.refusal()
    assert isinstance(refusal, kind)
    assert refusal.message.startswith("table s.sc.t is shared for URL access only: ")
    assert reason in refusal.message


def test_every_reason_is_told_and_a_policy_reason_is_a_403() -> None:
    table = replace(TABLE, history_shared=False, restriction=TableRestriction(where="x = 1"))
    refusal = table_access(table, s3=False, vends=False).refusal()
    assert isinstance(refusal, Forbidden)
    for reason in ("history", "restricted", "STS"):
        assert reason in refusal.message


def test_an_iceberg_tables_format_is_iceberg() -> None:
    iceberg = replace(TABLE, format="uniform")
    assert table_access(iceberg, s3=True, vends=True).item_fields()["format"] == "iceberg"


def test_keys_are_scoped_to_the_tables_folder_by_default() -> None:
    location, scope = table_access(TABLE, s3=True, vends=True).scope(None)
    assert location == "s3://bucket/tables/path"
    assert scope.prefixes == (("bucket", "tables/path/"),) and not scope.objects and not scope.write
    policy = session_policy(scope)
    actions = sorted(a for statement in policy["Statement"] for a in statement["Action"])
    assert actions == ["s3:GetObject", "s3:ListBucket"]
    assert scope.allows("bucket", "tables/path/_delta_log/00000000000000000000.json")
    assert not scope.allows("bucket", "tables/path2/_delta_log/00000000000000000000.json")
    assert not scope.allows("other", "tables/path/x.parquet")


@pytest.mark.parametrize("asked", ["s3://bucket/tables/path", "s3://bucket/tables/path/_delta_log"])
def test_the_root_or_a_folder_under_it_may_be_asked_for(asked: str) -> None:
    location, scope = table_access(TABLE, s3=True, vends=True).scope(asked)
    assert location == asked
    assert scope.prefixes == (("bucket", asked.removeprefix("s3://bucket/") + "/"),)


@pytest.mark.parametrize(
    "asked",
    [
        "s3://bucket/tables/path2",  # a sibling whose name starts with the table's
        "s3://bucket/tables/path2/_delta_log",
        "s3://bucket/tables",  # the parent
        "s3://bucket/tables/",
        "s3://bucket",
        "s3://bucket/",
        "s3://other/tables/path",  # another bucket
        "s3://bucket.evil/tables/path",
        "s3://bucket/tables/path/",  # a trailing slash
        "s3://bucket/tables/path//",
        "s3://bucket/tables/path//x",
        "s3://bucket/tables/path/../path2",
        "s3://bucket/tables/path/..",
        "s3://bucket/tables/path/./x",
        "s3://bucket/tables/path/%2e%2e/path2",  # URL-encoded tricks
        "s3://bucket/tables/path%2F..%2Fpath2",
        "s3://bucket/tables/path/x%00",
        "s3://bucket/tables/path/*",  # a wildcard in the session policy
        "s3://bucket/tables/path/?",
        "s3://bucket/tables/path/${aws:username}",
        "s3://bucket/tables/path/x\\..\\y",
        "s3://bucket/tables/path/x\n",
        "s3a://bucket/tables/path",  # other schemes
        "s3n://bucket/tables/path",
        "S3://bucket/tables/path",
        "gs://bucket/tables/path",
        "https://bucket.s3.amazonaws.com/tables/path",
        "bucket/tables/path",
        "/tables/path",
        "",
        "s3://bucket/tables/path/" + "x" * 2000,
    ],
)
def test_a_location_outside_the_tables_folder_is_refused(asked: str) -> None:
    with pytest.raises(InvalidParameter) as refused:
        table_access(TABLE, s3=True, vends=True).scope(asked)
    assert "location" in refused.value.message and "s3://bucket/tables/path" in refused.value.message


def test_a_url_only_table_has_no_scope() -> None:
    with pytest.raises(Forbidden):
        table_access(replace(TABLE, history_shared=False), s3=True, vends=True).scope(None)
