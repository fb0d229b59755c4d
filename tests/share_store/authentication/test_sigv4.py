"""SigV4 verification (`share_store.authentication.sigv4`) of requests botocore and pyiceberg really sign."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from dataclasses import dataclass, replace
from email.utils import formatdate
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from pyiceberg.catalog.rest import RestCatalog

from share_store.authentication.sigv4 import (
    SignedBy,
    canonical_query,
    canonical_uri,
    verify_request,
)
from share_store.errors import SignatureRejected

ACCESS_KEY = "AKCATALOGUSER"
SECRET = "s3cr3t/with+odd=chars"
SECRETS = {ACCESS_KEY: SECRET, "AKOTHER": "another secret"}
ENDPOINT = "http://catalog.test:8080"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Wire:
    """A request as the server receives it: raw path and query, headers with Host, body."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def with_header(self, name: str, value: str) -> Wire:
        kept = {key: old for key, old in self.headers.items() if key.lower() != name.lower()}
        return replace(self, headers={**kept, name: value})

    def without_header(self, name: str) -> Wire:
        return replace(
            self, headers={key: v for key, v in self.headers.items() if key.lower() != name.lower()}
        )


def verify(wire: Wire, **options: Any) -> SignedBy:
    return verify_request(wire.method, wire.path, wire.query, wire.headers, wire.body, SECRETS.get, **options)


def botocore_signed(
    method: str,
    path_and_query: str,
    body: bytes = b"",
    *,
    headers: dict[str, str] | None = None,
    params: list[tuple[str, str]] | None = None,
    access_key: str = ACCESS_KEY,
    secret: str = SECRET,
    service: str = "s3tables",
    region: str = "local",
    endpoint: str = ENDPOINT,
) -> Wire:
    request = AWSRequest(
        method=method, url=endpoint + path_and_query, data=body, headers=headers or {}, params=params or {}
    )
    SigV4Auth(Credentials(access_key, secret), service, region).add_auth(request)
    prepared = request.prepare()
    parts = urlsplit(prepared.url)
    # http.client sends the URL's host and port (no port when it is the scheme's default).
    sent = {"Host": parts.netloc, **dict(prepared.headers.items())}
    return Wire(method, parts.path, parts.query, sent, body)


def pyiceberg_signed(
    method: str, url: str, *, params: dict[str, str] | None = None, body: bytes = b""
) -> Wire:
    """Signed by pyiceberg's own SigV4Adapter, as RestCatalog mounts it, without sending anything.

    The catalog is not initialized (that would fetch /v1/config): the adapter only
    reads its properties and URI.
    """
    catalog = RestCatalog.__new__(RestCatalog)
    catalog.properties = {
        "uri": ENDPOINT + "/_iceberg",
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": "local",
        "client.access-key-id": ACCESS_KEY,
        "client.secret-access-key": SECRET,
    }
    catalog.uri = ENDPOINT + "/_iceberg"
    session = requests.Session()
    # What RestCatalog._create_session puts on every request.
    session.headers.update(
        {
            "Content-type": "application/json",
            "User-Agent": "PyIceberg/0.12.0",
            "X-Client-Version": "0.14.1",
            "X-Iceberg-Access-Delegation": "vended-credentials",
        }
    )
    catalog._init_sigv4(session)
    prepared = session.prepare_request(requests.Request(method, url, params=params, data=body or None))
    session.get_adapter(prepared.url).add_headers(prepared)
    parts = urlsplit(prepared.url)
    sent = {"Host": parts.netloc, **{name: str(value) for name, value in prepared.headers.items()}}
    raw_body = prepared.body if isinstance(prepared.body, bytes) else (prepared.body or "").encode()
    return Wire(method, parts.path, parts.query, sent, raw_body)


# --- accepted --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path_and_query", "body", "params"),
    [
        ("GET", "/_iceberg/v1/config?warehouse=my-warehouse", b"", None),
        ("GET", "/_iceberg/v1/wh/namespaces?parent=a%1Fb&pageSize=10", b"", None),
        ("GET", "/_iceberg/v1/wh/namespaces?x=2&x=1&a=%20space&empty=&bare", b"", None),
        ("GET", "/_iceberg/v1/wh/namespaces", b"", [("parent", "a\x1fb"), ("q", "two words"), ("q", "+~*")]),
        ("POST", "/_iceberg/v1/wh/namespaces/a%1Fb/tables", json.dumps({"name": "t"}).encode(), None),
        ("HEAD", "/_iceberg/v1/wh/namespaces/a%1Fb/tables/with%20space", b"", None),
        ("DELETE", "/_iceberg/v1/wh/namespaces/n/tables/per%25cent?purgeRequested=true", b"", None),
        ("GET", "/_iceberg/v1/wh/namespaces/caf%C3%A9/tables/sl%2Fash", b"", None),
        ("GET", "/_iceberg/v1/wh/./namespaces//n/../n/tables/", b"", None),
    ],
)
def test_requests_botocore_signs_verify(
    method: str, path_and_query: str, body: bytes, params: list[tuple[str, str]] | None
) -> None:
    wire = botocore_signed(method, path_and_query, body, params=params)
    assert verify(wire) == SignedBy(access_key=ACCESS_KEY, region="local")


