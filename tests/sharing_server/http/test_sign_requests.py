"""A remote-signing request's body read off the wire (`sharing_server.http.sign_requests`): the
shape both Iceberg REST signers take, and what it refuses before anything is decided."""

from __future__ import annotations

import json

import pytest

from share_store.errors import InvalidParameter
from sharing_server.http.sign_requests import SignRequest, parse_sign_request

URI = "http://store:9000/bucket/table/data/x.parquet"


def test_the_method_uri_and_headers_are_read_as_the_clients_send_them() -> None:
    body = {"method": "GET", "uri": URI, "headers": {"Range": ["bytes=0-9"]}, "region": "us-east-1"}
    request = parse_sign_request(json.dumps(body).encode())
    assert request == SignRequest("GET", URI, {"Range": ["bytes=0-9"]})
    method, uri, headers = request  # the handlers unpack it
    assert (method, uri, headers) == ("GET", URI, {"Range": ["bytes=0-9"]})


def test_the_provider_s3_is_taken_in_any_case() -> None:
    for provider in ("s3", "S3"):
        body = {"method": "GET", "uri": URI, "provider": provider, "region": "eu-west-1", "body": ""}
        assert parse_sign_request(json.dumps(body).encode()).uri == URI


def test_headers_may_be_left_out() -> None:
    assert parse_sign_request(json.dumps({"method": "HEAD", "uri": URI}).encode()).headers == {}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "must be a JSON object"),
        (b"\xff\xfe", "must be a JSON object"),
        (b"[1, 2]", "must be a JSON object"),
        (b"[" * 100_000, "must be a JSON object"),
        (json.dumps({"uri": URI}).encode(), "needs 'method', 'uri' and 'headers'"),
        (json.dumps({"method": "GET", "uri": 7}).encode(), "needs 'method', 'uri' and 'headers'"),
        (json.dumps({"method": "GET", "uri": URI, "headers": []}).encode(), "needs"),
        (json.dumps({"method": "GET", "uri": URI, "headers": {"Range": "bytes=0-9"}}).encode(), "needs"),
        (json.dumps({"method": "GET", "uri": URI, "headers": {"Range": [1]}}).encode(), "needs"),
        (b'{"method": "G\\ud800", "uri": "u", "headers": {}}', "valid Unicode"),
        (b'{"method": "GET", "uri": "u\\ud800", "headers": {}}', "valid Unicode"),
        (b'{"method": "GET", "uri": "u", "headers": {"x-amz-meta-\\ud800": ["1"]}}', "valid Unicode"),
        (b'{"method": "GET", "uri": "u", "headers": {"Range": ["\\ud800"]}}', "valid Unicode"),
        # Iceberg 1.11's `provider`: S3 only; `region` and `body` are strings.
        (json.dumps({"method": "GET", "uri": URI, "provider": "gcs"}).encode(), "S3 requests only"),
        (json.dumps({"method": "GET", "uri": URI, "provider": None}).encode(), "S3 requests only"),
        (json.dumps({"method": "GET", "uri": URI, "region": 1}).encode(), "'region' must be a string"),
        (json.dumps({"method": "GET", "uri": URI, "body": {}}).encode(), "'body' must be a string"),
    ],
)
def test_a_body_of_another_shape_is_an_invalid_parameter(raw: bytes, reason: str) -> None:
    with pytest.raises(InvalidParameter, match=reason):
        parse_sign_request(raw)
