"""S3 requests sent by a URL signed beforehand, through urllib3 rather than botocore.

Where botocore's own work showed in the timings: the server's own GET, PUT and
single DELETE of an object (`object_request`), and listing pages (`list_page`),
read whole (`listing_page`) or for their keys in a check for missing files
(`listed_keys`). All have the retries (`max_attempts`, on no answer or a 5xx;
every request here is idempotent) and timeouts of `S3Storage`'s client, and its
answers' meanings (`s3_errors`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import unquote_plus

import urllib3

from share_store.errors import StorageUnavailable
from share_store.storage.base import ObjectInfo
from share_store.storage.s3_errors import (
    UNREACHABLE,
    Meaning,
    Rule,
    client_error,
    permission_denied,
    storage_error,
    unavailable,
)

_KEY = re.compile(rb"<Key>([^<]*)</Key>")
_TRUNCATED = re.compile(rb"<IsTruncated>\s*true\s*</IsTruncated>")
_LISTING = re.compile(rb"<ListBucketResult[\s>]")
_CONTENTS = re.compile(rb"<Contents>(.*?)</Contents>", re.DOTALL)
_FIELD_SIZE = re.compile(rb"<Size>\s*(\d+)\s*</Size>")
_FIELD_MODIFIED = re.compile(rb"<LastModified>([^<]*)</LastModified>")
_COMMON_PREFIX = re.compile(rb"<CommonPrefixes>\s*<Prefix>([^<]*)</Prefix>\s*</CommonPrefixes>")
_NEXT_TOKEN = re.compile(rb"<NextContinuationToken>([^<]*)</NextContinuationToken>")
_ENCODING_URL = re.compile(rb"<EncodingType>\s*url\s*</EncodingType>", re.IGNORECASE)


class NoSuchBucket(Exception):
    """A listing's bucket does not exist: every key looked for is missing."""


def object_request(
    http: urllib3.PoolManager, timeout: urllib3.Timeout, attempts: int, method: str, url: str,
    body: bytes | None, operation: str, *rules: Rule, denied: Meaning = permission_denied,
) -> bytes | None:  # fmt: skip
    """One GET, PUT or DELETE of an object by `url`, its answer mapped as botocore's: the body
    answered (as stored: never decompressed, whatever its `Content-Encoding`), or None where
    one of `rules` says an answer is no failure.

    A catalog commit waits for its metadata file's PUT: botocore took 2.8 ms for an 8 KB one
    and 7.9 ms for 660 KB against SeaweedFS on loopback, this 1.9 and 6.0 ms; a one-key
    DeleteObjects 1.9 ms, a DELETE 0.8 ms (medians; botocore's hooks, endpoint rules, the
    body's SHA-256 and CRC32, and the parsing of its answer go). A never-read table's first
    reader waits for its commits' GETs: a 28 MB commit took botocore 38 to 50 ms, 13 of them
    checking the CRC32 the store sends, this 27 to 33 (TCP's checksums, and TLS where the store
    is remote, guard the bytes, as they did for boto3 before 1.36; a commit is then parsed
    strictly).
    """
    for attempt in range(1, attempts + 1):
        try:
            response = http.request(
                method, url, body=body, retries=False, timeout=timeout, decode_content=False
            )
        except urllib3.exceptions.HTTPError as error:
            if attempt < attempts:
                continue
            raise StorageUnavailable(UNREACHABLE) from error
        if 200 <= response.status < 300:
            data: bytes = response.data
            return data
        answer = client_error(response.status, response.data, operation)
        failure = storage_error(answer, *rules, denied=denied)
        if isinstance(failure, StorageUnavailable) and response.status >= 500 and attempt < attempts:
            continue  # a failing store may well answer the same request a moment later
        if failure is None:  # no failure here
            return None
        if failure is answer:  # no meaning for the storage: raised as botocore reports it
            raise failure
        raise failure from answer
    raise StorageUnavailable(UNREACHABLE)