def test_the_path_is_taken_raw_and_encoded_once_more_like_botocore() -> None:
    assert canonical_uri("/v1/ns/a%1Fb/t%20x") == "/v1/ns/a%251Fb/t%2520x"
    assert canonical_uri(b"/v1//a/./b/../c/") == "/v1/a/c/"
    assert canonical_uri("") == "/"
    assert canonical_query("b=2&a=%7e&a=1&c+d=e+f&flag") == "a=1&a=~&b=2&c%20d=e%20f&flag="


def test_default_port_any_region_and_headers_as_pairs_verify() -> None:
    wire = botocore_signed(
        "GET",
        "/_iceberg/v1/config",
        endpoint="https://catalog.test",
        region="us-east-1",
        headers={"X-Custom": "  spaced   out  "},
    )
    assert wire.headers["Host"] == "catalog.test"
    pairs = [(name.upper(), value) for name, value in wire.headers.items()]
    assert verify_request("GET", wire.path.encode(), wire.query.encode(), pairs, b"", SECRETS.get).region == (
        "us-east-1"
    )


def test_a_date_header_instead_of_x_amz_date_verifies() -> None:
    wire = botocore_signed("GET", "/_iceberg/v1/config", headers={"Date": formatdate(usegmt=True)})
    assert not any(name.lower() == "x-amz-date" for name in wire.headers)
    assert verify(wire).access_key == ACCESS_KEY


def test_pyiceberg_sigv4_adapter_requests_verify() -> None:
    listing = pyiceberg_signed(
        "GET", f"{ENDPOINT}/_iceberg/v1/wh/namespaces", params={"parent": "a\x1fb", "pageToken": "x y+z"}
    )
    assert "parent=a%1Fb" in listing.query and "pageToken=x+y%2Bz" in listing.query
    assert listing.headers["x-amz-content-sha256"] == EMPTY_SHA256
    assert verify(listing).access_key == ACCESS_KEY

    body = json.dumps({"name": "t", "schema": {"type": "struct", "fields": []}}).encode()
    create = pyiceberg_signed("POST", f"{ENDPOINT}/_iceberg/v1/wh/namespaces/a%1Fb/tables", body=body)
    assert create.path.endswith("/a%1Fb/tables")
    assert verify(create).access_key == ACCESS_KEY
    with pytest.raises(SignatureRejected, match="signature does not match"):
        verify(replace(create, body=body.replace(b'"t"', b'"u"')))


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE"])
def test_unsigned_payload_is_accepted_without_a_body(method: str) -> None:
    wire = botocore_signed(
        method, "/_iceberg/v1/wh/namespaces/n", headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"}
    )
    assert verify(wire).access_key == ACCESS_KEY


