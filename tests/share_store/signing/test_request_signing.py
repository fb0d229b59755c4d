"""SigV4 header signing for both Iceberg REST remote signers (`share_store.signing.request_signing`):
the request signed is one the signer builds from the operation it parsed, never the caller's."""

from __future__ import annotations

import pytest

from share_store.signing.request_signing import HeaderSigner, SigningRefused, parse_object_request

ENDPOINT = "http://s3:9000"


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
        # The host form: a store that resolves no virtual hosts serves the bucket of the path.
        ("GET", "http://b.s3:9000/other/k", "path style"),
        ("GET", "http://user@s3:9000/b/k", "path style"),
        ("GET", "http://S3:9000./b/k", "cannot be parsed"),  # a port that is no number
        ("GET", "http://s3:9000/b/a%2F..%2Fk", "one object"),
        ("GET", "http://s3:9000/b/%ff.parquet", "UTF-8"),
        ("GET", "http://s3:9000/b/a%0Ab", "control"),
        ("GET", "http://s3:9000/b/a%5C..%5Ck", "backslash"),
        ("GET", "http://s3:9000/b%2Fc/k", "one object"),
    ],
)
def test_sign_requests_that_are_not_one_object_read_are_refused(method: str, uri: str, reason: str) -> None:
    with pytest.raises(SigningRefused, match=reason):
        parse_object_request(method, uri, {}, ENDPOINT)


def test_the_request_signed_is_built_from_the_operation_with_only_allowed_headers() -> None:
    headers = {
        "Range": ["bytes=0-9"],
        "User-Agent": ["x"],
        "x-amz-checksum-mode": ["ENABLED"],
        "Authorization": ["AWS4-HMAC-SHA256 forged"],
        "Host": ["elsewhere"],
    }
    parsed = parse_object_request("get", "http://S3:9000/b/dir/a%20b=1.parquet", headers, ENDPOINT)
    assert (parsed.method, parsed.bucket, parsed.key) == ("GET", "b", "dir/a b=1.parquet")
    assert parsed.headers == {"range": "bytes=0-9", "x-amz-checksum-mode": "ENABLED"}
    # Encoded again by the signer, as botocore and the AWS SDKs encode a key.
    assert parsed.uri == "http://s3:9000/b/dir/a%20b%3D1.parquet"
    assert parsed.objects() == [("b", "dir/a b=1.parquet")]


@pytest.mark.parametrize(
    "header",
    [
        "x-amz-acl",
        "x-amz-grant-read",
        "x-amz-tagging",
        "x-amz-object-lock-mode",
        "x-amz-website-redirect-location",
        "x-amz-server-side-encryption-customer-key",
        "x-amz-server-side-encryption-aws-kms-key-id",
        "x-amz-request-payer",
        "X-Amz-Storage-Class",
        "x-amz-anything-new",
    ],
)
def test_an_x_amz_header_outside_the_allow_list_refuses_the_request(header: str) -> None:
    """Not dropped from the signature: a store may honour an unsigned x-amz header."""
    with pytest.raises(SigningRefused, match="not one this signer signs"):
        parse_object_request("PUT", "http://s3:9000/b/t/f", {header: ["v"]}, ENDPOINT, writes=True)


def test_a_copy_source_is_parsed_into_the_object_it_copies() -> None:
    headers = {
        "x-amz-copy-source": ["/victims/t/data/f%3D1.parquet"],
        "x-amz-copy-source-range": ["bytes=0-1"],
    }
    part = "http://s3:9000/b/t/data/g.parquet?uploadId=abc&partNumber=1"
    copied = parse_object_request("PUT", part, headers, ENDPOINT, writes=True)
    assert copied.copy_source == ("victims", "t/data/f=1.parquet")
    assert copied.objects() == [("b", "t/data/g.parquet"), ("victims", "t/data/f=1.parquet")]
    assert copied.headers["x-amz-copy-source"] == "/victims/t/data/f%3D1.parquet"
    for source, reason in (
        ("/b/t/a/../x", "one object"),
        ("b/t/f?versionId=1", "version"),
        ("/b", "one object"),
        ("/b/t/%ff", "UTF-8"),
    ):
        with pytest.raises(SigningRefused, match=reason):
            parse_object_request("PUT", part, {"x-amz-copy-source": [source]}, ENDPOINT, writes=True)
    with pytest.raises(SigningRefused, match="on a PUT only"):
        parse_object_request("GET", "http://s3:9000/b/t/f", {"x-amz-copy-source": ["/b/t/x"]}, ENDPOINT)
    with pytest.raises(SigningRefused, match="copy source only"):
        parse_object_request(
            "PUT", "http://s3:9000/b/t/f", {"x-amz-copy-source-range": ["bytes=0-1"]}, ENDPOINT, writes=True
        )


