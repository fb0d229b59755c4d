"""The cache of files derived from Iceberg deletes, on a real S3 server (SeaweedFS).

Replicas share one cache: what one server wrote, another finds and signs, and
a deletion vector file read back through its presigned URL is Delta's layout.
"""

from __future__ import annotations

import time
import zlib

import httpx
import pytest

from share_store.delta.deletion_vectors import serialize_positions
from share_store.iceberg.derived import DerivedFiles, dv_file_bytes
from share_store.storage import S3Storage
from testbed.seaweed import SeaweedS3
from tests.dv import payload_positions

BUCKET = "derived-cache"


@pytest.fixture(scope="module")
def storage(seaweed: SeaweedS3) -> S3Storage:
    seaweed.client().create_bucket(Bucket=BUCKET)
    return S3Storage(seaweed.settings())


def derived(storage: S3Storage) -> DerivedFiles:
    return DerivedFiles(storage, BUCKET, ".cache/", lambda bucket, key: f"s3://{bucket}/{key}")


def test_write_and_stat_on_s3(storage: S3Storage, seaweed: SeaweedS3) -> None:
    assert storage.stat(BUCKET, "absent/file.bin") is None
    storage.write(BUCKET, "dir/file.bin", b"abc")
    found = storage.stat(BUCKET, "dir/file.bin")
    assert found is not None and found.size == 3
    assert storage.read(BUCKET, "dir/file.bin") == b"abc"
    refused = S3Storage(seaweed.settings(secret_key="not-the-key"))
    with pytest.raises(PermissionError):  # which the cache turns into a clear refusal
        refused.write(BUCKET, "file.bin", b"abc")


def test_a_deletion_vector_file_written_by_one_replica_is_served_by_another(storage: S3Storage) -> None:
    payload, count = serialize_positions([1, 5, 70_000, 2**33])
    first = derived(storage).dv_descriptor(payload, count)
    key = first["pathOrInlineDv"].removeprefix(f"s3://{BUCKET}/")
    written = storage.stat(BUCKET, key)
    assert written is not None
    second = derived(storage).dv_descriptor(payload, count)  # another replica: same name, no rewrite
    assert second == first
    after = storage.stat(BUCKET, key)
    assert after is not None and after.modified_ms == written.modified_ms
    url, _ = storage.presign(BUCKET, key, time.time())
    content = httpx.get(url).content
    assert content == dv_file_bytes(payload)
    size = int.from_bytes(content[1:5], "big")
    assert content[5 + size : 9 + size] == zlib.crc32(content[5 : 5 + size]).to_bytes(4, "big")
    assert payload_positions(content[5 : 5 + size]) == {1, 5, 70_000, 2**33}


def test_the_index_round_trips_and_a_damaged_one_is_ignored(storage: S3Storage) -> None:
    cache = derived(storage)
    payload, count = serialize_positions(range(10))
    vectors = {"s3://data/a.parquet": cache.dv_descriptor(payload, count), "s3://data/b.parquet": None}
    cache.write_index("table-uuid", 7, vectors)
    assert derived(storage).read_index("table-uuid", 7) == vectors
    storage.write(BUCKET, ".cache/index2/table-uuid/8.json", b"{not json")
    assert derived(storage).read_index("table-uuid", 8) == {}
    # A descriptor pointing outside the cache is never trusted, whoever wrote the index.
    storage.write(
        BUCKET,
        ".cache/index2/table-uuid/9.json",
        b'{"vectors": {"f": {"storageType": "p", "pathOrInlineDv": "s3://other/x.bin", "cardinality": 1}}}',
    )
    assert derived(storage).read_index("table-uuid", 9) == {}
