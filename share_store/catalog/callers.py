"""Who is calling the own warehouses: the proof a request offers, checked, as a `Principal`.

Three ways in, checked in this order:

* **SigV4** (`Authorization: AWS4-HMAC-SHA256 ...`, signing name `s3tables`, any
  region), as AIStor Tables takes it: the request is signed again with the
  catalog user's secret and compared in constant time;
* **a catalog access token** (`Authorization: Bearer ...`) from
  `/_iceberg/v1/oauth/tokens`, for engines that cannot sign SigV4 (Spark
  without the AWS bundle, DuckDB, ClickHouse): the user's keys are its client
  id and secret; the token expires, and stops working when the user is removed;
* **the admin token** as a bearer token: the provider, allowed everything. A
  bearer token that is not a catalog token is checked as the admin API checks
  the admin token (`AdminToken`), so wrong ones are throttled and audited the
  same way (429).

Anything else is a 401. The HTTP layer only reads the proof off the request
(`Credentials`); every decision is here, under it, as Lakekeeper and Polaris
authenticate in their catalog layer.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from share_store.authentication.sign_in_throttle import AdminToken
from share_store.authentication.sigv4 import verify_request
from share_store.catalog.access import PROVIDER, Principal
from share_store.catalog.users import CatalogUsers, KnownUser
from share_store.errors import Unauthenticated
from share_store.signing.token_codec import TokenCodec

ACCESS_TOKEN_SECONDS = 3600
SIGV4 = "aws4-hmac-sha256"


@dataclass(frozen=True)
class Credentials:
    """What one request offers as proof, read off it and not yet checked: its `Authorization`
    header, what SigV4 signs (method, raw path and query, headers, body) and the client's address
    (for the admin token's throttle). `notes` are the request's audit fields, which the check fills
    (the caller's name, a failed or throttled sign-in), never with a secret."""

    authorization: str
    method: str
    raw_path: bytes
    query: bytes
    headers: Mapping[str, str]
    body: bytes
    address: str
    notes: dict[str, Any] = field(default_factory=dict)


class CatalogCallers:
    def __init__(self, users: CatalogUsers, tokens: TokenCodec, admin_token: AdminToken) -> None:
        self.users = users
        self.tokens = tokens
        self.admin_token = admin_token

    def authenticate(self, credentials: Credentials) -> Principal:
        scheme, _, secret = credentials.authorization.strip().partition(" ")
        if scheme.lower() == SIGV4:
            return self._signed(credentials)
        if scheme.lower() == "bearer" and secret.strip():
            return self._bearer(credentials, secret.strip())
        raise Unauthenticated("Authentication required: sign with SigV4 (s3tables) or send a bearer token")

    def issue_token(self, access_key: str, secret: str, notes: dict[str, Any]) -> str | None:
        """OAuth2 client credentials: a short-lived bearer token for a catalog user's keys; None if
        they are not a user's."""
        found = self.users.lookup(access_key)
        known = None if found is None else found[1]
        # Compared even for an unknown key, so that the answer takes as long either way.
        matched = hmac.compare_digest((known or "\x00" * len(secret)).encode(), secret.encode())
        if found is None or not matched:
            return None
        notes["catalog_user"] = found[0].name  # as every other request of the user is audited
        return self.tokens.encode({"k": access_key, "e": int(time.time()) + ACCESS_TOKEN_SECONDS})

    def principal(self, key: str) -> Principal | None:
        """Who a signing grant names, as the store has it now: the provider for "", a catalog user by
        its access key (None once removed)."""
        if key == "":
            return PROVIDER
        user = self.users.known(key)
        return None if user is None else Principal(user.name, user.policy, user.access_key)

    def _signed(self, credentials: Credentials) -> Principal:
        # The user read to check the signature is the caller: one read of the store, not two.
        found: dict[str, KnownUser] = {}

        def secret_for(access_key: str) -> str | None:
            hit = self.users.lookup(access_key)
            if hit is None:
                return None
            found[access_key] = hit[0]
            return hit[1]

        signed = verify_request(
            credentials.method, credentials.raw_path, credentials.query, credentials.headers,
            credentials.body, secret_for,
        )  # fmt: skip
        return self._as(found[signed.access_key], credentials.notes)

    def _bearer(self, credentials: Credentials, secret: str) -> Principal:
        # A catalog token first: it is HMAC-checked, cheap, and the common case. Only a token that
        # is not one is an admin-token attempt, so catalog users' requests never count as wrong
        # admin tokens.
        try:
            payload = self.tokens.decode(secret)
        except ValueError:
            return self._admin(credentials, secret)
        if int(payload.get("e", 0)) < time.time():
            raise Unauthenticated("The bearer token has expired")
        user = self.users.known(str(payload.get("k")))
        if user is None:
            raise Unauthenticated("The bearer token's user no longer exists")
        return self._as(user, credentials.notes)

    def _admin(self, credentials: Credentials, secret: str) -> Principal:
        """The provider, if `secret` is the admin token (throttled per address and in all: while
        throttled, `RateLimited`, a 429 with `Retry-After`)."""
        if not self.admin_token.matches(secret, credentials.address, credentials.notes):
            raise Unauthenticated("The bearer token is not valid")
        credentials.notes["catalog_user"] = "admin"
        return Principal("admin", None)

    @staticmethod
    def _as(user: KnownUser, notes: dict[str, Any]) -> Principal:
        notes["catalog_user"] = user.name
        return Principal(user.name, user.policy, user.access_key)
