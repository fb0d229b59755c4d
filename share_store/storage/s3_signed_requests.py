"""S3 requests sent by a URL signed beforehand, through urllib3 rather than botocore.

Two kinds, where botocore's own work showed in the timings: the server's own PUT
and single DELETE of an object (`object_request`), and the listing pages of a
check for missing files (`list_page`, `listed_keys`). Both have the retries
(`max_attempts`, on no answer or a 5xx; every request here is idempotent) and
timeouts of `S3Storage`'s client, and its answers' meanings (`s3_errors`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import unquote_plus

import urllib3

from share_store.errors import StorageUnavailable
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


class NoSuchBucket(Exception):
    """A listing's bucket does not exist: every key looked for is missing."""


def object_request(
    http: urllib3.PoolManager, timeout: urllib3.Timeout, attempts: int, method: str, url: str,
    body: bytes | None, operation: str, *rules: Rule, denied: Meaning = permission_denied,
) -> None:  # fmt: skip
    """One PUT or DELETE of an object by `url`, its answer mapped as botocore's.

    A catalog commit waits for its metadata file's PUT: botocore took 2.8 ms for an 8 KB one
    and 7.9 ms for 660 KB against SeaweedFS on loopback, this 1.9 and 6.0 ms; a one-key
    DeleteObjects 1.9 ms, a DELETE 0.8 ms (medians; botocore's hooks, endpoint rules, the
    body's SHA-256 and CRC32, and the parsing of its answer go).
    """
    for attempt in range(1, attempts + 1):
        try:
            response = http.request(method, url, body=body, retries=False, timeout=timeout)
        except urllib3.exceptions.HTTPError as error:
            if attempt < attempts:
                continue
            raise StorageUnavailable(UNREACHABLE) from error
        if 200 <= response.status < 300:
            return
        answer = client_error(response.status, response.data, operation)
        failure = storage_error(answer, *rules, denied=denied)
        if isinstance(failure, StorageUnavailable) and response.status >= 500 and attempt < attempts:
            continue  # a failing store may well answer the same request a moment later
        if failure is None:  # no failure here
            return
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
