"""SigV4 header signing for the Iceberg REST remote signer (`share_store.signing.request_signing`)."""

from __future__ import annotations

import pytest

from share_store.signing.request_signing import SigningRefused, parse_object_request


@pytest.mark.parametrize(
    ("method", "uri", "reason"),
    [
        ("PUT", "http://s3:9000/b/k", "only GET, HEAD are signed"),
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


@pytest.mark.parametrize(
    ("method", "uri", "reason"),
    [
        ("PATCH", "http://s3:9000/b/k", "not PATCH"),
        ("PUT", "http://s3:9000/b/k?acl", "query string"),
        ("DELETE", "http://s3:9000/b/k?versionId=1", "query string"),
        ("POST", "http://s3:9000/b/k", "multipart"),
        ("POST", "http://s3:9000/b?delete", "query string"),
        ("PUT", "http://s3:9000/b/a/../k", "one object"),
    ],
)
def test_a_writers_request_is_one_object_put_deleted_or_uploaded_in_parts(
    method: str, uri: str, reason: str
) -> None:
    with pytest.raises(SigningRefused, match=reason):
        parse_object_request(method, uri, {}, "http://s3:9000", writes=True)


def test_a_write_is_signed_with_its_body_unsigned_and_multipart_steps_keep_their_query() -> None:
    from share_store.signing.request_signing import HeaderSigner

    signer = HeaderSigner("us-east-1", "AK", "SECRET")
    put = parse_object_request("PUT", "http://s3:9000/b/t/data/f.parquet", {}, "http://s3:9000", writes=True)
    signed = signer.sign(put)
    assert signed["x-amz-content-sha256"] == ["UNSIGNED-PAYLOAD"]
    assert signed["Authorization"][0].startswith("AWS4-HMAC-SHA256 Credential=AK/")
    part = "http://s3:9000/b/t/data/f.parquet?partNumber=2&uploadId=abc"
    request = parse_object_request("PUT", part, {}, "http://s3:9000", writes=True)
    assert request.uri == part and request.key == "t/data/f.parquet"
    started = parse_object_request("POST", "http://s3:9000/b/t/f?uploads", {}, "http://s3:9000", writes=True)
    assert started.method == "POST"
    read = signer.sign(parse_object_request("GET", "http://s3:9000/b/t/f", {}, "http://s3:9000"))
    assert read["x-amz-content-sha256"] != ["UNSIGNED-PAYLOAD"]  # a read's empty body is hashed