@pytest.mark.parametrize(
    ("method", "uri", "reason"),
    [
        ("PATCH", "http://s3:9000/b/k", "not PATCH"),
        ("PUT", "http://s3:9000/b/k?acl", "multipart"),
        ("DELETE", "http://s3:9000/b/k?versionId=1", "multipart"),
        ("POST", "http://s3:9000/b/k", "multipart"),
        ("POST", "http://s3:9000/b?delete", "with its body"),  # a batch delete is read with its body
        ("PUT", "http://s3:9000/b/a/../k", "one object"),
        ("PUT", "http://s3:9000/b/k?partNumber=1", "multipart"),
        ("PUT", "http://s3:9000/b/k?partNumber=0&uploadId=a", "part number"),
        ("PUT", "http://s3:9000/b/k?partNumber=1&partNumber=2&uploadId=a", "twice"),
        ("PUT", "http://s3:9000/b/k?partNumber=%EF%BC%91&uploadId=a", "part number"),
        ("PUT", "http://s3:9000/b/k?partNumber=1&uploadId=a%20b", "upload id"),
        ("POST", "http://s3:9000/b/k?uploads=x", "no value"),
        ("DELETE", "http://s3:9000/b/k?uploadId=a&x-id=1", "multipart"),
    ],
)
def test_a_writers_request_is_one_object_put_deleted_or_uploaded_in_parts(
    method: str, uri: str, reason: str
) -> None:
    with pytest.raises(SigningRefused, match=reason):
        parse_object_request(method, uri, {}, ENDPOINT, writes=True)


def test_a_write_is_signed_with_its_body_unsigned_and_multipart_steps_keep_their_query() -> None:
    signer = HeaderSigner("us-east-1", "AK", "SECRET")
    put = parse_object_request("PUT", "http://s3:9000/b/t/data/f.parquet", {}, ENDPOINT, writes=True)
    signed = signer.sign(put)
    assert signed["x-amz-content-sha256"] == ["UNSIGNED-PAYLOAD"]
    assert signed["Authorization"][0].startswith("AWS4-HMAC-SHA256 Credential=AK/")
    part = "http://s3:9000/b/t/data/f.parquet?uploadId=abc&partNumber=2"
    request = parse_object_request("PUT", part, {}, ENDPOINT, writes=True)
    assert request.uri == "http://s3:9000/b/t/data/f.parquet?partNumber=2&uploadId=abc"
    assert request.key == "t/data/f.parquet"
    started = parse_object_request("POST", "http://s3:9000/b/t/f?uploads", {}, ENDPOINT, writes=True)
    assert started.method == "POST" and started.uri == "http://s3:9000/b/t/f?uploads"
    read = signer.sign(parse_object_request("GET", "http://s3:9000/b/t/f", {}, ENDPOINT))
    assert read["x-amz-content-sha256"] != ["UNSIGNED-PAYLOAD"]  # a read's empty body is hashed


def test_an_endpoint_with_a_base_path_keeps_it() -> None:
    parsed = parse_object_request("GET", "http://gw/s3/b/k", {}, "http://gw/s3/")
    assert (parsed.bucket, parsed.key, parsed.uri) == ("b", "k", "http://gw/s3/b/k")
    with pytest.raises(SigningRefused, match="endpoint"):
        parse_object_request("GET", "http://gw/b/k", {}, "http://gw/s3")
