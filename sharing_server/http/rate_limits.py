"""Token-bucket rate limits: per bearer token and for the whole server.

Limits hold per process: with N replicas behind a balancer the global limit
is N times the setting, which is what a provider sizing one replica expects.
Buckets are keyed by a digest of the presented token, checked before any
database work, so a flood with made-up tokens costs one dict lookup each; the
number of buckets kept is bounded. A bearer token's digest is the hash the store
finds the token by, so each token (each token id) has exactly one bucket.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from share_store.authentication.tokens import hash_secret
from sharing_server.auth.bearer import parse_bearer


@dataclass
class Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """Buckets of `rate` requests per second with a burst of `burst`; `rate <= 0` turns it off."""

    def __init__(self, rate: float, burst: float | None = None, max_keys: int = 100_000) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(rate, 1.0)
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, now: float | None = None) -> float:
        """Spend one request; 0 if allowed, else the seconds until one would be."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = Bucket(self.burst, now)
                self._buckets[key] = bucket
                if len(self._buckets) > self.max_keys:
                    self._buckets.popitem(last=False)
            else:
                self._buckets.move_to_end(key)
                bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.updated) * self.rate)
                bucket.updated = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0.0
            return (1.0 - bucket.tokens) / self.rate


class RateLimiter:
    """Recipients' limits (per token, and the server's), and the admin token's own.

    The admin token (`[admin] token_hash`, compared by the digest every bucket is
    keyed by) draws on a bucket of `admin_rps` only, outside the server's limit:
    a provisioning script is neither held to a recipient's rate nor slowed by
    recipients' traffic. Wrong admin tokens are other tokens, and throttled too.
    """

    def __init__(
        self, per_token_rps: float, global_rps: float, admin_rps: float = 0.0, admin_hash: str | None = None
    ) -> None:
        self.per_token = TokenBuckets(per_token_rps)
        self.overall = TokenBuckets(global_rps)
        self.admin = TokenBuckets(admin_rps, max_keys=1)
        self.admin_hash = admin_hash

    def check(self, authorization: str | None) -> tuple[str, float] | None:
        """None if the request may go on, else (which limit, seconds to wait).

        `authorization` is the request's one Authorization header, if it has one.
        """
        key = credential_key(authorization)
        if key is not None and self.admin_hash is not None and hmac.compare_digest(key, self.admin_hash):
            wait = self.admin.take("admin")
            return ("admin", wait) if wait else None
        if key is not None:
            wait = self.per_token.take(key)
            if wait:
                return "token", wait
        wait = self.overall.take("*")
        if wait:
            return "global", wait
        return None


def credential_key(authorization: str | None) -> str | None:
    """The per-token bucket an Authorization header draws on (None without one).

    A bearer token is read as authentication reads it and named by its SHA-256,
    the digest the store looks tokens up by: however the header is spelled, one
    token, one bucket. Other schemes (HTTP Basic at the OAuth token endpoint)
    are keyed by their value with the scheme's case and the spaces after it
    evened out.
    """
    if authorization is None:
        return None
    secret = parse_bearer(authorization)
    if secret is not None:
        return hash_secret(secret)
    scheme, _, value = authorization.partition(" ")
    return hashlib.sha256(f"{scheme.lower()} {value.strip()}".encode()).hexdigest()
