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
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.stub import Stubber

from share_store.errors import StorageUnavailable
from share_store.storage import s3
from share_store.storage.base import ObjectTooLarge, common_directory
from share_store.storage.s3 import S3Settings, S3Storage
from testbed.seaweed import SeaweedS3, free_port


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


# -- buckets -----------------------------------------------------------------------------------


def test_bucket_exists(seaweed: SeaweedS3, bucket: str) -> None:
    storage = S3Storage(seaweed.settings())
    assert storage.bucket_exists(bucket)
    assert not storage.bucket_exists(f"absent-{uuid.uuid4().hex[:12]}")


def test_a_forbidden_bucket_is_taken_as_there(seaweed: SeaweedS3, bucket: str) -> None:
    """A 403 (here from keys the store refuses: a HEAD's bodiless answer cannot say why) is a bucket
    someone else holds: the catalog must not take it over, so it counts as existing."""
    refused = S3Storage(seaweed.settings(secret_key="not-the-secret"))
    assert refused.bucket_exists(bucket)


def test_create_bucket_refuses_an_existing_one(seaweed: SeaweedS3, bucket: str) -> None:
    storage = S3Storage(seaweed.settings())
    name = f"made-{uuid.uuid4().hex[:12]}"
    storage.create_bucket(name)
    assert storage.bucket_exists(name)
    # Made since a check (by this store or another client), or there all along: refused.
    with pytest.raises(FileExistsError):
        storage.create_bucket(name)
    with pytest.raises(FileExistsError):
        storage.create_bucket(bucket)
    assert storage.missing(bucket, "t/", ["t/part-000.parquet"]) == []  # and left as it was


@pytest.mark.parametrize(("status", "exists"), [(301, True), (403, True), (404, False)])
def test_bucket_exists_reads_a_bodiless_answer_by_its_status(status: int, exists: bool) -> None:
    """A HEAD's error has no body: botocore's code is then the bare status, as stubbed here."""
    storage = S3Storage(S3Settings(endpoint="http://127.0.0.1:9", access_key="a", secret_key="b"))
    with Stubber(storage._client) as stub:
        stub.add_client_error("head_bucket", str(status), http_status_code=status)
        assert storage.bucket_exists("some-bucket") is exists


def test_bucket_exists_when_storage_fails_is_an_outage() -> None:
    failing = S3Storage(S3Settings(endpoint="http://127.0.0.1:9", access_key="a", secret_key="b"))
    with Stubber(failing._client) as stub, pytest.raises(StorageUnavailable):
        stub.add_client_error("head_bucket", "503", http_status_code=503)
        failing.bucket_exists("some-bucket")
    settings = S3Settings(endpoint=f"http://127.0.0.1:{free_port()}", access_key="a", secret_key="b",
                          connect_timeout=0.5, max_attempts=1)  # fmt: skip
    with pytest.raises(StorageUnavailable):
        S3Storage(settings).bucket_exists("some-bucket")  # nothing listens there


@pytest.mark.parametrize("key", ["t/metadata/00001-a.metadata.json", "t/ünï code/a b+c=%2F.json"])
def test_own_writes_and_deletes_reach_the_store(seaweed: SeaweedS3, bucket: str, key: str) -> None:
    """The server's own PUT and one-key DELETE (signed by our signer, sent without botocore) write
    and remove the object botocore then reads, whatever its key; keys the store refuses are a
    refused write, as botocore's was. (A bucket that is not there SeaweedFS makes on a PUT, to
    botocore's as to ours: `tests/share_store/storage/test_s3_errors.py` maps the answer.)"""
    storage = S3Storage(seaweed.settings())
    assert storage._own_signer is not None
    storage.write(bucket, key, b'{"a": 1}')
    assert seaweed.client().get_object(Bucket=bucket, Key=key)["Body"].read() == b'{"a": 1}'
    storage.write(bucket, key, b"replaced")
    assert storage.read(bucket, key) == b"replaced"
    storage.delete(bucket, [key])
    assert storage.stat(bucket, key) is None
    storage.delete(bucket, [key])  # gone already: no failure, as DeleteObjects
    refused = S3Storage(seaweed.settings(secret_key="not-the-secret"))
    with pytest.raises(PermissionError, match=f"cannot write to bucket {bucket}"):
        refused.write(bucket, key, b"x")
    assert storage.stat(bucket, key) is None


