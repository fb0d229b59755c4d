"""Temporary storage keys scoped to one table, from the store's STS: `CredentialVendor`.

Engines that cannot ask a signer for every read (DuckDB, Trino, Spark's S3FileIO
without a signer) read a table with keys the catalog vends. They come from
`AssumeRole` on the table's own store, signed with the server's keys, with a
session policy cut to the table (`vended_scope.py`): the store enforces it, so
what leaves the server reads that table and nothing else, and never outlives the
share token that asked. The server's own keys never leave it.

Keys are reused for the same token, table and scope while more than half their
life is left, so an engine loading a table per query does not cost an STS call
per query; revoking the token stops new keys, and those already vended end on
their own (15 minutes by default).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from share_store.errors import ShareStoreError, StorageUnavailable
from share_store.signing.request_signing import HeaderSigner
from share_store.signing.vended_scope import VendingScope, policy_text
from share_store.storage.s3 import S3Settings

VENDING_MODES = ("off", "sts")
#: STS's bounds on a session's duration (AWS, MinIO, Ceph and SeaweedFS alike).
MIN_SECONDS, MAX_SECONDS = 900, 43200
SETTING = '[iceberg] credential_vending = "sts"'
MAX_KEPT = 1024


class VendingRefused(ShareStoreError):
    """Keys cannot be vended for this request: the store refused, or the token is about to expire."""

    error_code = "VENDING_REFUSED"
    status_code = 403


@dataclass(frozen=True)
class VendingSettings:
    """`[iceberg] credential_vending`, `credential_role_arn`, `credential_sts_endpoint`,
    `credential_duration`."""

    mode: str = "off"
    #: The role assumed; empty for stores that take none (MinIO, SeaweedFS's own identity).
    role_arn: str = ""
    #: STS's address; None: the table's store's endpoint (MinIO, Ceph and SeaweedFS answer STS there).
    sts_endpoint: str | None = None
    duration: int = MIN_SECONDS

    def __post_init__(self) -> None:
        if self.mode not in VENDING_MODES:
            raise ValueError(f"credential_vending must be one of {', '.join(VENDING_MODES)}")
        if not MIN_SECONDS <= self.duration <= MAX_SECONDS:
            raise ValueError(f"credential_duration must be between {MIN_SECONDS} and {MAX_SECONDS} seconds")

    @property
    def enabled(self) -> bool:
        return self.mode == "sts"


@dataclass(frozen=True)
class VendedKeys:
    access_key: str
    secret_key: str
    session_token: str
    expires_at: float  # epoch seconds
    scope: VendingScope

    def signer(self, region: str) -> HeaderSigner:
        """A remote signer's signer with these keys: its signatures reach what the scope does."""
        return HeaderSigner(region, self.access_key, self.secret_key, self.session_token)

    def properties(self, endpoint: str, region: str) -> dict[str, str]:
        """The keys as Iceberg's FileIO properties (a load-table `config` or `storage-credentials`)."""
        return {
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.session-token": self.session_token,
            "s3.session-token-expires-at-ms": str(int(self.expires_at * 1000)),
            "s3.endpoint": endpoint,
            "s3.region": region,
            "client.region": region,
            "s3.path-style-access": "true",
        }


class CredentialVendor:
    def __init__(self, settings: VendingSettings) -> None:
        self.settings = settings
        self._kept: dict[tuple[str, str, str], VendedKeys] = {}
        self._clients: dict[tuple[str | None, str | None, str], Any] = {}
        self._lock = threading.Lock()

    def vend(
        self,
        store: S3Settings,
        scope: VendingScope,
        session: str,
        not_after: float | None,
        now: float | None = None,
    ) -> VendedKeys:
        """Keys that read `scope` of `store`, ending no later than `not_after` (the token's expiry).

        `session` names who asks for what (token and table): the store's audit shows it.
        """
        now = time.time() if now is None else now
        policy = policy_text(scope)
        key = (session, store.endpoint or "", policy)
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept.expires_at - now > self.settings.duration / 2:
            if not_after is None or kept.expires_at <= not_after:
                return kept
        duration = self.settings.duration
        if not_after is not None:
            duration = min(duration, int(not_after - now))
        if duration < MIN_SECONDS:
            raise VendingRefused(
                f"the token expires in {max(0, int((not_after or now) - now))} s, sooner than the shortest "
                f"keys STS vends ({MIN_SECONDS} s); use a token that lasts longer, or remote signing"
            )
        vended = self._assume(store, scope, policy, session[:64], duration)
        with self._lock:
            if len(self._kept) >= MAX_KEPT:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = vended
        return vended

    def _assume(
        self, store: S3Settings, scope: VendingScope, policy: str, session: str, duration: int
    ) -> VendedKeys:
        client = self._client(store)
        try:
            answer = client.assume_role(
                RoleArn=self.settings.role_arn,
                RoleSessionName=session,
                Policy=policy,
                DurationSeconds=duration,
            )
        except ClientError as error:
            details = error.response.get("Error", {})
            raise VendingRefused(
                f"{SETTING}: the store's STS refused AssumeRole ({details.get('Code', 'error')}: "
                f"{str(details.get('Message', ''))[:200]}); check credential_role_arn and that the "
                "store's STS takes session policies"
            ) from None
        except BotoCoreError as error:
            raise StorageUnavailable(
                f"{SETTING}: the store's STS did not answer ({type(error).__name__})"
            ) from None
        keys = answer["Credentials"]
        return VendedKeys(
            keys["AccessKeyId"],
            keys["SecretAccessKey"],
            keys["SessionToken"],
            keys["Expiration"].timestamp(),
            scope,
        )

    def _client(self, store: S3Settings) -> Any:  # boto3 makes its client classes at run time
        endpoint = self.settings.sts_endpoint or store.endpoint
        key = (endpoint, store.access_key, store.region)
        with self._lock:
            client = self._clients.get(key)
        if client is None:
            client = boto3.client(
                "sts",
                endpoint_url=endpoint,
                region_name=store.region,
                aws_access_key_id=store.access_key,
                aws_secret_access_key=store.secret_key,
                aws_session_token=store.session_token,
                # An empty RoleArn (stores that take none) is refused by boto3's own checks, not by STS.
                config=Config(
                    parameter_validation=bool(self.settings.role_arn),
                    connect_timeout=store.connect_timeout,
                    read_timeout=store.read_timeout,
                    retries={"max_attempts": store.max_attempts, "mode": "standard"},
                ),
            )
            with self._lock:
                self._clients[key] = client
        return client
