"""The real client reads tables kept in a real S3 server (SeaweedFS) through SigV4 URLs."""

from __future__ import annotations

from datetime import UTC, datetime

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from share_store.storage.s3 import S3Storage
from testbed.deltalake_access import deltalake_options, table_uri
from testbed.seaweed import upload_tree
from tests.conftest import TESTDATA_BUCKET, Deployment
from tests.end_to_end.test_client_local import canonical, table_name

UPLOADED = [
    "delta-0.8.0-partitioned",
    "delta-0.8.0-special-partition",
    "simple_table",
    "delta-2.2.0-partitioned-types",
    "checkpoints",
]


@pytest.fixture(scope="module")
def s3_profile(s3: Deployment, testdata) -> str:
    client = s3.seaweed.client()
    for path in UPLOADED:
        upload_tree(client, testdata / path, TESTDATA_BUCKET, path)
    s3.share_tables("s3data", {table_name(p): p for p in UPLOADED})
    return s3.profile("s3data")


def s3_direct(s3: Deployment, path: str, version: int | None = None) -> pd.DataFrame:
    table = DeltaTable(
        table_uri(s3.storage, TESTDATA_BUCKET, path),
        version=version,
        storage_options=deltalake_options(s3.storage),
    )
    return table.to_pandas()


@pytest.mark.parametrize("path", [p for p in UPLOADED if p != "checkpoints"])
def test_load_as_pandas_from_s3(s3: Deployment, s3_profile: str, path: str) -> None:
    shared = delta_sharing.load_as_pandas(f"{s3_profile}#s3data.default.{table_name(path)}")
    pd.testing.assert_frame_equal(canonical(shared), canonical(s3_direct(s3, path)))


def test_time_travel_and_limit_from_s3(s3: Deployment, s3_profile: str) -> None:
    url = f"{s3_profile}#s3data.default.simple_table"
    for version in range(5):
        shared = delta_sharing.load_as_pandas(url, version=version)
        pd.testing.assert_frame_equal(canonical(shared), canonical(s3_direct(s3, "simple_table", version)))
    assert len(delta_sharing.load_as_pandas(url, limit=1)) == 1


def test_missing_files_on_s3(s3_profile: str) -> None:
    with pytest.raises(Exception, match="table files missing"):
        delta_sharing.load_as_pandas(f"{s3_profile}#s3data.default.checkpoints")


def test_table_written_with_deltalake_on_s3(s3: Deployment) -> None:
    client = s3.seaweed.client()
    client.create_bucket(Bucket="written")
    uri = "s3://written/sales/orders"
    options = deltalake_options(s3.storage) | {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    first = pa.table(
        {
            "id": [1, 2, 3],
            "region": ["eu", "us", "eu"],
            "ts": pa.array([datetime(2024, 1, 1, tzinfo=UTC)] * 3, pa.timestamp("us", "UTC")),
        }
    )
    write_deltalake(uri, first, partition_by=["region"], storage_options=options)
    write_deltalake(
        uri, first.set_column(0, "id", pa.array([4, 5, 6])), mode="append", storage_options=options
    )
    s3.share_tables("written", {"orders": "sales/orders"}, bucket="written", schema="sales")
    profile = s3.profile("written")
    shared = delta_sharing.load_as_pandas(f"{profile}#written.sales.orders")
    assert sorted(shared["id"]) == [1, 2, 3, 4, 5, 6]
    v0 = delta_sharing.load_as_pandas(f"{profile}#written.sales.orders", version=0)
    assert sorted(v0["id"]) == [1, 2, 3]


def test_presigned_urls_use_the_public_endpoint(s3: Deployment, s3_profile: str) -> None:
    """Signed for the host recipients reach, and accepted there (ranges, expiry)."""
    seaweed = s3.seaweed
    public = seaweed.endpoint.replace("127.0.0.1", "localhost")
    storage = S3Storage(seaweed.settings(public_endpoint=public), url_lifetime=60)
    key = "simple_table/_delta_log/00000000000000000000.json"
    url, expires = storage.presign(TESTDATA_BUCKET, key, datetime.now(UTC).timestamp())
    assert url.startswith(public + "/") and "X-Amz-Signature=" in url
    assert expires > datetime.now(UTC).timestamp() * 1000
    assert httpx.get(url).status_code == 200
    ranged = httpx.get(url, headers={"Range": "bytes=0-9"})
    assert ranged.status_code == 206 and len(ranged.content) == 10
    tampered = url.replace("00000000000000000000.json", "00000000000000000001.json")
    assert httpx.get(tampered).status_code == 403


def test_expired_s3_url_is_refused(s3: Deployment, s3_profile: str) -> None:
    seaweed = s3.seaweed
    storage = S3Storage(seaweed.settings(), url_lifetime=1)
    url, _ = storage.presign(TESTDATA_BUCKET, "simple_table/_delta_log/00000000000000000000.json", 0)
    import time

    time.sleep(2.1)
    assert httpx.get(url).status_code == 403


def test_storage_refusals_are_clear_400s(s3: Deployment, s3_profile: str) -> None:
    """Wrong storage credentials: "permission denied" as the reference says it, never a 500."""
    from share_store.errors import TableFilesMissing

    seaweed = s3.seaweed
    wrong = S3Storage(seaweed.settings(secret_key="not-the-secret"))
    with pytest.raises(TableFilesMissing, match="permission denied"):
        list(wrong.list(TESTDATA_BUCKET, "simple_table/_delta_log/"))
    with pytest.raises(TableFilesMissing, match="permission denied"):
        wrong.read(TESTDATA_BUCKET, "simple_table/_delta_log/00000000000000000000.json")


def test_an_opened_object_fetches_only_the_bytes_read(s3: Deployment) -> None:
    """Equality deletes read a few columns of large data files: never the whole object."""
    import io

    import pyarrow.parquet as pq

    table = pa.table({"id": list(range(50_000)), "payload": [f"{i:0>200}" for i in range(50_000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="none")
    client = s3.seaweed.client()
    client.put_object(Bucket=TESTDATA_BUCKET, Key="opened/data.parquet", Body=sink.getvalue())
    storage = s3.storage
    assert isinstance(storage, S3Storage)
    opened = storage.open(TESTDATA_BUCKET, "opened/data.parquet")
    fetched = []
    get_object = opened._client.get_object  # type: ignore[attr-defined]

    def counting(**arguments: str) -> dict:
        response = get_object(**arguments)
        fetched.append(response["ContentLength"])
        return response

    opened._client = type("Counting", (), {"get_object": staticmethod(counting)})()  # type: ignore[attr-defined]
    ids = pq.ParquetFile(opened).read(columns=["id"]).column("id")
    assert ids.to_pylist() == list(range(50_000))
    assert 0 < sum(fetched) < len(sink.getvalue()) / 10  # the footer and one small column chunk
    with pytest.raises(FileNotFoundError):
        storage.open(TESTDATA_BUCKET, "opened/absent.parquet")
