"""Credentials a REST catalog vends with a table, and the store signed with them.

A REST catalog may answer a table load with temporary storage keys (in the
table's `config` or its `storage-credentials`; pyiceberg merges the best match
into the table's FileIO properties). The Iceberg REST spec lets them win over
the client's own settings, so they win over `[catalogs.x.storage]` and
`[storage]`: recipients' URLs for that table are signed with them, session token
included, and no URL outlives them. `vended_credentials` tells them apart from
the keys the catalog was configured with; `VendedS3Storage` signs with them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from share_store.storage.s3 import S3Settings, S3Storage

ACCESS_KEY = "s3.access-key-id"
SECRET_KEY = "s3.secret-access-key"  # noqa: S105 (a property name)
SESSION_TOKEN = "s3.session-token"  # noqa: S105 (a property name)
#: Iceberg's key for when a session token expires (Polaris, Lakekeeper, Unity and this server send it).
EXPIRES_AT_MS = "s3.session-token-expires-at-ms"
#: Reloaded this long before they expire, so that a URL signed with them is good for a while.
REFRESH_MARGIN = 60.0


@dataclass(frozen=True)
class VendedCredentials:
    access_key: str
    secret_key: str
    session_token: str | None
    #: Epoch seconds; None when the catalog did not say (the keys are then taken as lasting).
    expires_at: float | None
    endpoint: str | None
    region: str | None
    path_style: bool

    def fresh(self, now: float) -> bool:
        """Whether they are still good for more than `REFRESH_MARGIN` seconds."""
        return self.expires_at is None or self.expires_at - now > REFRESH_MARGIN


def _path_style(props: Mapping[str, str]) -> bool:
    if props.get("s3.force-virtual-addressing", "").lower() == "true":
        return False
    return props.get("s3.path-style-access", "true").lower() != "false"


def vended_credentials(
    table_properties: Mapping[str, str], catalog_properties: Mapping[str, str]
) -> VendedCredentials | None:
    """The keys a table came with, when they are not the catalog's own configured keys.

    `table_properties` are a loaded table's FileIO properties: the catalog's
    properties overlaid with what the catalog answered for the table, so keys
    equal to the configured ones were not vended.
    """
    access_key, secret_key = table_properties.get(ACCESS_KEY), table_properties.get(SECRET_KEY)
    if not access_key or not secret_key:
        return None
    keys = (access_key, secret_key, table_properties.get(SESSION_TOKEN))
    configured = tuple(catalog_properties.get(key) for key in (ACCESS_KEY, SECRET_KEY, SESSION_TOKEN))
    if keys == configured:
        return None
    expires = table_properties.get(EXPIRES_AT_MS, "")
    return VendedCredentials(
        access_key=access_key,
        secret_key=secret_key,
        session_token=table_properties.get(SESSION_TOKEN) or None,
        expires_at=int(expires) / 1000 if expires.isdigit() else None,
        endpoint=table_properties.get("s3.endpoint") or None,
        region=table_properties.get("s3.region") or table_properties.get("client.region") or None,
        path_style=_path_style(table_properties),
    )


class VendedS3Storage(S3Storage):
    """An S3 store signed with vended keys: a URL never outlives them."""

    def __init__(self, credentials: VendedCredentials, settings: S3Settings, url_lifetime: int) -> None:
        super().__init__(settings, url_lifetime)
        self.credentials = credentials

    def lifetime(self, now: float, wanted: int | None = None) -> int:
        expires_at = self.credentials.expires_at
        if expires_at is None:
            return wanted or self.url_lifetime
        return max(1, min(wanted or self.url_lifetime, int(expires_at - now)))

    def fresh(self, now: float | None = None) -> bool:
        return self.credentials.fresh(time.time() if now is None else now)


def vended_storage(
    credentials: VendedCredentials, public_endpoint: str | None, region: str, url_lifetime: int
) -> VendedS3Storage:
    """The store to sign a table's files with, from its vended keys."""
    settings = S3Settings(
        endpoint=credentials.endpoint,
        public_endpoint=public_endpoint,
        region=credentials.region or region,
        access_key=credentials.access_key,
        secret_key=credentials.secret_key,
        session_token=credentials.session_token,
        path_style=credentials.path_style,
    )
    return VendedS3Storage(credentials, settings, url_lifetime)
