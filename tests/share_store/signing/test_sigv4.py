"""The fast SigV4 presigner gives botocore's URLs byte for byte, and SeaweedFS accepts them."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import boto3
import httpx
import pytest
from botocore.config import Config

from share_store.signing.sigv4 import Credentials, S3Presigner

KEYS = [
    "a/b c%2F.parquet",
    "x=A%2FA/part-00000.snappy.parquet",
    "ünï/çødé ~!*'()[]{}$&+,;=@.parquet",
    "plain",
]


@pytest.mark.parametrize("token", [None, "session/token+with=odd chars"])
@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9000", "https://s3.example.com", "http://h:1/prefix"])
@pytest.mark.parametrize(("method", "operation"), [("GET", "get_object"), ("PUT", "put_object"),
                                                   ("DELETE", "delete_object")])  # fmt: skip
def test_identical_to_botocore(token: str | None, endpoint: str, method: str, operation: str) -> None:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="eu-west-3",
        aws_access_key_id="AKIA/TEST",
        aws_secret_access_key="s3cr3t",
        aws_session_token=token,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
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
