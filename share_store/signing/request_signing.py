"""SigV4 header signing of one S3 object request, for both Iceberg REST remote signers.

Iceberg clients that read (and, for an own warehouse's table, write) through a
remote signer (pyiceberg's `S3V4RestSigner`, the Java client's
`s3.remote-signing-enabled`) build each S3 request without credentials and send
its method, URI and headers to the catalog, which answers the headers that
authorize it and the URI to send them to. The storage keys stay with the server.

What is signed is never the caller's request: the caller's request is parsed into
one operation this module understands, and the request signed is one it builds
from that operation, against the configured store endpoint, in path style (the
addressing the catalogs hand out with `s3.path-style-access`); the answer's URI is
that request's, and clients send it as given. So nothing the caller wrote in its
request reaches the signature unless it is named here:

* the method: `GET`/`HEAD` of one object; for a writer also `PUT` and `DELETE` of
  one object, the steps of its multipart upload, and a batch delete (`POST /{bucket}?delete`),
  whose body is read for every key it names (`batch_deletes`) and whose hash is signed;
* the query: a closed set of parameters per method (`uploads`, `uploadId`,
  `partNumber`), each once, each value checked; nothing else (no listings, ACLs,
  versions, tags);
* the host: the endpoint's own. A virtual-host request (`bucket.host/...`) is
  refused: a store that does not resolve virtual hosts would serve the bucket its
  path names, not the one its host names;
* the path: the bucket and key decode one way only (strict UTF-8, no control
  characters, no `.`/`..`/empty segments, which some stores normalize), and are
  encoded again by this module;
* headers: an allow-list of those that shape one object's bytes (range, content
  type/length/MD5/encoding, conditional writes, checksums, user metadata). Any
  other `x-amz-*` header refuses the request, since a store may honour it
  unsigned (`x-amz-acl`, `x-amz-tagging`, object lock, server-side encryption
  with a key the caller names: this server configures none). `x-amz-copy-source`
  is parsed into the object it copies, which the grant must allow as it allows
  the target (`ObjectRequest.objects`).

A write's body is left out of the signature (`UNSIGNED-PAYLOAD`: the body is the
engine's, never seen here), but for a batch delete's, which names the objects deleted: its
SHA-256 is signed, so the store takes that body only. This is a signing request, not a hot path: botocore's
signer, the reference, does the signing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from share_store.signing.batch_deletes import BatchRefused, deleted_keys

READ_METHODS = frozenset({"GET", "HEAD"})
#: What a writer's engine sends besides reads: objects put and deleted, multipart uploads.
WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"

#: The query parameters each method may carry, as the sets a request's names may form.
QUERIES: dict[str, tuple[frozenset[str], ...]] = {
    "GET": (frozenset(),),
    "HEAD": (frozenset(),),
    "PUT": (frozenset(), frozenset({"partNumber", "uploadId"})),  # a put, or one part's upload
    "POST": (frozenset({"uploads"}), frozenset({"uploadId"})),  # a multipart upload begun or done
    "DELETE": (frozenset(), frozenset({"uploadId"})),  # an object deleted, or an upload aborted
}
MAX_PART_NUMBER = 10_000
#: An upload id as stores make them (base64-like); dot segments refused apart, as in keys.
_UPLOAD_ID = re.compile(r"[A-Za-z0-9._~+/=-]{1,1024}")
#: A header name as HTTP has them (RFC 9110 tokens): no spaces, colons, CR or LF.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")
_BUCKET = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")

#: Headers other than `x-amz-*` that are signed when sent: they shape one object's bytes.
SIGNED_HEADERS = frozenset(
    {"range", "content-type", "content-length", "content-md5", "content-encoding"}
    | {"if-match", "if-none-match"}  # conditional writes
)
#: `x-amz-*` headers that are signed when sent; any other one refuses the request.
AMZ_HEADERS = frozenset(
    {
        "x-amz-checksum-mode",
        "x-amz-checksum-algorithm",
        "x-amz-checksum-type",
        "x-amz-sdk-checksum-algorithm",
        "x-amz-trailer",
        "x-amz-decoded-content-length",
        "x-amz-expected-bucket-owner",
        "x-amz-copy-source-range",
        "x-amz-copy-source-if-match",
        "x-amz-copy-source-if-none-match",
        "x-amz-copy-source-if-modified-since",
        "x-amz-copy-source-if-unmodified-since",
        "x-amz-metadata-directive",
    }
)
AMZ_HEADER_PREFIXES = ("x-amz-checksum-", "x-amz-meta-")
COPY_SOURCE = "x-amz-copy-source"
#: What the signer sets itself, whatever the client sent.
OWN_HEADERS = frozenset(
    {"authorization", "host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
)


class _WriterAuth(S3SigV4Auth):
    """botocore's S3 signer, with a write's body left out of the signature (`UNSIGNED-PAYLOAD`): the
    body is the engine's, never seen here; a read's empty body is hashed as botocore does."""

    def _should_sha256_sign_payload(self, request: AWSRequest) -> bool:
        return request.method in READ_METHODS or bool(request.body)  # a batch delete's body


class SigningRefused(Exception):
    """A request this signer will not sign; the message says why, without secrets."""


@dataclass(frozen=True)
class ObjectRequest:
    """One operation on one object, and the request this module built for it (`uri`, `headers`)."""

    method: str
    bucket: str
    key: str
    uri: str
    headers: dict[str, str]
    #: The object an `x-amz-copy-source` header names (a copy, or a part copied from it).
    copy_source: tuple[str, str] | None = None
    query: tuple[tuple[str, str], ...] = field(default=())
    #: A batch delete's keys (its `key` is empty) and its body, whose hash is signed.
    batch: tuple[str, ...] = ()
    body: bytes | None = None

    @property
    def reads(self) -> bool:
        return self.method in READ_METHODS

    def objects(self) -> list[tuple[str, str]]:
        """Every object the request touches, as (bucket, key): a grant must allow each."""
        if self.batch:
            return [(self.bucket, key) for key in self.batch]
        return [(self.bucket, self.key)] + ([self.copy_source] if self.copy_source else [])


def _endpoint_parts(endpoint: str) -> tuple[str, str, str]:
    parts = urlsplit(endpoint)
    return parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/")


def _decoded(raw: str, what: str) -> str:
    try:
        text = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise SigningRefused(f"the {what} is not UTF-8") from None
    if any(ord(c) < 32 or ord(c) == 127 for c in text) or "\\" in text:
        raise SigningRefused(f"the {what} has control characters or backslashes")
    return text


def _object_name(bucket: str, key: str) -> tuple[str, str]:
    """`bucket` and `key`, if they name one object in one way only."""
    if not _BUCKET.fullmatch(bucket) or not key:
        raise SigningRefused("the request does not name one object")
    if any(segment in ("", ".", "..") for segment in key.split("/")):
        # Some stores resolve such segments, which would let a key that looks like it is under a
        # table's location name an object outside it.
        raise SigningRefused("the request does not name one object")
    return bucket, key


def _query(method: str, raw: str, writes: bool) -> tuple[tuple[str, str], ...]:
    pairs: dict[str, str] = {}
    for part in raw.split("&") if raw else ():
        name, _, value = part.partition("=")
        name, value = _decoded(name, "query"), _decoded(value, "query")
        if name in pairs:
            raise SigningRefused(f"the query names {name!r} twice")
        pairs[name] = value
    if pairs and not writes:
        raise SigningRefused("requests with a query string (listings, versions, ACLs) are not signed")
    if frozenset(pairs) not in QUERIES[method]:
        raise SigningRefused(
            f"a {method} is signed with no query or the steps of a multipart upload only, "
            f"not {', '.join(sorted(pairs)) or 'none'}"
        )
    if pairs.get("uploads"):
        raise SigningRefused("'uploads' takes no value")
    upload = pairs.get("uploadId")
    if upload is not None and not (
        _UPLOAD_ID.fullmatch(upload) and all(part not in ("", ".", "..") for part in upload.split("/"))
    ):
        # A store that joins the id into a path would otherwise resolve `..` in it.
        raise SigningRefused("the upload id is not one a store makes")
    if "partNumber" in pairs:
        number = pairs["partNumber"]
        # At most 5 digits before int(): a long one would hit Python's digit limit.
        digits = number.isascii() and number.isdigit() and len(number) <= 5
        if not (digits and 1 <= int(number) <= MAX_PART_NUMBER):
            raise SigningRefused(f"a part number is 1 to {MAX_PART_NUMBER}")
    return tuple(sorted(pairs.items()))


def _copy_source(value: str) -> tuple[str, str]:
    """The object an `x-amz-copy-source` names (`bucket/key` or `/bucket/key`, URL-encoded)."""
    raw = value.strip()
    if "?" in raw:
        raise SigningRefused("a copy source is signed without a version or any query")
    if "," in raw:
        # A comma is how a repeated header is joined: a store or proxy keeping another of the
        # values than the one checked here would copy another object.
        raise SigningRefused("a copy source names one object, without commas")
    bucket, _, key = raw.removeprefix("/").partition("/")
    return _object_name(_decoded(bucket, "copy source"), _decoded(key, "copy source"))


def _headers(
    method: str, headers: dict[str, list[str]], query: tuple[tuple[str, str], ...]
) -> tuple[dict[str, str], tuple[str, str] | None]:
    kept: dict[str, str] = {}
    source = None
    seen: set[str] = set()
    for name, values in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise SigningRefused("a header name is not an HTTP token")
        lower = name.lower()
        if lower in seen:
            raise SigningRefused(f"the header {lower} is sent twice")
        seen.add(lower)
        if lower in OWN_HEADERS or not values:
            continue
        if len(values) > 1 and (lower == COPY_SOURCE or lower.startswith("x-amz-")):
            raise SigningRefused(f"the header {lower} has several values")
        value = ", ".join(values)
        if any(ord(c) < 32 and c != "\t" for c in value):
            raise SigningRefused(f"the header {lower} has control characters")
        if lower == COPY_SOURCE:
            if method != "PUT":
                raise SigningRefused("a copy source is signed on a PUT only")
            source = _copy_source(value)
        elif lower.startswith("x-amz-"):
            if lower not in AMZ_HEADERS and not lower.startswith(AMZ_HEADER_PREFIXES):
                raise SigningRefused(f"the header {lower} is not one this signer signs")
        elif lower not in SIGNED_HEADERS:
            continue  # not signed: a store gives an unsigned header no say over which object
        kept[lower] = value
    if any(name.startswith("x-amz-copy-source-") for name in kept) and source is None:
        raise SigningRefused("copy conditions are signed with a copy source only")
    return kept, source


def parse_object_request(
    method: str,
    uri: str,
    headers: dict[str, list[str]],
    endpoint: str,
    writes: bool = False,
    body: bytes | None = None,
) -> ObjectRequest:
    """The one operation an S3 request names, if it is a read of one object at `endpoint` (with
    `writes`, also a put, copy or delete of one, a step of its multipart upload, or a batch delete
    with its `body`), and the request built for it; `SigningRefused` for anything else."""
    method = method.upper()
    allowed = READ_METHODS | WRITE_METHODS if writes else READ_METHODS
    if method not in allowed:
        raise SigningRefused(f"only {', '.join(sorted(allowed))} are signed, not {method}")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - a port that is no number raises here, not later
    except ValueError:
        raise SigningRefused("the request's URI cannot be parsed") from None
    scheme, netloc, base_path = _endpoint_parts(endpoint)
    if parts.fragment:
        raise SigningRefused("requests with a fragment are not signed")
    if parts.scheme.lower() != scheme or parts.netloc.lower() != netloc:
        raise SigningRefused(
            "the request is not addressed to this store's endpoint in path style, as the catalog "
            "configures clients"
        )
    if not parts.path.startswith(base_path + "/"):
        raise SigningRefused("the request is not addressed to this store's endpoint")
    raw_bucket, _, raw_key = parts.path[len(base_path) + 1 :].partition("/")
    if writes and method == "POST" and parts.query in ("delete", "delete=") and not raw_key:
        return _batch_delete(f"{scheme}://{netloc}{base_path}", _decoded(raw_bucket, "bucket"), headers, body)
    bucket, key = _object_name(_decoded(raw_bucket, "bucket"), _decoded(raw_key, "key"))
    query = _query(method, parts.query, writes)
    kept, source = _headers(method, headers, query)
    built = f"{scheme}://{netloc}{base_path}/{quote(bucket, safe='')}/{quote(key, safe='/~')}"
    if query:
        built += "?" + "&".join(quote(n, safe="") + (f"={quote(v, safe='')}" if v else "") for n, v in query)
    return ObjectRequest(method, bucket, key, built, kept, source, query)


def _batch_delete(base: str, bucket: str, headers: dict[str, list[str]], body: bytes | None) -> ObjectRequest:
    """A batch delete of the keys its `body` names, each one object, in `bucket`."""
    if body is None:
        raise SigningRefused("a batch delete is signed with its body (the request's `body`)")
    try:
        keys = tuple(_object_name(bucket, key)[1] for key in deleted_keys(body))
    except BatchRefused as error:
        raise SigningRefused(str(error)) from None
    kept, _ = _headers("POST", headers, (("delete", ""),))
    uri = f"{base}/{quote(bucket, safe='')}?delete"
    return ObjectRequest("POST", bucket, "", uri, kept, None, (("delete", ""),), keys, body)


@dataclass(frozen=True)
class HeaderSigner:
    """Signs object requests with one store's credentials, for the address clients reach."""

    region: str
    access_key: str
    secret_key: str
    session_token: str | None = None

    def sign(self, request: ObjectRequest) -> dict[str, list[str]]:
        """The headers to add to `request.uri` (each a list, as the signer protocol carries them)."""
        aws = AWSRequest(
            method=request.method, url=request.uri, headers=dict(request.headers), data=request.body
        )
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
