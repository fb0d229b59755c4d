"""SigV4 verification of signed HTTP requests, for the writable Iceberg catalog (AIStor Tables).

Catalog clients (pyiceberg's `RestCatalog` with `rest.sigv4-enabled`, the Java
client's SigV4 signer in Spark and Trino) sign every request with AWS Signature
Version 4 under the signing name `s3tables` and a region of their choosing.
`verify_request` rebuilds the canonical request exactly as botocore's `SigV4Auth`
does for a service other than S3 and checks the `Authorization` header's
signature against the secret of the access key it names:

* the path is the one sent on the wire, still percent-encoded (ASGI's
  `scope["raw_path"]`, not the decoded `scope["path"]`); like the signer, we
  drop dot segments and empty segments and percent-encode it once more, which
  is why an `%1F` in a namespace signs as `%251F`;
* the query is decoded (`+` as a space, as pyiceberg's `parse_qsl` and Java's
  `URLDecoder` read it) and encoded again as RFC 3986 asks, pairs sorted;
* headers are those the client lists in `SignedHeaders`, values trimmed and
  runs of spaces squeezed, repeated headers joined with commas;
* the payload hash is the body's SHA-256, which a request with a body must
  sign: `x-amz-content-sha256`, when sent, must name it (in hex, the header's
  value then signed as sent; or in base64, as Iceberg's Java signer sends it
  while signing the hex digest). `UNSIGNED-PAYLOAD` (signed as such) is taken
  only without a body, and aws-chunked `STREAMING-...` payloads never: else a
  request captured and replayed within the skew window could carry another body.

A request is refused with `SignatureRejected` (403), whose message says what is
wrong and never holds the secret or the signature we expected.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from time import time
from urllib.parse import quote, unquote_to_bytes

from share_store.errors import SignatureRejected

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
#: aws-chunked bodies (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, ...): S3's.
_STREAMING = "STREAMING-"
AMZ_DATE_FORMAT = "%Y%m%dT%H%M%SZ"
DEFAULT_MAX_SKEW_SECONDS = 900  # AWS's own window

_HEX_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_BASE64_SHA256 = re.compile(r"[A-Za-z0-9+/]{43}=")
_AMZ_DATE = re.compile(r"\d{8}T\d{6}Z")
_SCOPE_DATE = re.compile(r"\d{8}")


@dataclass(frozen=True)
class SignedBy:
    """Who signed a request that verified: the access key, and the region the client signed for."""

    access_key: str
    region: str


@dataclass(frozen=True)
class _Authorization:
    access_key: str
    scope_date: str
    region: str
    service: str
    signed_headers: str
    signature: str


def verify_request(
    method: str,
    path: str | bytes,
    query: str | bytes,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    body: bytes,
    secret_for: Callable[[str], str | None],
    *,
    service: str = "s3tables",
    now: float | None = None,
    max_skew_seconds: int = DEFAULT_MAX_SKEW_SECONDS,
) -> SignedBy:
    """Who signed this request, if its SigV4 `Authorization` header holds; `SignatureRejected` if not.

    `path` is the RAW path as sent on the wire, percent-encoding kept (ASGI's
    `scope["raw_path"]`), and `query` the raw query string without its `?`
    (`scope["query_string"]`); bytes are taken as UTF-8. `headers` are the
    request's as received, a mapping or (name, value) pairs, names in any case;
    a repeated header comes in as pairs, or joined with commas. `secret_for`
    answers an access key's secret, `None` for a key it does not know. `now`
    (seconds since the epoch, the clock by default) is what the request's time
    must be within `max_skew_seconds` of.
    """
    fields = _header_fields(headers)
    authorization = _parse_authorization(fields.get("authorization"))
    if authorization.service != service:
        raise SignatureRejected(
            f"the credential scope names service {authorization.service!r}; "
            f"this endpoint's signing name is {service!r}"
        )
    if not authorization.region:
        raise SignatureRejected("the credential scope names no region")

    signed_names = authorization.signed_headers.split(";")
    stamp, signed_at = _request_time(fields, signed_names)
    if authorization.scope_date != stamp[:8]:
        raise SignatureRejected(
            f"the credential scope's date {authorization.scope_date} is not the request's date {stamp[:8]}"
        )
    _check_skew(stamp, signed_at, time() if now is None else now, max_skew_seconds)

    if "host" not in signed_names:
        raise SignatureRejected("the host header must be signed (it is not in SignedHeaders)")
    missing = [name for name in signed_names if name not in fields]
    if missing:
        raise SignatureRejected(f"signed headers missing from the request: {', '.join(missing)}")
    payload_hash = _payload_hash(fields.get("x-amz-content-sha256"), body)

    secret = secret_for(authorization.access_key)
    if secret is None:
        raise SignatureRejected(f"unknown access key {authorization.access_key!r}")

    canonical = "\n".join(
        [
            method.upper(),
            canonical_uri(path),
            canonical_query(query),
            "".join(f"{name}:{fields[name]}\n" for name in signed_names),
            authorization.signed_headers,
            payload_hash,
        ]
    )
    scope = f"{authorization.scope_date}/{authorization.region}/{service}/aws4_request"
    canonical_hash = hashlib.sha256(canonical.encode()).hexdigest()
    string_to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{canonical_hash}"
    key = _signing_key(secret, authorization.scope_date, authorization.region, service)
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, authorization.signature.lower()):
        # The canonical request's hash is the last line of the client's string to sign
        # (botocore logs it at DEBUG): equal hashes point at the secret, different ones at encoding.
        raise SignatureRejected(
            "the signature does not match: the request was changed after signing, or signed with "
            f"another secret than access key {authorization.access_key!r}'s "
            f"(the server's canonical request hashes to {canonical_hash})",
            canonical_request=canonical,
        )
    return SignedBy(access_key=authorization.access_key, region=authorization.region)


def canonical_uri(path: str | bytes) -> str:
    """The canonical URI of a raw path, as botocore's `SigV4Auth._normalize_url_path` makes it."""
    if isinstance(path, bytes):
        path = _utf8(path, "path")
    return quote(_remove_dot_segments(path), safe="/~")