@pytest.mark.parametrize("declared", ["UNSIGNED-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                                      "STREAMING-UNSIGNED-PAYLOAD-TRAILER"])  # fmt: skip
def test_a_body_whose_hash_is_not_signed_is_refused(declared: str) -> None:
    """A captured request replayed within the skew window could otherwise carry another body."""
    wire = botocore_signed(
        "POST",
        "/_iceberg/v1/wh/namespaces",
        b'{"namespace": ["n"]}',
        headers={"X-Amz-Content-SHA256": declared},
    )
    error = refused(wire, f"x-amz-content-sha256 is {declared} but the request has a body")
    assert "sign the body's SHA-256" in error.message
    refused(replace(wire, body=b'{"namespace": ["other"]}'), "the request has a body")


class JavaSigV4(SigV4Auth):
    """Iceberg's Java `RESTSigV4AuthSession`: the AWS SDK's `Aws4Signer` with SHA-256 checksum
    params sends (and signs) the body's SHA-256 in base64 in `x-amz-content-sha256`, while its
    canonical request ends with the hex digest, as if the header were not there."""

    def canonical_request(self, request: AWSRequest) -> str:
        lines = super().canonical_request(request).split("\n")
        lines[-1] = hashlib.sha256(request.body or b"").hexdigest()
        return "\n".join(lines)


def java_signed(path: str, body: bytes, declared: str) -> Wire:
    request = AWSRequest(
        method="POST", url=ENDPOINT + path, data=body, headers={"x-amz-content-sha256": declared}
    )
    JavaSigV4(Credentials(ACCESS_KEY, SECRET), "s3tables", "local").add_auth(request)
    prepared = request.prepare()
    sent = {"Host": urlsplit(prepared.url).netloc, **dict(prepared.headers.items())}
    return Wire("POST", path, "", sent, body)


def test_the_java_clients_base64_payload_hash_verifies_and_binds_the_body() -> None:
    body = json.dumps({"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]})
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    wire = java_signed("/_iceberg/v1/wh/namespaces/n/tables/t", body.encode(), digest)
    assert "x-amz-content-sha256" in wire.headers["Authorization"]  # signed, as Java signs it
    assert verify(wire).access_key == ACCESS_KEY
    refused(
        replace(wire, body=body.replace('"b"', '"c"').encode()),
        "does not match the SHA-256 of the request body",
    )
    other = base64.b64encode(hashlib.sha256(b"another body").digest()).decode()
    refused(java_signed("/_iceberg/v1/wh/namespaces", body.encode(), other), "does not match the SHA-256")


def test_a_declared_payload_hash_that_matches_the_body_verifies() -> None:
    body = b'{"namespace": ["n"]}'
    wire = botocore_signed(
        "POST",
        "/_iceberg/v1/wh/namespaces",
        body,
        headers={"x-amz-content-sha256": hashlib.sha256(body).hexdigest()},
    )
    assert verify(wire).access_key == ACCESS_KEY


# --- refused ---------------------------------------------------------------------------------------------


def refused(wire: Wire, match: str, **options: Any) -> SignatureRejected:
    with pytest.raises(SignatureRejected, match=match) as caught:
        verify(wire, **options)
    error = caught.value
    assert error.status_code == 403
    assert SECRET not in error.message
    return error


BODY = json.dumps({"namespace": ["n"], "properties": {"owner": "me"}}).encode()


@pytest.fixture
def post() -> Wire:
    return botocore_signed("POST", "/_iceberg/v1/wh/namespaces?x=1", BODY, headers={"X-Custom": "a"})


def test_a_changed_body_is_refused(post: Wire) -> None:
    error = refused(replace(post, body=BODY.replace(b"me", b"you")), "signature does not match")
    # The client's string to sign ends with this hash; the signature we expected is not told.
    assert error.canonical_request is not None
    assert hashlib.sha256(error.canonical_request.encode()).hexdigest() in error.message
    signature = post.headers["Authorization"].rsplit("Signature=", 1)[1]
    assert signature not in error.message


def test_a_changed_query_is_refused(post: Wire) -> None:
    refused(replace(post, query="x=2"), "signature does not match")
    refused(replace(post, query="x=1&y=2"), "signature does not match")


def test_a_changed_path_is_refused(post: Wire) -> None:
    refused(replace(post, path="/_iceberg/v1/other/namespaces"), "signature does not match")
    # The decoded path is not what was signed: the server must pass the raw one.
    encoded = botocore_signed("GET", "/_iceberg/v1/wh/namespaces/a%1Fb")
    refused(replace(encoded, path="/_iceberg/v1/wh/namespaces/a\x1fb"), "signature does not match")


def test_a_changed_method_or_signed_header_is_refused(post: Wire) -> None:
    refused(replace(post, method="PUT"), "signature does not match")
    refused(post.with_header("X-Custom", "b"), "signature does not match")
    refused(post.with_header("Host", "evil.test:8080"), "signature does not match")


def test_a_header_that_is_not_signed_may_change(post: Wire) -> None:
    assert verify(post.with_header("User-Agent", "another")).access_key == ACCESS_KEY


def test_a_wrong_secret_is_refused() -> None:
    refused(botocore_signed("GET", "/_iceberg/v1/config", secret="guessed"), "signature does not match")


def test_an_unknown_access_key_is_refused() -> None:
    refused(
        botocore_signed("GET", "/_iceberg/v1/config", access_key="AKNOBODY"), "unknown access key 'AKNOBODY'"
    )


def test_a_signature_for_another_service_is_refused() -> None:
    wire = botocore_signed("GET", "/_iceberg/v1/config", service="s3")
    refused(wire, "names service 's3'.*signing name is 's3tables'")


def test_a_scope_date_other_than_the_request_date_is_refused(post: Wire) -> None:
    day = post.headers["X-Amz-Date"][:8]
    other = "19990101"
    moved = post.headers["Authorization"].replace(f"/{day}/", f"/{other}/")
    refused(post.with_header("Authorization", moved), f"scope's date {other} is not the request's date {day}")


@pytest.mark.parametrize(("server_ahead_by", "direction"), [(1000, "behind"), (-1000, "ahead of")])
def test_a_request_outside_the_skew_window_is_refused(
    post: Wire, server_ahead_by: int, direction: str
) -> None:
    # The server's clock is moved instead of the client's: the signature stays botocore's own.
    now = time.time() + server_ahead_by
    refused(post, f"seconds {direction} the server's clock, beyond the 900 seconds", now=now)
    assert verify(post, now=time.time() + 600).access_key == ACCESS_KEY
    refused(post, "beyond the 60 seconds", now=time.time() + 120, max_skew_seconds=60)


def test_a_missing_authorization_header_is_refused(post: Wire) -> None:
    refused(post.without_header("Authorization"), "not signed: no Authorization header")


@pytest.mark.parametrize(
    ("authorization", "match"),
    [
        ("Bearer token", "not AWS4-HMAC-SHA256"),
        ("AWS4-HMAC-SHA256", "malformed Authorization header"),
        (
            "AWS4-HMAC-SHA256 Credential=AK/20250101/local/s3tables/aws4_request",
            "no Signature or SignedHeaders",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AK/20250101/local/s3tables/aws4_request, SignedHeaders=host, "
            "Signature=" + "0" * 64 + ", Extra=1",
            "expected Credential",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AK/20250101/local/s3tables, SignedHeaders=host, Signature="
            + "0" * 64,
            "Credential must be",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AK/20250101/local/s3tables/aws4_request, SignedHeaders=Host, "
            "Signature=" + "0" * 64,
            "SignedHeaders must be lowercase",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AK/20250101/local/s3tables/aws4_request, SignedHeaders=host, "
            "Signature=xyz",
            "64 hexadecimal digits",
        ),
    ],
)
def test_a_malformed_authorization_header_is_refused(post: Wire, authorization: str, match: str) -> None:
    refused(post.with_header("Authorization", authorization), match)


def test_authorization_components_without_spaces_after_commas_verify(post: Wire) -> None:
    squeezed = post.headers["Authorization"].replace(", ", ",")
    assert verify(post.with_header("Authorization", squeezed)).access_key == ACCESS_KEY


def test_an_empty_region_is_refused(post: Wire) -> None:
    emptied = post.headers["Authorization"].replace("/local/", "//")
    refused(post.with_header("Authorization", emptied), "names no region")


def test_host_and_the_date_must_be_signed_and_present(post: Wire) -> None:
    authorization = post.headers["Authorization"]
    refused(
        post.with_header("Authorization", authorization.replace("host;", "")), "host header must be signed"
    )
    refused(
        post.with_header("Authorization", authorization.replace(";x-amz-date", "")), "x-amz-date header must"
    )
    refused(post.without_header("Host"), "signed headers missing from the request: host")
    refused(post.without_header("X-Amz-Date"), r"no x-amz-date \(or Date\) header")
    refused(post.with_header("X-Amz-Date", "yesterday"), "malformed x-amz-date")


def test_a_payload_hash_that_does_not_match_the_body_is_refused() -> None:
    wire = botocore_signed(
        "POST", "/_iceberg/v1/wh/namespaces", BODY, headers={"x-amz-content-sha256": EMPTY_SHA256}
    )
    refused(wire, "x-amz-content-sha256 does not match the SHA-256 of the request body")
    streaming = botocore_signed(
        "POST",
        "/_iceberg/v1/wh/namespaces",
        BODY,
        headers={"x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
    )
    refused(
        streaming, "x-amz-content-sha256 is STREAMING-AWS4-HMAC-SHA256-PAYLOAD but the request has a body"
    )
    for declared in ("sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", base64.b64encode(b"short").decode()):
        without_body = botocore_signed(
            "DELETE", "/_iceberg/v1/wh/namespaces/n", headers={"x-amz-content-sha256": declared}
        )
        refused(without_body, "unsupported x-amz-content-sha256")


def test_a_path_that_is_not_utf8_is_refused(post: Wire) -> None:
    with pytest.raises(SignatureRejected, match="path is not UTF-8"):
        verify_request("GET", b"/\xff", "", post.headers, b"", SECRETS.get)
