"""Presigning one S3 URL: ours against boto3's, in this process (no server involved)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import boto3
from botocore.config import Config

from bench.results import record
from share_store.signing.sigv4 import Credentials, S3Presigner


def bench_presign() -> None:
    """Presigning one URL, ours against boto3's, in this process (no server involved)."""
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9000",
        region_name="us-east-1",
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    ours = S3Presigner("http://127.0.0.1:9000", "us-east-1", Credentials("AKIAEXAMPLE", "secret"))
    now = datetime.now(UTC)
    assert ours.presign("b", "k/0.parquet", 3600, now.replace(microsecond=0)) is not None
    n_ours, n_boto = 50_000, 5_000
    start = time.perf_counter()
    for i in range(n_ours):
        ours.presign("bucket", f"table/part-{i:06d}.parquet", 3600)
    per_ours = (time.perf_counter() - start) / n_ours
    start = time.perf_counter()
    for i in range(n_boto):
        client.generate_presigned_url(
            "get_object", Params={"Bucket": "bucket", "Key": f"table/part-{i:06d}.parquet"}, ExpiresIn=3600
        )
    per_boto = (time.perf_counter() - start) / n_boto
    record("presign one URL: ours", f"{per_ours * 1e6:.1f} µs")
    record("presign one URL: boto3 generate_presigned_url", f"{per_boto * 1e6:.1f} µs")
    ratio = per_boto / per_ours
    record("presign speed-up (boto3 / ours)", f"{ratio:.1f}x", ">= 20x", "met" if ratio >= 20 else "missed")