def test_read_at_most_reads_what_fits_and_refuses_what_does_not(seaweed: SeaweedS3, bucket: str) -> None:
    """A bounded read (metadata files): the whole object up to the bound, `ObjectTooLarge` with its
    size past it, for a JSON object as SeaweedFS keeps it (gzipped) as for any other."""
    storage = S3Storage(seaweed.settings())
    for key in ("t/metadata/00001-a.metadata.json", "t/data/blob.bin"):
        data = b'{"padding": "' + b"x" * 10_000 + b'"}'
        storage.write(bucket, key, data)
        assert storage.read_at_most(bucket, key, len(data)) == data
        with pytest.raises(ObjectTooLarge) as refused:
            storage.read_at_most(bucket, key, len(data) - 1)
        assert refused.value.size in (len(data), None)
    with pytest.raises(FileNotFoundError):
        storage.read_at_most(bucket, "t/metadata/absent.metadata.json", 100)


ODD_KEYS = [
    "t/a b.json",
    "t/a+b.json",
    "t/ünï çødé.json",
    "t/x&y<z>'\".json",
    "t/%2F.json",
    "t/~!*()=,;@$.json",
]


def test_own_listings_list_what_botocore_lists(seaweed: SeaweedS3) -> None:
    """Listings go by URLs our signer signs, read by hand: on SeaweedFS they list what botocore's
    paginator lists, odd keys decoded, over many pages (1,000 keys each), from a key on, and
    folders; a read gives the object's bytes as stored, and a missing one is FileNotFoundError."""
    name = f"listing-{uuid.uuid4().hex[:12]}"
    client = seaweed.client()
    client.create_bucket(Bucket=name)
    keys = ODD_KEYS + [f"t/part-{i:05d}.json" for i in range(2_100)] + ["t/sub dir/k", "t/sub+2/k", "u/k"]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=name, Key=key, Body=key.encode()), keys))
    client.put_object(Bucket=name, Key="t/zipped.json", Body=b"\x1f\x8b not gzip", ContentEncoding="gzip")
    ours = S3Storage(seaweed.settings())
    theirs = S3Storage(seaweed.settings())
    theirs._own_signer = None  # botocore's way
    assert ours._own_signer is not None
    for start_after in (None, "t/part-00999.json", "t/ünï çødé.json"):
        listed = list(ours.list(name, "t/", start_after))
        assert listed == list(theirs.list(name, "t/", start_after))
        files = [k for k in [*keys, "t/zipped.json"] if k.startswith("t/") and k.count("/") == 1]
        assert [info.key for info in listed] == sorted(k for k in files if k > (start_after or ""))
    assert ours.folders(name, "t/") == theirs.folders(name, "t/") == ["t/sub dir/", "t/sub+2/"]
    assert list(ours.list(f"{name}-none", "t/")) == [] and ours.folders(f"{name}-none", "t/") == []
    for key in ODD_KEYS:
        assert ours.read(name, key) == key.encode()
    assert ours.read(name, "t/zipped.json") == b"\x1f\x8b not gzip"  # as stored, never decompressed
    # A prefix is one query value: what it holds never adds a parameter, nor leaves the bucket.
    for hostile in ("t/&prefix=u/", "t/?prefix=u/", "t/#", "u%2F", "t/../u/", "../"):
        assert [info.key for info in ours.list(name, hostile)] == [i.key for i in theirs.list(name, hostile)]
        assert not any(info.key.startswith("u/") for info in ours.list(name, hostile))
    with pytest.raises(FileNotFoundError):
        ours.read(name, "t/none.json")
