"""An S3 store's own header signer and the address its clients reach, for both remote signers
(the recipients' `iceberg_shares.grants`, the writers' `catalog.data_access`).

Remote signing needs an S3-compatible store with an endpoint and static keys: requests are signed
with the server's keys, which never leave it (vended keys come from the same store's STS).
"""

from __future__ import annotations

from typing import Any

from share_store.errors import UnsupportedOperation
from share_store.signing.request_signing import HeaderSigner
from share_store.storage.s3 import S3Settings, S3Storage


def store_signer(storage: Any) -> tuple[HeaderSigner, str, S3Settings]:
    """The header signer and public endpoint of an S3 store; refused for local storage."""
    if not isinstance(storage, S3Storage):
        raise UnsupportedOperation("remote signing needs S3 storage: a local directory has no signer")
    settings = storage.settings
    endpoint = settings.public_endpoint or settings.endpoint
    if not (endpoint and settings.access_key and settings.secret_key):
        raise UnsupportedOperation(
            "the table's S3 store has no endpoint and static keys configured, which remote signing needs"
        )
    signer = HeaderSigner(settings.region, settings.access_key, settings.secret_key, settings.session_token)
    return signer, endpoint, settings
