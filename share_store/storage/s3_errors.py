"""What an S3 store's failures mean to `S3Storage`, decided in one place.

botocore reports a store's answer as a `ClientError` (an S3 code, or for a HEAD, which has
no body, the bare status) and a failure to get one (no connection, a timeout, a response
cut short) as a `BotoCoreError`. `s3_errors` turns both into the storage's own errors, as
httpx's `map_httpcore_exceptions` does for httpcore's: the common meanings are here, and a
call passes rules only where an answer means something else to it (a HEAD's 404 is "no
bucket", not a failure). `S3Storage`'s hand-written listing, which reads its statuses
itself, makes them the same `ClientError` (`client_error`) and maps them through
`storage_error` too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from share_store.errors import StorageUnavailable, TableFilesMissing
from share_store.outages import client_error_is_outage

UNREACHABLE = "object storage is unreachable; try again later"
#: Codes saying the store refuses our keys, or refuses them this bucket or object.
DENIED = frozenset({"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden"})
#: Codes saying an object (or its bucket) is not there.
ABSENT = frozenset({"NoSuchKey", "404", "NoSuchBucket"})
#: A bucket's HEAD answered with these codes is no bucket.
NO_BUCKET = frozenset({"404", "NoSuchBucket"})
#: A bucket's HEAD answered with these codes, or these statuses whatever the code, means the
#: bucket is there, though not for us to read (403) or not in this region (301). A HEAD has
#: no body: the codes are often bare statuses.
ELSEWHERE: frozenset[str | int] = frozenset(
    {"301", "PermanentRedirect", "403", "Forbidden", "AccessDenied", 301, 403}
)

#: What an answer means to one call: the error raised instead, or a function of the answer
#: making it, or None: no failure, the `with` block ends there and the call goes on after it.
Meaning = BaseException | Callable[[ClientError], BaseException] | None
#: A call's own meaning for the answers it names: S3 codes (str) and HTTP statuses (int).
Rule = tuple[Collection[str | int], Meaning]

_ERROR_CODE = re.compile(rb"<Code>([^<]*)</Code>")


def error_code(error: ClientError) -> str | None:
    """The S3 error code of a botocore error."""
    code = error.response.get("Error", {}).get("Code")
    return None if code is None else str(code)


def permission_denied(error: ClientError) -> BaseException:
    """Storage refusing us is the reference server's "permission denied", never a 500."""
    return TableFilesMissing("permission denied")


def unavailable(error: ClientError) -> BaseException:
    """Storage failing (5xx even after botocore's retries) is an outage, a 503: the same
    request may well succeed a moment later."""
    return StorageUnavailable(UNREACHABLE)


def unchanged(error: ClientError) -> BaseException:
    """An answer with no meaning for the storage reaches the caller as botocore reported it."""
    return error


def storage_error(
    error: ClientError,
    *rules: Rule,
    denied: Meaning = permission_denied,
    outage: Meaning = unavailable,
    otherwise: Meaning = unchanged,
) -> BaseException | None:
    """The error to raise for a store's answer, or None when the answer is no failure here.

    Looked for in this order: the first of `rules` naming the answer's S3 code, then the
    first naming its HTTP status; failing those, a `DENIED` code means `denied`, a 5xx
    `outage`, and any other answer `otherwise`.
    """
    code = error_code(error)
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    for answer in (code, status):
        for answers, meaning in rules:
            if answer is not None and answer in answers:
                return _made(meaning, error)
    if code in DENIED:
        return _made(denied, error)
    if client_error_is_outage(error):
        return _made(outage, error)
    return _made(otherwise, error)


def _made(meaning: Meaning, error: ClientError) -> BaseException | None:
    return meaning(error) if callable(meaning) else meaning


@contextmanager
def s3_errors(
    *rules: Rule,
    denied: Meaning = permission_denied,
    outage: Meaning = unavailable,
    otherwise: Meaning = unchanged,
) -> Iterator[None]:
    """botocore's errors raised in the block as the storage's own (`storage_error`'s meanings)."""
    try:
        yield
    except ClientError as error:
        mapped = storage_error(error, *rules, denied=denied, outage=outage, otherwise=otherwise)
        if mapped is error:
            raise
        if mapped is not None:
            raise mapped from error
    except BotoCoreError as error:
        # No answer at all: the store (or the way to it) is down, whichever way it failed.
        raise StorageUnavailable(UNREACHABLE) from error


def client_error(status: int, body: bytes, operation: str) -> ClientError:
    """An error answer read by hand, as botocore reports it: the body's S3 code, else the status."""
    code = _ERROR_CODE.search(body)
    error = {"Code": code.group(1).decode() if code else str(status)}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}, operation)
