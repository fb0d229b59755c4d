"""SigV4 header signing of one S3 object request, for the Iceberg REST remote signer.

Iceberg clients that read through a remote signer (pyiceberg's `S3V4RestSigner`,
the Java client's `s3.remote-signing-enabled`) build each S3 request without
credentials and send its method, URI and headers to the catalog, which answers
the headers that authorize it. The storage keys stay with the server; the
recipient only ever holds signatures for the requests it was allowed.

Only what a reader needs is signed: `GET` or `HEAD` of one object, no query
string (no listings, no ACLs, no versions); for a writer of an own warehouse's
table, also `PUT` and `DELETE` of one object and the steps of its multipart
upload (`uploads`, `uploadId`, `partNumber` only), their bodies unsigned
(`UNSIGNED-PAYLOAD`: the body is the engine's). Of the client's headers only
`Range`, which changes what is read but not which object, and its `x-amz-*`
request parameters (such as `x-amz-checksum-mode`), which S3 wants signed
whenever they are sent. This is a signing
request, not a hot path: botocore's signer, the reference, does the work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from share_store.errors import InvalidParameter

READ_METHODS = frozenset({"GET", "HEAD"})
#: What a writer's engine sends besides reads: objects put and deleted, multipart uploads.
WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})
#: The query parameters of multipart uploads, the only ones a write may carry.
MULTIPART_PARAMETERS = frozenset({"uploads", "uploadId", "partNumber"})
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
#: The client's headers that take part in the signature, with its `x-amz-*` ones; others are dropped.
SIGNED_CLIENT_HEADERS = frozenset({"range"})
#: What the signer sets itself, whatever the client sent.
OWN_HEADERS = frozenset({"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"})


def _signed_header(name: str) -> bool:
    name = name.lower()
    return name not in OWN_HEADERS and (name in SIGNED_CLIENT_HEADERS or name.startswith("x-amz-"))


class _WriterAuth(S3SigV4Auth):
    """botocore's S3 signer, with a write's body left out of the signature (`UNSIGNED-PAYLOAD`): the
    body is the engine's, never seen here; a read's empty body is hashed as botocore does."""

    def _should_sha256_sign_payload(self, request: AWSRequest) -> bool:
        return request.method in READ_METHODS


class SigningRefused(Exception):
    """A request this signer will not sign; the message says why, without secrets."""


@dataclass(frozen=True)
class ObjectRequest:
    method: str
    bucket: str
    key: str
    uri: str
    headers: dict[str, str]


def _endpoint_parts(endpoint: str) -> tuple[str, str, str]:
    parts = urlsplit(endpoint)
    return parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/")


def parse_object_request(
    method: str, uri: str, headers: dict[str, list[str]], endpoint: str, writes: bool = False
) -> ObjectRequest:
    """The bucket and key an S3 request URI names, if it is a read of one object at `endpoint` (with
    `writes`, also a put or delete of one, or a step of its multipart upload).

    Both addressing styles are understood: `endpoint/bucket/key` and
    `bucket.endpoint-host/key`. Keys with `.` or `..` segments or empty segments
    are refused: some stores normalize them, which would let a key that looks
    like it is under a table's location name an object outside it.
    """
    method = method.upper()
    allowed = READ_METHODS | WRITE_METHODS if writes else READ_METHODS
    if method not in allowed:
        raise SigningRefused(f"only {', '.join(sorted(allowed))} are signed, not {method}")
    parts = urlsplit(uri)
    scheme, netloc, base_path = _endpoint_parts(endpoint)
    if parts.fragment:
        raise SigningRefused("requests with a fragment are not signed")
    if parts.query and not (writes and _multipart(parts.query)):
        raise SigningRefused("requests with a query string (listings, versions, ACLs) are not signed")
    if method == "POST" and not parts.query:
        raise SigningRefused("a POST is signed only as a step of a multipart upload")
    if parts.scheme.lower() != scheme:
        raise SigningRefused("the request is not addressed to this store's endpoint")
    host = parts.netloc.lower()
    if not parts.path.startswith(base_path + "/"):
        raise SigningRefused("the request is not addressed to this store's endpoint")
    path = parts.path[len(base_path) + 1 :]
    if host == netloc:
        bucket, _, key = path.partition("/")
        bucket = unquote(bucket)
    elif host.endswith("." + netloc):
        bucket, key = host[: -len(netloc) - 1], path
    else:
        raise SigningRefused("the request is not addressed to this store's endpoint")
    key = unquote(key)
    segments = key.split("/")
    if not bucket or not key or any(segment in ("", ".", "..") for segment in segments):
        raise SigningRefused("the request does not name one object")
    kept = {
        name.lower(): ", ".join(values) for name, values in headers.items() if _signed_header(name) and values
    }
    return ObjectRequest(method, bucket, key, uri, kept)


def _multipart(query: str) -> bool:
    names = [pair.partition("=")[0] for pair in query.split("&")]
    return bool(names) and all(name in MULTIPART_PARAMETERS for name in names)


@dataclass(frozen=True)
class HeaderSigner:
    """Signs object reads with one store's credentials, for the address recipients reach."""

    region: str
    access_key: str
    secret_key: str
    session_token: str | None = None

    def sign(self, request: ObjectRequest) -> dict[str, list[str]]:
        """The headers to add to `request` (each a list, as the signer protocol carries them)."""
        aws = AWSRequest(method=request.method, url=request.uri, headers=dict(request.headers))
        auth = _WriterAuth(
            Credentials(self.access_key, self.secret_key, self.session_token), "s3", self.region
        )
        auth.add_auth(aws)
        signed = {
            "Authorization": aws.headers["Authorization"],
            "x-amz-date": aws.headers["X-Amz-Date"],
            "x-amz-content-sha256": aws.headers["X-Amz-Content-SHA256"],
        }
        if self.session_token:
            signed["x-amz-security-token"] = self.session_token
        return {name: [value] for name, value in signed.items()}


def parse_sign_request(raw: bytes) -> tuple[str, str, dict[str, list[str]]]:
    """A remote-signing request's method, URI and headers (name → values), as the Iceberg clients
    send them; `InvalidParameter` for anything else."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise InvalidParameter("the signing request must be a JSON object") from None
    if not isinstance(body, dict):
        raise InvalidParameter("the signing request must be a JSON object")
    method, uri, headers = body.get("method"), body.get("uri"), body.get("headers", {})
    valid_headers = isinstance(headers, dict) and all(
        isinstance(name, str) and isinstance(values, list) and all(isinstance(v, str) for v in values)
        for name, values in headers.items()
    )
    if not isinstance(method, str) or not isinstance(uri, str) or not valid_headers:
        raise InvalidParameter("the signing request needs 'method', 'uri' and 'headers' (name → [values])")
    return method, uri, headers
