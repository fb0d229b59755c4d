"""Local storage: a write is durable once it returns; buckets are checked for and never made twice.

Durability is checked by recording `os.fsync` and `os.replace`: what was synced
(by inode, which a rename keeps) and in which order. A write must sync the file
before renaming it into place (else the rename can reach the disk before the
data) and its directory after (else the rename can be lost), plus the parent of
every directory it had to make; into an existing directory, nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from share_store.signing.file_urls import UrlSigner
from share_store.storage.base import ObjectTooLarge
from share_store.storage.local import LocalStorage

#: What happened, in order: ("fsync", (device, inode)) or ("replace", destination).
Events = list[tuple[str, object]]


def node(path: Path) -> tuple[int, int]:
    found = path.stat()
    return found.st_dev, found.st_ino


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    (tmp_path / "root" / "bucket").mkdir(parents=True)
    return LocalStorage(tmp_path / "root", UrlSigner(b"k" * 32, "http://localhost"))


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Events:
    """`os.fsync` and `os.replace` as called from here on, each still done."""
    recorded: Events = []
    fsync: Callable[[int], None] = os.fsync
    replace = os.replace

    def recording_fsync(fd: int) -> None:
        found = os.fstat(fd)
        recorded.append(("fsync", (found.st_dev, found.st_ino)))
        fsync(fd)

    def recording_replace(source: str, destination: str | Path) -> None:
        recorded.append(("replace", Path(destination)))
        replace(source, destination)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    return recorded


def synced(events: Events) -> list[object]:
    return [what for kind, what in events if kind == "fsync"]


def test_a_write_syncs_the_file_then_renames_then_syncs_its_directory(
    storage: LocalStorage, events: Events
) -> None:
    storage.write("bucket", "data.parquet", b"rows")
    path = storage.root / "bucket" / "data.parquet"
    assert path.read_bytes() == b"rows"
    file, directory = node(path), node(path.parent)
    # Exactly: the file, the rename, the directory. Nothing else is paid for.
    assert events == [("fsync", file), ("replace", path), ("fsync", directory)]


def test_directories_made_on_the_way_are_synced_in_their_parents(
    storage: LocalStorage, events: Events
) -> None:
    storage.write("bucket", "t/metadata/deep/00001.json", b"{}")
    bucket = storage.root / "bucket"
    made = [bucket / "t", bucket / "t" / "metadata", bucket / "t" / "metadata" / "deep"]
    file = node(made[-1] / "00001.json")
    assert events.index(("fsync", file)) < events.index(("replace", made[-1] / "00001.json"))
    # The new directories' entries (in the bucket, t, metadata) and the file's own directory.
    assert sorted(synced(events)) == sorted([file, node(bucket), *(node(d) for d in made)])
    # The file's own directory last: after the rename, which its sync makes durable.
    assert synced(events)[-1] == node(made[-1])


def test_writing_into_a_new_bucket_syncs_the_root(storage: LocalStorage, events: Events) -> None:
    storage.write("fresh", "x.json", b"{}")
    assert node(storage.root) in synced(events)
    assert node(storage.root / "fresh") in synced(events)


def test_a_second_write_to_a_directory_syncs_only_the_file_and_the_directory(
    storage: LocalStorage, events: Events
) -> None:
    storage.write("bucket", "t/a.json", b"1")
    events.clear()
    storage.write("bucket", "t/b.json", b"2")
    assert synced(events) == [
        node(storage.root / "bucket" / "t" / "b.json"),
        node(storage.root / "bucket" / "t"),
    ]


def test_a_failed_sync_leaves_no_file_and_raises(
    storage: LocalStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        storage.write("bucket", "t/data.parquet", b"rows")
    # Not renamed into place, and the temporary file is gone: nothing for a pointer to name.
    assert not (storage.root / "bucket" / "t" / "data.parquet").exists()
    assert list((storage.root / "bucket" / "t").iterdir()) == []


def test_a_write_replaces_an_object_whole(storage: LocalStorage) -> None:
    storage.write("bucket", "k", b"old")
    storage.write("bucket", "k", b"new")
    assert storage.read("bucket", "k") == b"new"
    assert [info.key for info in storage.list("bucket", "")] == ["k"]


# -- buckets -----------------------------------------------------------------------------------


def test_bucket_exists(storage: LocalStorage) -> None:
    assert storage.bucket_exists("bucket")
    assert not storage.bucket_exists("absent")
    (storage.root / "plain-file").write_bytes(b"")
    assert not storage.bucket_exists("plain-file")  # a file in the root is no bucket


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../bucket", "/etc"])
def test_bucket_names_that_would_leave_the_root_are_refused(storage: LocalStorage, name: str) -> None:
    with pytest.raises(PermissionError):
        storage.bucket_exists(name)
    with pytest.raises(PermissionError):
        storage.create_bucket(name)


def test_a_bucket_linked_out_of_the_root_is_refused(storage: LocalStorage, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (storage.root / "linked").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PermissionError):
        storage.bucket_exists("linked")
    with pytest.raises(PermissionError):
        storage.create_bucket("linked")


def test_create_bucket_makes_it_durably_and_refuses_an_existing_one(
    storage: LocalStorage, events: Events
) -> None:
    storage.create_bucket("made")
    assert storage.bucket_exists("made")
    assert synced(events) == [node(storage.root)]
    # Made by another since a check, or there all along: refused, never adopted.
    with pytest.raises(FileExistsError):
        storage.create_bucket("made")
    storage.write("made", "x", b"1")
    with pytest.raises(FileExistsError):
        storage.create_bucket("made")
    (storage.root / "plain-file").write_bytes(b"")
    with pytest.raises(FileExistsError):
        storage.create_bucket("plain-file")
    assert storage.read("made", "x") == b"1"


def test_read_at_most_refuses_a_file_past_the_bound_without_reading_it(storage: LocalStorage) -> None:
    storage.write("b", "small.json", b"{}")
    assert storage.read_at_most("b", "small.json", 2) == b"{}"
    big = storage.root / "b" / "big.json"
    with big.open("wb") as handle:
        handle.truncate(10 << 30)  # 10 GiB, sparse: read, it would not fit in memory
    with pytest.raises(ObjectTooLarge) as refused:
        storage.read_at_most("b", "big.json", 1 << 20)
    assert refused.value.size == 10 << 30
    with pytest.raises(FileNotFoundError):
        storage.read_at_most("b", "absent.json", 2)
