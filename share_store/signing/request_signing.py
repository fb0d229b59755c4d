"""SigV4 header signing of one S3 object request, for the Iceberg REST remote signer.

Iceberg clients that read through a remote signer (pyiceberg's `S3V4RestSigner`,
the Java client's `s3.remote-signing-enabled`) build each S3 request without
credentials and send its method, URI and headers to the catalog, which answers
the headers that authorize it. The storage keys stay with the server; the
recipient only ever holds signatures for the requests it was allowed.

Only what a reader needs is signed: `GET` or `HEAD` of one object, no query
string (no listings, no ACLs, no versions), and of the client's headers only
`Range`, which changes what is read but not which object, and its `x-amz-*`
request parameters (such as `x-amz-checksum-mode`), which S3 wants signed
whenever they are sent. This is a signing
request, not a hot path: botocore's signer, the reference, does the work.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

READ_METHODS = frozenset({"GET", "HEAD"})
#: The client's headers that take part in the signature, with its `x-amz-*` ones; others are dropped.
SIGNED_CLIENT_HEADERS = frozenset({"range"})
#: What the signer sets itself, whatever the client sent.
OWN_HEADERS = frozenset({"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"})


def _signed_header(name: str) -> bool:
    name = name.lower()
    return name not in OWN_HEADERS and (name in SIGNED_CLIENT_HEADERS or name.startswith("x-amz-"))


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
    method: str, uri: str, headers: dict[str, list[str]], endpoint: str
) -> ObjectRequest:
    """The bucket and key an S3 request URI names, if it is a read of one object at `endpoint`.

    Both addressing styles are understood: `endpoint/bucket/key` and
    `bucket.endpoint-host/key`. Keys with `.` or `..` segments or empty segments
    are refused: some stores normalize them, which would let a key that looks
    like it is under a table's location name an object outside it.
    """
    method = method.upper()
    if method not in READ_METHODS:
        raise SigningRefused(f"only GET and HEAD are signed, not {method}")
    parts = urlsplit(uri)
    scheme, netloc, base_path = _endpoint_parts(endpoint)
    if parts.query or parts.fragment:
        raise SigningRefused("requests with a query string (listings, versions, ACLs) are not signed")
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
        auth = S3SigV4Auth(
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
