"""Which files of a table are missing, on S3 (SeaweedFS): listed in key ranges, in parallel, uncapped.

A check lists the keys it wants in ranges (`CHECK_RANGE_KEYS`), each from the
last key of the range before on; set small here so that a few dozen objects
make many ranges. Checked: absent keys at the edges and between ranges, keys
of other directories sorting among them, more than the old cap of 10,000 keys
(the check once answered "none missing" beyond it), a bucket that does not
exist; and the directory a check lists from.
"""

from __future__ import annotations

import uuid

import pytest

from share_store.storage import s3
from share_store.storage.base import common_directory
from share_store.storage.s3 import S3Storage
from testbed.seaweed import SeaweedS3


@pytest.fixture
def bucket(seaweed: SeaweedS3) -> str:
    name = f"missing-{uuid.uuid4().hex[:12]}"
    client = seaweed.client()
    client.create_bucket(Bucket=name)
    # Present: every even part; an odd part sorts between each pair. Other objects
    # share the prefix and sort among the parts (a directory and a longer name).
    for i in range(0, 60, 2):
        client.put_object(Bucket=name, Key=f"t/part-{i:03d}.parquet", Body=b"x")
    client.put_object(Bucket=name, Key="t/part-010.parquet.crc", Body=b"x")
    client.put_object(Bucket=name, Key="t/part-02/nested.parquet", Body=b"x")
    client.put_object(Bucket=name, Key="t/_delta_log/00000000000000000000.json", Body=b"{}")
    return name


def test_missing_keys_found_across_ranges(
    seaweed: SeaweedS3, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3, "CHECK_RANGE_KEYS", 4)
    storage = S3Storage(seaweed.settings())
    wanted = [f"t/part-{i:03d}.parquet" for i in range(62)]
    expected = [key for i, key in enumerate(wanted) if i % 2 or i >= 60]
    assert storage.missing(bucket, "t/", reversed(wanted)) == expected
    present = [f"t/part-{i:03d}.parquet" for i in range(0, 60, 2)]
    assert storage.missing(bucket, "t/", present) == []
    assert storage.count_missing([(bucket, key) for key in wanted]) == len(expected)


def test_more_keys_than_the_old_cap_are_checked(seaweed: SeaweedS3, bucket: str) -> None:
    storage = S3Storage(seaweed.settings())
    wanted = [f"t/part-{i:03d}.parquet" for i in range(0, 60, 2)]
    wanted += [f"t/gone/{i:05d}.parquet" for i in range(10_001)]
    missing = storage.missing(bucket, "t/", wanted)
    assert len(missing) == 10_001 and all(key.startswith("t/gone/") for key in missing)


def test_a_missing_bucket_misses_everything(seaweed: SeaweedS3) -> None:
    storage = S3Storage(seaweed.settings())
    assert storage.missing("no-such-bucket-here", "t/", ["t/a", "t/b"]) == ["t/a", "t/b"]


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["t/a/x.parquet", "t/b/y.parquet"], "t/"),
        (["t/b/x.parquet", "t/bc/y.parquet"], "t/"),
        (["t/p=1/x.parquet", "t/p=1/y.parquet"], "t/p=1/"),
        (["x.parquet", "t/y.parquet"], ""),
        (["t/only.parquet"], "t/"),
    ],
)
def test_common_directory(keys: list[str], expected: str) -> None:
    assert common_directory(keys) == expected