def listed_keys(page: Callable[[str | None], bytes], start_after: str | None, last: str) -> set[str]:
    """Keys after `start_after` up to `last`, both as keys sort, from the pages `page` lists after a key.

    Pages are fetched by a presigned URL and their keys picked out of the XML
    by a pattern: botocore's parsing of a 1,000-key page takes longer than
    the page does to arrive, and holds the GIL, so parallel pages would wait
    on each other.
    """
    found: set[str] = set()
    while True:
        listed = page(start_after)
        keys = [unquote_plus(key.decode()) for key in _KEY.findall(listed)]
        for key in keys:
            if key > last:
                return found
            found.add(key)
        # A range's last key listed: the next page could only hold keys after it.
        if not keys or keys[-1] >= last or not _TRUNCATED.search(listed):
            return found
        start_after = keys[-1]


def list_page(http: urllib3.PoolManager, timeout: urllib3.Timeout, attempts: int, url: str) -> bytes:
    """One ListObjectsV2 page's XML (keys URL-encoded) by `url`, errors as the storage's own."""
    for attempt in range(1, attempts + 1):
        try:
            response = http.request("GET", url, retries=False, timeout=timeout)
        except urllib3.exceptions.HTTPError as error:
            if attempt < attempts:
                continue
            raise StorageUnavailable(UNREACHABLE) from error
        if response.status == 200:
            return response.data
        # Mapped as botocore's answers are, but stricter: a 403 whatever its code is a
        # refusal, and any other answer that is not a page is the store failing to list.
        answer = client_error(response.status, response.data, "ListObjectsV2")
        no_bucket, refused = ({"NoSuchBucket"}, NoSuchBucket()), ({403}, permission_denied)
        failure = storage_error(answer, no_bucket, refused, otherwise=unavailable)
        assert failure is not None  # every meaning here is an error
        if isinstance(failure, StorageUnavailable) and response.status >= 500 and attempt < attempts:
            continue  # a failing store may well answer the same request a moment later
        raise failure from answer
    raise StorageUnavailable(UNREACHABLE)


@dataclass(frozen=True)
class ListingPage:
    """One ListObjectsV2 page: its objects, its common prefixes (folders), and the token of the
    next page, None on the last."""

    objects: list[ObjectInfo]
    prefixes: list[str]
    next_token: str | None


def listing_page(xml: bytes) -> ListingPage:
    """A ListObjectsV2 page's fields picked out of its XML by patterns, as `listed_keys` does:
    botocore's parser of its shapes, in Python, took a log's first listing in a process 20 ms,
    and 2 ms more each later; and no XML parser meets what the store answers (entities are
    decoded as XML has them). Keys and prefixes are URL-decoded when the store says it encoded
    them (`EncodingType`), as asked; a store that ignores the parameter sends them as they are."""
    if _LISTING.search(xml) is None:
        raise ValueError("not a ListObjectsV2 page")
    encoded = _ENCODING_URL.search(xml) is not None

    def text(raw: bytes) -> str:
        value = html.unescape(raw.decode())
        return unquote_plus(value) if encoded else value

    objects = []
    for block in _CONTENTS.findall(xml):
        key, size, modified = (
            _KEY.search(block),
            _FIELD_SIZE.search(block),
            _FIELD_MODIFIED.search(block),
        )
        if key is None or modified is None:
            raise ValueError("a listed object without its key or time")
        moment = datetime.fromisoformat(modified.group(1).decode().strip())
        objects.append(
            ObjectInfo(
                key=text(key.group(1)),
                size=int(size.group(1)) if size else 0,
                modified_ms=int(moment.timestamp() * 1000),
            )
        )
    prefixes = [text(prefix) for prefix in _COMMON_PREFIX.findall(xml)]
    token = _NEXT_TOKEN.search(xml)
    truncated = _TRUNCATED.search(xml) is not None
    return ListingPage(
        objects, prefixes, html.unescape(token.group(1).decode()) if truncated and token else None
    )
