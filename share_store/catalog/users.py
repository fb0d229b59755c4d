"""Catalog users: who may sign requests to the writable catalog, and with which policy.

A user is an access key and a secret, shown once when made. SigV4 checks a
request by signing it again, so the secret is kept sealed with the server key
(`signing.secret_box`) rather than hashed. Each user holds one policy document;
a request is allowed only where it allows (`policies`).
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass

from share_store.catalog import user_rows
from share_store.catalog.names import check_name
from share_store.catalog.policies import FULL_ACCESS_POLICY, Policy, parse_policy
from share_store.catalog.user_rows import CatalogUser
from share_store.persistence.mappers import utc_now
from share_store.persistence.transactions import Transactions
from share_store.signing.secret_box import open_sealed, seal

ACCESS_KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@dataclass(frozen=True)
class IssuedUser:
    """A new user's keys: the secret is shown this once."""

    name: str
    access_key: str
    secret_key: str
    policy: Policy


@dataclass(frozen=True)
class KnownUser:
    name: str
    access_key: str
    policy: Policy


class CatalogUsers:
    def __init__(self, transactions: Transactions, server_key: bytes) -> None:
        self.transactions = transactions
        self._server_key = server_key
        self._policies: dict[str, tuple[str, Policy]] = {}  # policy text → parsed, by access key
        self._lock = threading.Lock()

    def create(self, name: str, policy: str | None = None) -> IssuedUser:
        check_name(name, "user")
        parsed = parse_policy(policy if policy is not None else FULL_ACCESS_POLICY)
        access_key = "AK" + "".join(secrets.choice(ACCESS_KEY_ALPHABET) for _ in range(18))
        secret_key = secrets.token_urlsafe(30)
        user = CatalogUser(name, access_key, seal(self._server_key, access_key, secret_key), parsed.to_json(),
                           utc_now())  # fmt: skip
        with self.transactions.change() as conn:
            user_rows.create_user(conn, user)
        return IssuedUser(name, access_key, secret_key, parsed)

    def secret_for(self, access_key: str) -> str | None:
        """The plain secret of `access_key`, for SigV4; None for an unknown key."""
        found = self.lookup(access_key)
        return None if found is None else found[1]

    def known(self, access_key: str) -> KnownUser | None:
        found = self.lookup(access_key)
        return None if found is None else found[0]

    def lookup(self, access_key: str) -> tuple[KnownUser, str] | None:
        """The user of `access_key` and its plain secret, from one read of the store."""
        user = self._user(access_key)
        if user is None:
            return None
        with self._lock:
            cached = self._policies.get(access_key)
            if cached is None or cached[0] != user.policy:
                cached = (user.policy, parse_policy(user.policy))
                self._policies[access_key] = cached
        secret = open_sealed(self._server_key, access_key, user.sealed_secret)
        return KnownUser(user.name, user.access_key, cached[1]), secret

    def list(self) -> list[KnownUser]:
        with self.transactions.read() as conn:
            users = user_rows.list_users(conn)
        return [KnownUser(u.name, u.access_key, parse_policy(u.policy)) for u in users]

    def remove(self, name: str) -> None:
        with self.transactions.change() as conn:
            user_rows.delete_user(conn, name)

    def _user(self, access_key: str) -> CatalogUser | None:
        with self.transactions.read() as conn:
            return user_rows.user_by_access_key(conn, access_key)
