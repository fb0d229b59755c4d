"""The rules of Iceberg REST 1.11's `Idempotency-Key` on the own warehouses' mutations: pure.

A client sends one key (a UUID, 36 characters; the spec asks for UUIDv7) per
mutation and the same key again when it retries it, so that a retry of a commit
whose answer was lost (the connection cut after the server committed) gets the
original answer instead of a 409 for a change that is already in. A key is the
caller's own: it is bound to (caller, method, route, target, SHA-256 of the
body), and the same key with another binding is refused (422), so a key reused
by mistake for another table or body never replays an answer that is not its
request's. What is replayed is a finalized answer: a 2xx, or a 4xx the same
request would get again (`storable`); never a 5xx, nor a refusal of the caller
itself (401, 403, 429), which may answer otherwise a moment later.

The store keeps them (`share_store.catalog.idempotency_keys`) for their
lifetime (`LIFETIME` unless `[warehouses] idempotency_key_minutes` says otherwise),
which `/v1/config` advertises as `idempotency-key-lifetime` (`lifetime_text`, in
minutes: Java's `Duration.parse` reads hours and minutes, never days).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from share_store.errors import InvalidParameter, RateLimited, ShareStoreError

#: The header, as the spec names it.
HEADER = "Idempotency-Key"
#: How long a finalized key answers its replays (and is then removed by maintenance).
LIFETIME = timedelta(minutes=30)
#: The longest lifetime a provider may set (`[warehouses] idempotency_key_minutes`): a week.
MAX_LIFETIME = timedelta(days=7)
#: An in-progress claim older than this is taken over: the process that held it died mid-request
#: (a live one finishes or gives it back well within it: the server's request timeout is 30 s).
CLAIM_LIFETIME = timedelta(minutes=2)
#: How long a request with the key of one in progress waits for it before answering 503.
WAIT_SECONDS = 5.0

#: Any UUID's text form (8-4-4-4-12 hex digits): UUIDv7 is what the spec asks of clients, but a v4
#: key is as unique, and refusing it would only break a client that keeps its keys unique anyway.
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

#: 4xx answers the same request gets again whatever happens meanwhile on the caller's side:
#: malformed (400), missing (404), not allowed (405, 406), conflict (409: the spec names it),
#: gone, failed precondition, wrong media type, unprocessable. Not 401/403 (the caller's proof or
#: policy, which may change), 408/413 (the transport), 429 (a throttle).
DETERMINISTIC_4XX = frozenset({400, 404, 405, 406, 409, 410, 412, 415, 422})
SUCCESSES = frozenset({200, 201, 204})
#: The headers of an answer kept with it: what a client reads off it besides the body.
KEPT_HEADERS = ("content-type", "etag", "cache-control")


class InvalidIdempotencyKey(InvalidParameter):
    """A header that is not a UUID (a 400, before anything else of the request is done)."""


class IdempotencyKeyReused(ShareStoreError):
    """The caller's key names another request already (another route, target or body)."""

    error_code = "INVALID_PARAMETER_VALUE"
    status_code = 422
    iceberg_type = "UnprocessableEntityException"


class KeyInProgress(RateLimited):
    """The key's first request is still running: the client comes back and gets its answer.

    A 503, not a 409: to an Iceberg client a 409 is a commit that lost, which it would refresh
    and redo (the very duplicate a key is there to prevent)."""

    error_code = "TEMPORARILY_UNAVAILABLE"
    status_code = 503


def lifetime_text(lifetime: timedelta) -> str:
    """The lifetime as `/v1/config` advertises it: ISO 8601 in whole minutes (`PT30M`, `PT1440M`),
    the form Java's `Duration.parse` reads (it refuses days, `P7D`)."""
    return f"PT{int(lifetime.total_seconds() // 60)}M"


def parse_key(text: str) -> str:
    """The key of a header, lowercased (a UUID's case means nothing); `InvalidIdempotencyKey` else."""
    if len(text) != 36 or _UUID.fullmatch(text) is None:
        raise InvalidIdempotencyKey(f"{HEADER} must be a UUID (36 characters, UUIDv7 per the spec)")
    return text.lower()


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class Binding:
    """What a key is given for: the caller, and the request (method, route, path and query, body)."""

    caller: str
    method: str
    route: str
    target: str
    body_sha256: str

    def digest(self) -> str:
        """The request's part of the binding, as the store compares it (the caller is its own column)."""
        text = "\n".join((self.method, self.route, self.target, self.body_sha256))
        return hashlib.sha256(text.encode()).hexdigest()


def caller_id(key: str | None) -> str:
    """The store's name of a caller: a catalog user by access key (a user removed and made again
    under the same name has a new key: not the same caller), the provider as `provider`."""
    return "provider" if key is None else f"user:{key}"


def storable(status: int) -> bool:
    """Whether an answer of `status` is finalized: kept and replayed."""
    return status in SUCCESSES or status in DETERMINISTIC_4XX


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: headers[name] for name in KEPT_HEADERS if name in headers}


@dataclass(frozen=True)
class Answer:
    """A finalized answer, as replayed: status, the headers kept, the body's bytes."""

    status: int
    headers: dict[str, str]
    body: bytes


IN_PROGRESS, DONE = "in-progress", "done"


@dataclass(frozen=True)
class KeyRow:
    """A key as the store holds it."""

    binding: str
    claim: str
    status: str
    claimed_at: datetime
    expires_at: datetime
    answer: Answer | None


# What a request with a key finds (`decide`).
CLAIM, REPLAY, REUSED, WAIT = "claim", "replay", "reused", "wait"


def decide(row: KeyRow | None, binding: Binding, now: datetime) -> str:
    """What a request with `binding` does given the key's row: run (`CLAIM`: no row, an expired
    one, or a claim abandoned by a dead process), `REPLAY` the answer, refuse (`REUSED`), or `WAIT`
    for the request in progress."""
    if row is None or row.expires_at <= now:
        return CLAIM
    if row.binding != binding.digest():
        return REUSED
    if row.status == DONE:
        return REPLAY
    return CLAIM if row.claimed_at + CLAIM_LIFETIME <= now else WAIT
