"""The fast SigV4 presigner gives botocore's URLs byte for byte, and SeaweedFS accepts them."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import boto3
import httpx
import pyarrow as pa
import pytest
from botocore.config import Config

from share_store.signing.sigv4 import Credentials, S3Presigner
from share_store.storage.s3 import S3Settings, S3Storage

KEYS = [
    "a/b c%2F.parquet",
    "x=A%2FA/part-00000.snappy.parquet",
    "ünï/çødé ~!*'()[]{}$&+,;=@.parquet",
    "plain",
]


def botocore_client(endpoint: str, token: str | None) -> Any:
    """What our signer is compared with: botocore's client for the same keys, path-style."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="eu-west-3",
        aws_access_key_id="AKIA/TEST",
        aws_secret_access_key="s3cr3t",
        aws_session_token=token,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )


@pytest.mark.parametrize("token", [None, "session/token+with=odd chars"])
@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9000", "https://s3.example.com", "http://h:1/prefix"])
@pytest.mark.parametrize(("method", "operation"), [("GET", "get_object"), ("PUT", "put_object"),
                                                   ("DELETE", "delete_object")])  # fmt: skip
def test_identical_to_botocore(token: str | None, endpoint: str, method: str, operation: str) -> None:
    client = botocore_client(endpoint, token)
    ours = S3Presigner(endpoint, "eu-west-3", Credentials("AKIA/TEST", "s3cr3t", token))
    for key in KEYS:
        for _ in range(5):  # both must sign within the same second
            second = int(time.time())
            mine = ours.presign("my-bucket", key, 900, datetime.fromtimestamp(second, UTC), method)
            theirs = client.generate_presigned_url(
                operation, Params={"Bucket": "my-bucket", "Key": key}, ExpiresIn=900
            )
            if int(time.time()) == second:
                break
        assert mine == theirs


def test_seaweedfs_accepts_ranges_and_refuses_expired(seaweed) -> None:
    client = seaweed.client()
    client.create_bucket(Bucket="signing")
    client.put_object(Bucket="signing", Key="dir/a b.bin", Body=bytes(range(256)))
    signer = S3Presigner(
        seaweed.endpoint, seaweed.region, Credentials(seaweed.access_key, seaweed.secret_key)
    )
    url = signer.presign("signing", "dir/a b.bin", 60)
    assert httpx.get(url).content == bytes(range(256))
    ranged = httpx.get(url, headers={"Range": "bytes=10-19"})
    assert ranged.status_code == 206 and ranged.content == bytes(range(10, 20))
    assert httpx.get(url.replace("a%20b", "a%20c")).status_code == 403
    expired = signer.presign("signing", "dir/a b.bin", 1, datetime.fromtimestamp(time.time() - 5, UTC))
    assert httpx.get(expired).status_code == 403


@pytest.mark.parametrize("token", [None, "session/token+with=odd chars"])
@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9000", "https://s3.example.com", "http://h:1/prefix"])
@pytest.mark.parametrize("path_style", [True, False])
@pytest.mark.parametrize("plain_only", [True, False])
def test_batch_signing_gives_the_urls_of_signing(
    token: str | None, endpoint: str, path_style: bool, plain_only: bool
) -> None:
    """A record batch's URLs, signed at once, are those signed one by one, byte for byte: plain
    keys alone, and among keys that need quoting; path-style and virtual-host addressing."""
    ours = S3Presigner(endpoint, "eu-west-3", Credentials("AKIA/TEST", "s3cr3t", token), path_style)
    keys = [key for key in KEYS if not plain_only or key == "plain"] + [
        f"t/part-{i:05d}.parquet" for i in range(50)
    ]
    moment = datetime.fromtimestamp(int(time.time()), UTC)
    one_by_one = ours.signing(900, moment)
    batch = ours.batch_signing(900, moment)("my-bucket", pa.array(keys, pa.string()))
    assert batch.to_pylist() == [one_by_one("my-bucket", key) for key in keys]
    # A slice of a larger batch (its offsets not at 0), as a streamed checkpoint's batches are.
    sliced = pa.array(["skipped", *keys], pa.string()).slice(1)
    assert ours.batch_signing(900, moment)("my-bucket", sliced).to_pylist() == batch.to_pylist()


def test_storage_batch_signer_matches_its_url_signer() -> None:
    """`S3Storage.batch_signer`, which /query uses for a record batch of files, gives the URLs and
    the expiry its `url_signer` gives file by file."""
    storage = S3Storage(
        S3Settings(endpoint="http://127.0.0.1:9000", region="us-east-1", access_key="AKIA", secret_key="k"),
        600,
    )
    now = time.time()
    keys = ["a/b c.parquet", "d/e.parquet"]
    for _ in range(5):  # both within the same second
        second = int(time.time())
        one = storage.url_signer(now, 120)
        expected = [one("bkt", key) for key in keys]
        signer = storage.batch_signer(now, 120)
        assert signer is not None
        urls, expiration = signer("bkt", pa.array(keys, pa.string()))
        if int(time.time()) == second:
            break
    assert [(url, expiration) for url in urls.to_pylist()] == expected


LISTINGS = [
    [("prefix", "t 1/_delta_log/"), ("delimiter", "/"), ("encoding-type", "url")],
    [("prefix", "ünï/a+b~c="), ("encoding-type", "url"), ("start-after", "ünï/a+b~c=/00.json")],
    [("prefix", "x/"), ("delimiter", "/"), ("encoding-type", "url"), ("continuation-token", "tok/en+=")],
]


@pytest.mark.parametrize("token", [None, "session/token+with=odd chars"])
@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9000", "https://s3.example.com", "http://h:1/prefix"])
def test_listings_identical_to_botocore(token: str | None, endpoint: str) -> None:
    client = botocore_client(endpoint, token)
    ours = S3Presigner(endpoint, "eu-west-3", Credentials("AKIA/TEST", "s3cr3t", token))
    names = {"prefix": "Prefix", "delimiter": "Delimiter", "encoding-type": "EncodingType",
             "start-after": "StartAfter", "continuation-token": "ContinuationToken"}  # fmt: skip
    for params in LISTINGS:
        for _ in range(5):  # both must sign within the same second
            second = int(time.time())
            mine = ours.presign_listing("my-bucket", params, 300, datetime.fromtimestamp(second, UTC))
            botocore_params = {"Bucket": "my-bucket", **{names[name]: value for name, value in params}}
            theirs = client.generate_presigned_url("list_objects_v2", Params=botocore_params, ExpiresIn=300)
            if int(time.time()) == second:
                break
        assert mine == theirs
