"""SigV4 header signing for the Iceberg REST remote signer (`share_store.signing.request_signing`)."""

from __future__ import annotations

import pytest

from share_store.signing.request_signing import SigningRefused, parse_object_request


@pytest.mark.parametrize(
    ("method", "uri", "reason"),
    [
        ("PUT", "http://s3:9000/b/k", "only GET and HEAD"),
        ("GET", "http://s3:9000/b/k?acl", "query string"),
        ("GET", "https://s3:9000/b/k", "endpoint"),
        ("GET", "http://evil:9000/b/k", "endpoint"),
        ("GET", "http://s3:9000/b/a/../k", "one object"),
        ("GET", "http://s3:9000/b/a//k", "one object"),
        ("GET", "http://s3:9000/b", "one object"),
    ],
)
def test_sign_requests_that_are_not_one_object_read_are_refused(method: str, uri: str, reason: str) -> None:
    with pytest.raises(SigningRefused, match=reason):
        parse_object_request(method, uri, {}, "http://s3:9000")


def test_both_addressing_styles_name_the_object_and_only_range_and_amz_headers_are_kept() -> None:
    headers = {"Range": ["bytes=0-9"], "User-Agent": ["x"], "x-amz-checksum-mode": ["ENABLED"]}
    path_style = parse_object_request("get", "http://s3:9000/b/dir/a%20b.parquet", headers, "http://s3:9000")
    assert (path_style.method, path_style.bucket, path_style.key) == ("GET", "b", "dir/a b.parquet")
    assert path_style.headers == {"range": "bytes=0-9", "x-amz-checksum-mode": "ENABLED"}
    virtual = parse_object_request("HEAD", "http://b.s3:9000/dir/k", {}, "http://s3:9000")
    assert (virtual.bucket, virtual.key) == ("b", "dir/k")