def canonical_query(query: str | bytes) -> str:
    """The canonical query string of a raw one: pairs decoded, encoded as RFC 3986 asks, sorted."""
    if isinstance(query, bytes):
        query = _utf8(query, "query string")
    pairs = []
    for piece in query.split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        pairs.append((_requote(name), _requote(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _requote(text: str) -> str:
    # Decoded to bytes, not str, so that bytes that are not UTF-8 sign as themselves.
    return quote(unquote_to_bytes(text.replace("+", " ")), safe="-_.~")


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise SignatureRejected(f"the request's {what} is not UTF-8") from None


def _remove_dot_segments(path: str) -> str:
    # botocore.utils.normalize_url_path: RFC 3986 5.2.4, and AWS drops empty segments too.
    if not path:
        return "/"
    output: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if output:
                output.pop()
        elif segment and segment != ".":
            output.append(segment)
    first = "/" if path[0] == "/" else ""
    last = "/" if path[-1] == "/" and output else ""
    return first + "/".join(output) + last


def _header_fields(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Header values by lowercase name, trimmed as SigV4 trims them, repeated ones joined by commas."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    fields: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        # str.split() with no separator, as botocore's `_header_value` squeezes whitespace.
        trimmed = " ".join(value.split())
        fields[key] = f"{fields[key]},{trimmed}" if key in fields else trimmed
    return fields


def _parse_authorization(header: str | None) -> _Authorization:
    if header is None:
        raise SignatureRejected(
            "the request is not signed: no Authorization header (sign it with AWS SigV4, "
            "signing name s3tables)"
        )
    algorithm, _, rest = header.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise SignatureRejected(f"the Authorization header is not {ALGORITHM} (SigV4)")
    components: dict[str, str] = {}
    # Clients put ", " between components; some leave the space out.
    for component in rest.split(","):
        name, equals, value = component.strip().partition("=")
        if not equals or name not in ("Credential", "SignedHeaders", "Signature") or name in components:
            raise SignatureRejected(
                "malformed Authorization header: expected Credential=…, SignedHeaders=…, Signature=…"
            )
        components[name] = value.strip()
    if len(components) != 3:
        absent = sorted({"Credential", "SignedHeaders", "Signature"} - components.keys())
        raise SignatureRejected(f"malformed Authorization header: no {' or '.join(absent)}")

    # rsplit: the four scope parts never hold a "/", so whatever is left is the access key.
    scope = components["Credential"].rsplit("/", 4)
    if len(scope) != 5 or not scope[0] or scope[4] != "aws4_request" or not _SCOPE_DATE.fullmatch(scope[1]):
        raise SignatureRejected(
            "malformed Authorization header: Credential must be "
            "ACCESS_KEY/YYYYMMDD/REGION/SERVICE/aws4_request"
        )
    signed_headers = components["SignedHeaders"]
    if not signed_headers or any(not name or name != name.lower() for name in signed_headers.split(";")):
        raise SignatureRejected(
            "malformed Authorization header: SignedHeaders must be lowercase header names joined by ';'"
        )
    if not _HEX_SHA256.fullmatch(components["Signature"]):
        raise SignatureRejected("malformed Authorization header: Signature must be 64 hexadecimal digits")
    access_key, scope_date, region, service, _ = scope
    return _Authorization(access_key, scope_date, region, service, signed_headers, components["Signature"])


def _request_time(fields: Mapping[str, str], signed_names: list[str]) -> tuple[str, datetime]:
    """The request's time as the string to sign states it (YYYYMMDDTHHMMSSZ), and as a moment.

    `x-amz-date` when sent, else `Date` (as botocore falls back to it); the one
    used must be signed, or a replay could carry a fresh time.
    """
    amz_date = fields.get("x-amz-date")
    if amz_date is not None:
        if "x-amz-date" not in signed_names:
            raise SignatureRejected("the x-amz-date header must be signed (it is not in SignedHeaders)")
        if not _AMZ_DATE.fullmatch(amz_date):
            raise SignatureRejected(f"malformed x-amz-date {amz_date!r}: expected YYYYMMDDTHHMMSSZ")
        try:
            moment = datetime.strptime(amz_date, AMZ_DATE_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            raise SignatureRejected(f"malformed x-amz-date {amz_date!r}: not a date") from None
        return amz_date, moment
    date = fields.get("date")
    if date is None:
        raise SignatureRejected("the request has no x-amz-date (or Date) header")
    if "date" not in signed_names:
        raise SignatureRejected("the date header must be signed (it is not in SignedHeaders)")
    try:
        moment = parsedate_to_datetime(date)
    except (TypeError, ValueError):
        raise SignatureRejected(f"malformed Date header {date!r}") from None
    if moment.tzinfo is None:  # "-0000": UTC, origin unknown
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime(AMZ_DATE_FORMAT), moment


def _check_skew(stamp: str, signed_at: datetime, now: float, max_skew_seconds: int) -> None:
    skew = signed_at.timestamp() - now
    if abs(skew) > max_skew_seconds:
        direction = "ahead of" if skew > 0 else "behind"
        raise SignatureRejected(
            f"the request time {stamp} is {abs(skew):,.0f} seconds {direction} the server's clock, "
            f"beyond the {max_skew_seconds} seconds allowed (a clock out of step, or a replayed request)"
        )


def _payload_hash(declared: str | None, body: bytes) -> str:
    """The payload hash the canonical request ends with, from `x-amz-content-sha256` and the body.

    A body is always bound to the signature: the header, when sent, must name the body's SHA-256
    (hex as botocore and AWS document it, or base64 as Iceberg's Java signer sends it). Without
    that, a request captured and replayed within the skew window could carry another body (another
    commit). `UNSIGNED-PAYLOAD` is for requests without a body (GET, HEAD, DELETE) only.
    """
    actual = hashlib.sha256(body).hexdigest()
    if declared is None:
        return actual  # botocore's SigV4Auth for a service other than S3 (pyiceberg) signs this
    if _HEX_SHA256.fullmatch(declared):
        if declared.lower() != actual:
            raise SignatureRejected("x-amz-content-sha256 does not match the SHA-256 of the request body")
        return declared  # the signer ends its canonical request with the header's value, as sent
    digest = _base64_sha256(declared)
    if digest is not None:
        # The AWS SDK for Java's Aws4Signer with SHA-256 checksum params (Iceberg's
        # RESTSigV4AuthSession) sends the digest in base64 but signs the hex one.
        if digest.hex() != actual:
            raise SignatureRejected("x-amz-content-sha256 does not match the SHA-256 of the request body")
        return actual
    if declared == UNSIGNED_PAYLOAD or declared.startswith(_STREAMING):
        if body:
            raise SignatureRejected(
                f"x-amz-content-sha256 is {declared[:64]} but the request has a body: sign the body's "
                "SHA-256 (send it in hex in x-amz-content-sha256, or leave the header out), so that "
                "the signature covers the body and a replayed request cannot carry another one"
            )
        if declared == UNSIGNED_PAYLOAD:
            return declared
    raise SignatureRejected(
        f"unsupported x-amz-content-sha256 {declared[:40]!r}: the body's SHA-256 in hex (or base64), "
        f"or {UNSIGNED_PAYLOAD} for a request without a body"
    )


def _base64_sha256(declared: str) -> bytes | None:
    """The 32 bytes a standard base64 SHA-256 (44 characters) names; None for anything else."""
    if not _BASE64_SHA256.fullmatch(declared):
        return None
    try:
        return base64.b64decode(declared, validate=True)
    except binascii.Error:
        return None


def _signing_key(secret: str, day: str, region: str, service: str) -> bytes:
    key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key
