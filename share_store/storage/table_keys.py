"""Storage for one table's folder with keys the store bounds to it: what the server does with a
table's files on a caller's behalf (a purge, maintenance) is done with these, not with its own.

Where the store has STS (the provider turned vending on), `TableKeys.storage_for(location)` is an
`S3Storage` whose keys come from `AssumeRole` with a session policy of the table's location
(`signing.vended_scope`: read, write, delete and list under it only). A bug in the server's own
confinement checks (`TableLocation.confine`) then reaches no object outside the table: the store
refuses it. The storage is kept while its keys have more than half their life left, so a run of
deletes costs one STS call. Without STS (local storage, a store without it), the server's storage,
bounded by the checks alone.

`scoped_signer` is the same decision for the two remote signers (the recipients' grants, the
writers' catalog): the store's own signer, or one whose keys are vended for the table's scope.
"""

from __future__ import annotations

import dataclasses
import threading
import time

from share_store.signing.request_signing import HeaderSigner
from share_store.signing.vended_scope import VendingScope
from share_store.storage.base import ObjectStorage
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.storage.sts_vending import CredentialVendor
from share_store.storage.table_location import TableLocation

MAX_KEPT = 256


def scoped_signer(
    own: HeaderSigner,
    vendor: CredentialVendor | None,
    store: S3Settings,
    scope: VendingScope,
    session: str,
) -> HeaderSigner:
    """What signs an engine's request for a table: with a vendor (vending on, the store has STS),
    keys from `AssumeRole` whose session policy is `scope`, so that the store, not only the
    server's checks, bounds what a signature reaches; without one, the store's `own` signer."""
    if vendor is None:
        return own
    return vendor.vend(store, scope, session, None).signer(store.region)


class TableKeys:
    def __init__(self, storage: ObjectStorage, vendor: CredentialVendor | None = None) -> None:
        self.storage = storage
        #: None: no STS to ask; the server's storage serves every table.
        self.vendor = vendor if isinstance(storage, S3Storage) else None
        self._kept: dict[tuple[str, str], tuple[float, ObjectStorage]] = {}
        self._lock = threading.Lock()

    def storage_for(self, location: TableLocation) -> ObjectStorage:
        """The storage to read, write and delete `location`'s files with."""
        if self.vendor is None:
            return self.storage
        assert isinstance(self.storage, S3Storage)
        key = (location.bucket, location.prefix)
        now = time.time()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        scope = location.vending_scope(write=True)
        session = f"server-{location.bucket[:16]}-{location.prefix[-32:]}"
        keys = self.vendor.vend(self.storage.settings, scope, session.replace("/", "-"), None)
        settings = dataclasses.replace(
            self.storage.settings,
            access_key=keys.access_key,
            secret_key=keys.secret_key,
            session_token=keys.session_token,
        )
        storage = S3Storage(settings, self.storage.url_lifetime)
        with self._lock:
            if len(self._kept) >= MAX_KEPT:
                self._kept.pop(next(iter(self._kept)))
            # Kept for half the keys' life, as the vendor keeps the keys themselves.
            self._kept[key] = (now + (keys.expires_at - now) / 2, storage)
        return storage
