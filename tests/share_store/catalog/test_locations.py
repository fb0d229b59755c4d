"""Where a table lives: the location rules and the one check every file goes through, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from share_store.catalog.locations import (
    LocationRefused,
    assigned_location,
    check_files,
    check_no_overlap,
    check_write_paths,
    engine_default,
    requested_location,
)
from share_store.catalog.names import check_name, check_namespace
from share_store.errors import InvalidParameter
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.storage.table_location import OutsideTable, TableLocation


@pytest.fixture
def s3() -> S3Storage:
    return S3Storage(S3Settings(endpoint="http://127.0.0.1:1", access_key="k", secret_key="s", region="x"))


@pytest.fixture
def local(tmp_path: Path) -> LocalStorage:
    (tmp_path / "root" / "wh").mkdir(parents=True)
    return LocalStorage(tmp_path / "root", UrlSigner(b"k" * 32, "http://localhost"))


def test_a_requested_location_is_taken_only_inside_its_warehouse_and_normalised(s3: S3Storage) -> None:
    taken = requested_location(s3, "wh", "s3://wh/sales/orders/")
    assert taken == TableLocation("s3://wh/sales/orders", "wh", "sales/orders")
    assert requested_location(s3, "wh", "s3a://wh/sales/orders") == taken  # one location, one record
    assert requested_location(s3, "wh", "s3://wh/sales/orders", ("sales",)) == taken
    with pytest.raises(LocationRefused, match="not inside its namespace's folder"):
        requested_location(s3, "wh", "s3://wh/crm/orders", ("sales",))  # another namespace's folder
    refused = [
        "s3://other/sales/orders",  # another warehouse or a bucket that is no warehouse
        "s3://wh",  # the warehouse's root
        "s3://wh/",
        "s3://wh/sales/orders#",  # a fragment cut the metadata file's path to another table's
        "s3://wh/sales/orders?x=1",
        "s3://wh/sales/%2E%2E/victim",
        "s3://wh/sales/../victim",
        "s3://wh/sales//orders",
        "s3://wh/.delta-sharing-cache/x",  # the server's own folders start with '.'
        "s3://wh/sales/ord ers",
        "s3://wh/sales/orders\u202e",
        "s3://wh/sales\uff0forders",
        "file:///wh/sales/orders",
        "",
    ]
    for location in refused:
        with pytest.raises(LocationRefused):
            requested_location(s3, "wh", location)


def test_local_locations_are_paths_under_the_root_through_no_symbolic_link(local: LocalStorage) -> None:
    root = local.root
    assert requested_location(local, "wh", (root / "wh" / "t").as_uri()).prefix == "t"
    (root / "elsewhere").mkdir()
    (root / "wh" / "link").symlink_to(root / "elsewhere")
    for location in ((root / "wh" / "link" / "t").as_uri(), (root / "other" / "t").as_uri(), "wh/t",
                     f"file://{root}/wh/../wh/t"):  # fmt: skip
        with pytest.raises(LocationRefused):
            requested_location(local, "wh", location)


def test_new_locations_are_folders_of_their_own(s3: S3Storage) -> None:
    one = assigned_location(s3, "wh", ("a", "b"), "t")
    two = assigned_location(s3, "wh", ("a", "b"), "t")
    assert one.uri.startswith("s3://wh/a/b/t-") and one != two and not one.overlaps(two)


def test_only_a_plain_relative_location_is_an_engines_default_for_the_catalog_to_replace() -> None:
    # Sail's CREATE TABLE with no LOCATION: relative to its own working folder, naming no storage.
    assert engine_default("spark-warehouse/t-1c2498ee-2886-4328-b73d-290c064b3cd2")
    assert engine_default("t")
    named_or_hostile = [
        "s3://other-bucket/x",
        "s3://wh/sales/orders",
        "file:///etc",
        "/etc/passwd",
        "../x",
        "spark-warehouse/../x",
        "./x",
        "a//b",
        "a/.hidden",
        "a/b?x=1",
        "a b",
        "",
        None,
        ["a"],
    ]
    for text in named_or_hostile:
        assert not engine_default(text), text


def test_locations_overlap_when_one_holds_the_other_not_when_they_share_a_prefix() -> None:
    table = TableLocation("s3://wh/ns/t", "wh", "ns/t")
    assert table.overlaps(TableLocation("s3://wh/ns", "wh", "ns"))
    assert table.overlaps(TableLocation("s3://wh/ns/t/data", "wh", "ns/t/data"))
    assert not table.overlaps(TableLocation("s3://wh/ns/t2", "wh", "ns/t2"))  # a longer name is another
    assert not table.overlaps(TableLocation("s3://other/ns/t", "other", "ns/t"))
    with pytest.raises(LocationRefused, match="overlaps another table's location") as refused:
        check_no_overlap(table, [TableLocation("s3://wh/ns", "wh", "ns")])
    assert "ns.parent" not in refused.value.message  # the caller may not know that table is there


def test_confine_is_the_one_check_of_every_file(s3: S3Storage) -> None:
    table = TableLocation("s3://wh/ns/t", "wh", "ns/t")
    assert table.confine(s3, "s3://wh/ns/t/data/a.parquet") == ("wh", "ns/t/data/a.parquet")
    for path in (
        "s3://wh/ns/t2/data/a.parquet",  # the table next door, whose name extends this one's
        "s3://wh/ns/t/../t2/data/a.parquet",
        "s3://wh/ns/t/%2E%2E/t2/a.parquet",  # decoded as the storage decodes it, then checked
        "s3://wh/ns/t/data/a.parquet#",
        "s3://wh/ns/t/data/a.parquet?versionId=1",
        "s3://other/ns/t/data/a.parquet",
        "s3://wh/ns/t",
        "file:///etc/passwd",
    ):
        with pytest.raises(OutsideTable):
            table.confine(s3, path)


def test_a_symbolic_link_in_a_local_table_leads_nowhere_else(local: LocalStorage) -> None:
    root = local.root
    (root / "wh" / "victim" / "metadata").mkdir(parents=True)
    (root / "wh" / "victim" / "metadata" / "v.json").write_text("{}")
    (root / "wh" / "t").mkdir()
    (root / "wh" / "t" / "metadata").symlink_to(root / "wh" / "victim" / "metadata")
    table = requested_location(local, "wh", (root / "wh" / "t").as_uri())
    assert table.confine(local, (root / "wh" / "t" / "data.parquet").as_uri())[1] == "t/data.parquet"
    with pytest.raises(OutsideTable):
        table.confine(local, (root / "wh" / "t" / "metadata" / "v.json").as_uri())


def test_write_paths_and_named_files_must_be_inside(s3: S3Storage) -> None:
    table = TableLocation("s3://wh/ns/t", "wh", "ns/t")
    check_write_paths(s3, table, {"write.data.path": "s3://wh/ns/t/data", "owner": "s3://anywhere"})
    for key in ("write.data.path", "write.metadata.path", "write.object-storage.path"):
        with pytest.raises(LocationRefused, match=key):
            check_write_paths(s3, table, {key: "s3://victim/ns/v/data"})
    check_files(s3, table, [("manifest list", "s3://wh/ns/t/metadata/snap-1.avro")])
    with pytest.raises(LocationRefused, match="manifest list"):
        check_files(s3, table, [("manifest list", "s3://wh/ns/v/metadata/snap-1.avro")])


def test_names_are_one_path_and_one_arn() -> None:
    for name in ("orders", "Orders_2", "_staging", "a-b", "x" * 200):
        assert check_name(name) == name
    refused = ["a.b", "x#1", "x?1", "a%2F", "a/b", "a b", "caf\u00e9", "cafe\u0301", "a\u202eb", "a\uff0fb",
               ".hidden", "-x", "", "x" * 201]  # fmt: skip
    for name in refused:
        with pytest.raises(InvalidParameter):
            check_name(name)
    with pytest.raises(InvalidParameter):
        check_namespace(["a.b"])
    assert check_namespace(["a", "b"]) == ("a", "b")


def test_a_name_with_a_lone_surrogate_is_refused_as_a_name_not_a_crash() -> None:
    """A CLI argument that was not UTF-8 arrives with one (`surrogateescape`)."""
    from share_store.errors import InvalidParameter

    for name in ("\udcff", "ok\ud800", "\udcff" * 300):
        with pytest.raises(InvalidParameter, match="invalid table name"):
            check_name(name)
