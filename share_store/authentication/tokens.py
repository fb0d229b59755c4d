"""Bearer token secrets: generated once, shown once, stored only as a hash."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "dss_"  # noqa: S105 - a marker that makes leaked tokens greppable, not a secret


CLIENT_SECRET_PREFIX = "dsc_"  # noqa: S105 - OAuth client secrets, told apart from bearer tokens

ADMIN_TOKEN_PREFIX = "dsa_"  # noqa: S105 - the provider's admin token, told apart from recipients'


def new_secret(prefix: str = TOKEN_PREFIX) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    # Secrets carry 256 random bits, so a fast hash is enough: there is nothing
    # to brute-force that a slow KDF would protect.
    return hashlib.sha256(secret.encode()).hexdigest()


def matches_hash(secret: str, expected_hash: str) -> bool:
    """Whether `secret` hashes to `expected_hash`, compared in constant time."""
    return bool(secret) and hmac.compare_digest(hash_secret(secret), expected_hash)


def new_token_id() -> str:
    return secrets.token_hex(8)
