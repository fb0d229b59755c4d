"""Listing `_delta_log/`: after the first time, only what follows the newest known version."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from share_store.delta import reader as snapshot_module
from share_store.delta.log_listing import list_log
from share_store.delta.reader import DeltaTableReader
from share_store.errors import TableFilesMissing
from share_store.signing.file_urls import UrlSigner
from share_store.storage.base import ObjectInfo
from share_store.storage.local import LocalStorage
from tests.conftest import Deployment

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})


class CountingStorage(LocalStorage):
    """Local storage that records the `start_after` of every listing."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, UrlSigner(b"k" * 32, "http://unused/files"))
        self.listings: list[str | None] = []

    def list(self, bucket: str, prefix: str, start_after: str | None = None):  # type: ignore[override]
        self.listings.append(start_after)
        return super().list(bucket, prefix, start_after)


@pytest.fixture
def table(tmp_path: Path) -> tuple[CountingStorage, Path]:
    location = tmp_path / "bucket" / "t"
    for _ in range(3):
        write_deltalake(str(location), ROWS, mode="append")
    return CountingStorage(tmp_path), location


def test_listing_after_a_version(table: tuple[CountingStorage, Path]) -> None:
    storage, location = table
    DeltaTable(str(location)).create_checkpoint()
    full = list_log(storage, "bucket", "t/_delta_log/")
    tail = list_log(storage, "bucket", "t/_delta_log/", after=2)
    assert sorted(full.commits) == [0, 1, 2] and sorted(tail.commits) == [2]
    assert sorted(tail.checkpoints) == [2] and tail.checkpoint_bytes[2] > 0
    assert list_log(storage, "bucket", "t/_delta_log/", after=0).commits == full.commits
    head = list_log(storage, "bucket", "t/_delta_log/")
    head.commits.pop(2)
    assert head.extended(tail).commits == full.commits


def test_new_versions_show_at_once_with_a_short_listing(table: tuple[CountingStorage, Path]) -> None:
    storage, location = table
    reader = DeltaTableReader(storage, "bucket", "t")
    assert reader.snapshot().version == 2
    write_deltalake(str(location), ROWS, mode="append")
    assert reader.snapshot().version == 3
    assert storage.listings == [None, "t/_delta_log/00000000000000000002"]
    assert reader.snapshot(1).num_files == 2  # older versions still replay from the kept listing


def test_full_listing_again_after_a_while_or_a_missing_file(
    table: tuple[CountingStorage, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, location = table
    reader = DeltaTableReader(storage, "bucket", "t")
    reader.listing()
    # Log cleanup removes commit 0; the kept listing still names it.
    (location / "_delta_log" / "00000000000000000000.json").unlink()
    with pytest.raises(TableFilesMissing):
        reader.snapshot(1)
    assert sorted(reader.listing().commits) == [1, 2]  # listed in full after the miss
    assert storage.listings[-1] is None
    monkeypatch.setattr(snapshot_module, "FULL_LISTING_SECONDS", -1)
    reader.listing()
    assert storage.listings[-1] is None


def test_s3_lists_only_the_tail(s3: Deployment, seaweed) -> None:
    client = seaweed.client()
    client.create_bucket(Bucket="listing")
    for version in range(5):
        client.put_object(Bucket="listing", Key=f"t/_delta_log/{version:020d}.json", Body=b"{}\n")
    client.put_object(Bucket="listing", Key=f"t/_delta_log/{3:020d}.checkpoint.parquet", Body=b"x")
    keys = [info.key for info in s3.storage.list("listing", "t/_delta_log/", f"t/_delta_log/{3:020d}")]
    assert keys == [
        f"t/_delta_log/{3:020d}.checkpoint.parquet",
        f"t/_delta_log/{3:020d}.json",
        f"t/_delta_log/{4:020d}.json",
    ]
    assert all(isinstance(info, ObjectInfo) for info in s3.storage.list("listing", "t/_delta_log/"))


def test_a_local_file_gone_between_listing_and_stat_is_not_there(tmp_path: Path) -> None:
    log = tmp_path / "bucket" / "t" / "_delta_log"
    log.mkdir(parents=True)
    for version in range(5):
        (log / f"{version:020d}.json").write_text("{}\n")
    storage = LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://unused/files"))
    listing = storage.list("bucket", "t/_delta_log/")
    first = next(listing)  # the directory is read whole here; each file is looked at as it is yielded
    # As delta-rs renames its temporary files away while a query lists the log.
    for path in log.iterdir():
        if path.name != first.key.rpartition("/")[2]:
            path.unlink()
    assert list(listing) == []


def test_uploads_in_progress_and_near_miss_names_are_not_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "bucket" / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("{}\n")
    (log / f"{1:020d}.json#1").write_text("{}\n")  # object_store's upload, before its rename
    (log / f"{2:020d}.json\n").write_text("{}\n")  # `$` would have matched before the newline
    storage = LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://unused/files"))
    assert sorted(info.key for info in storage.list("bucket", "t/_delta_log/")) == [
        f"t/_delta_log/{0:020d}.json",
        f"t/_delta_log/{2:020d}.json\n",
    ]
    assert sorted(list_log(storage, "bucket", "t/_delta_log/").commits) == [0]
