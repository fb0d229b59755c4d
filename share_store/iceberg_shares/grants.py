"""Per shared Iceberg table: what its recipients may read, and the signer for its store.

Remote signing asks for one signature per object read, thousands for a large
scan, so what a table's grant allows is worked out once and kept for a short
while. A request for an object the kept answer does not allow makes one fresh
look before it is refused: a recipient that just loaded a newer snapshot must
not wait out the cache.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from share_store.delta.reader import DeltaTableReader
from share_store.errors import UnsupportedOperation
from share_store.iceberg.delta_metadata import DeltaAsIceberg, GeneratedTable
from share_store.iceberg.from_delta import source_field_ids
from share_store.iceberg_shares.visible_metadata import (
    ReadableFiles,
    metadata_json,
    object_location,
    readable_files,
    shared_metadata,
    table_locations,
)
from share_store.model import SharedTable
from share_store.readers.table_readers import TableReaders
from share_store.signing.request_signing import HeaderSigner, ObjectRequest, parse_object_request
from share_store.signing.vended_scope import (
    MAX_POLICY_CHARS,
    VendingScope,
    narrowest,
    policy_text,
    prefixes_of,
)
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.storage.store_signer import store_signer
from share_store.storage.sts_vending import CredentialVendor, VendedKeys, VendingRefused
from share_store.storage.table_keys import scoped_signer

#: How long a table's readable files are trusted, and how soon a miss may look again.
GRANT_SECONDS = 30.0
RECHECK_SECONDS = 1.0
MAX_TABLES = 256
#: A grant of at most this many files is tried file by file in a vending session policy.
MAX_EXACT_FILES = 12

NEEDS_S3 = (
    "Iceberg REST recipients read files straight from S3 with signatures from this server; "
    "this table's storage is a local directory, which only the Delta Sharing protocol can serve"
)


@dataclass(frozen=True)
class TableGrant:
    metadata_location: str
    metadata: dict[str, Any]  # the metadata file's JSON, before the grant cuts it
    readable: ReadableFiles
    signer: HeaderSigner
    endpoint: str  # the store's address as recipients reach it
    made: float
    store: S3Settings  # the table's store, whose STS vends keys for it
    #: What vended keys reach when an exact scope does not fit a session policy: the table's prefixes.
    prefixes: tuple[tuple[str, str], ...] = ()
    #: Whether the grant names few enough files to try them one by one in a session policy.
    few_files: bool = False
    #: A restricted table's grant: keys are vended for its exact files only, never a prefix
    #: (which would reach the rows and columns the restriction leaves out).
    restricted: bool = False

    def vending_scope(self) -> VendingScope:
        """What keys vended for this grant may read: exactly its files when the policy can name them,
        else the table's prefixes (its location and generated metadata, all versions)."""
        exact = None
        if self.restricted:
            objects = tuple(sorted(self.readable.objects()))
            exact = VendingScope(self.readable.bucket_prefixes, objects) if self.few_files else None
            if exact is None or len(policy_text(exact)) > MAX_POLICY_CHARS:
                raise ValueError("a restricted table's files are too many to name in vended keys")
            return exact
        loose = VendingScope(self.prefixes or self.readable.bucket_prefixes)
        if self.few_files:
            exact = VendingScope(self.readable.bucket_prefixes, tuple(sorted(self.readable.objects())))
        return narrowest(exact, loose)

    @property
    def vendable(self) -> bool:
        """Whether keys may be vended for this grant at all. A restricted table's files too many to
        name in a session policy are not: any prefix would reach rows and columns its restriction
        leaves out, so it answers with remote signing only, whatever the client asks for."""
        if not self.restricted:
            return True
        try:
            self.vending_scope()
        except ValueError:
            return False
        return True

    def shared_metadata(self, history_shared: bool) -> dict[str, Any]:
        """The metadata as recipients get it: without history, cut to the current snapshot."""
        return shared_metadata(self.metadata, history_shared)


def _files_in_summary(table: Any) -> int:
    """How many data and delete files the current snapshot has, as its summary says (many when unsaid)."""
    current = table.metadata.current_snapshot()
    summary = current.summary if current is not None else None
    if summary is None:
        return 0 if current is None else MAX_EXACT_FILES + 1
    # A committer writes the summary: a count missing (pyiceberg's `get` answers None then) or not a
    # number means many, never a failed signature.
    data, deletes = summary.get("total-data-files"), summary.get("total-delete-files")
    try:
        return int(data) + int(deletes or 0)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return MAX_EXACT_FILES + 1


def folder_of(location: tuple[str, str]) -> tuple[str, str]:
    """The folder an object is in, as (bucket, prefix)."""
    bucket, key = location
    return bucket, key.rpartition("/")[0]


def restricted_prefixes(generated: GeneratedTable, derived: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """What the signer's keys for a restricted table reach (the signer itself checks each file):
    its folder of derived files whole (they are sharded in many folders), the folders of the
    files it serves as they are and of its generated metadata. Not its files' keys, which are
    no prefixes of themselves."""
    inside = derived[1].rstrip("/") + "/"
    others = [f for f in generated.files if not (f[0] == derived[0] and f[1].startswith(inside))]
    return prefixes_of([derived, *map(folder_of, others), *generated.version_prefixes])


def derived_folder(reader: Any) -> tuple[str, str]:
    """A restricted reader's folder of derived files, as (bucket, prefix)."""
    return reader.files.bucket, reader.files.prefix


#: What a kept grant was made for (see `_grant_key`).
GrantKey = tuple[str, bool, str | None, tuple[str | None, tuple[tuple[str, str], ...]] | None]


def _grant_key(table: SharedTable) -> GrantKey:
    """What a kept grant was made for: the table, whether it shares history, its restriction as
    the store has it now, and, for a restricted table, whom it was read for. A restriction changed
    is another grant at once, so a grant kept from before never signs the files of rows the new
    one leaves out; and each audience's grant is its own, since a row filter reading
    `CURRENT_RECIPIENT` derives other files for each recipient: one recipient's kept grant must
    never sign another's. A whole table's files are the same whoever reads them."""
    restriction = table.restriction.to_json() if table.restriction is not None else None
    audience = table.audience
    reader = None
    if restriction is not None and audience is not None:
        reader = (audience.recipient, tuple(sorted(audience.properties.items())))
    return table.id, table.history_shared, restriction, reader


def delta_readable(
    generated: GeneratedTable, reader: DeltaTableReader, history_shared: bool
) -> ReadableFiles:
    """A Delta table's files: all of the table and its generated metadata with history, else one version's."""
    if history_shared:
        return ReadableFiles([(reader.bucket, reader.path.rstrip("/") + "/"), generated.generated_prefix])
    return ReadableFiles(generated.version_prefixes, exact=generated.files)


class IcebergGrants:
    def __init__(self, readers: TableReaders, vendor: CredentialVendor | None = None) -> None:
        self.readers = readers
        #: Vends keys scoped to a grant (`[iceberg] credential_vending`); None or "off": remote signing only.
        self.vendor = vendor
        self._grants: dict[GrantKey, TableGrant] = {}
        self._lock = threading.Lock()

    def load(self, table: SharedTable) -> TableGrant:
        """The table as it is now, with a fresh grant: an Iceberg table as its catalog has it,
        a Delta table as Iceberg metadata generated for its versions."""
        reader = self.readers.reader(table)
        if not isinstance(reader.storage, S3Storage):
            raise UnsupportedOperation(NEEDS_S3)
        restricted = table.restriction is not None
        if restricted:
            # Not the table's own metadata, which lists every file: metadata generated from the
            # restricted snapshot, whose manifests name only the files served as they are and
            # the derived ones. One version only, and readable file by file.
            generated = self._restricted(table, reader).generate(history_shared=False)
            location, metadata = generated.metadata_location, generated.metadata
            readable = ReadableFiles(generated.version_prefixes, exact=generated.files)
            prefixes = restricted_prefixes(generated, derived_folder(reader))
            few = len(generated.files) <= MAX_EXACT_FILES
        elif table.is_iceberg:
            loaded = reader.catalog_table()  # type: ignore[attr-defined]
            location, metadata = loaded.metadata_location, metadata_json(loaded)
            readable = readable_files(loaded, table.history_shared)
            prefixes = prefixes_of(object_location(path) for path in table_locations(loaded))
            few = _files_in_summary(loaded) <= MAX_EXACT_FILES
        else:
            assert isinstance(reader, DeltaTableReader)
            generated = self._delta(table, reader).generate(table.history_shared)
            location, metadata = generated.metadata_location, generated.metadata
            readable = delta_readable(generated, reader, table.history_shared)
            prefixes = prefixes_of([(reader.bucket, reader.path), generated.generated_prefix])
            few = len(generated.files) <= MAX_EXACT_FILES
        # Read after the table is loaded: a catalog may have vended the keys its files are read with.
        signer, endpoint, store = store_signer(reader.storage)
        few = few and (restricted or not table.history_shared)
        grant = TableGrant(
            location, metadata, readable, signer, endpoint, time.monotonic(), store, prefixes, few, restricted
        )
        with self._lock:
            if len(self._grants) >= MAX_TABLES:
                self._grants.pop(next(iter(self._grants)))
            self._grants[_grant_key(table)] = grant
        return grant

    @property
    def vends(self) -> bool:
        return self.vendor is not None and self.vendor.settings.enabled

    def vended_keys(
        self, table: SharedTable, grant: TableGrant, token_id: str, not_after: float | None
    ) -> VendedKeys:
        """Temporary keys that read what `grant` allows of `table` (see `sts_vending.py`)."""
        assert self.vendor is not None and self.vendor.settings.enabled
        try:
            scope = grant.vending_scope()
        except ValueError as error:
            raise VendingRefused(f"{error}; use remote signing for this table") from None
        # Who asked for what, as the store's audit shows the session (64 characters at most).
        session = f"share-{token_id[:24]}-{table.id[:24]}"
        return self.vendor.vend(grant.store, scope, session, not_after)

    def _restricted(self, table: SharedTable, reader: Any) -> DeltaAsIceberg:
        """A restricted table as Iceberg metadata of its own, kept apart per restriction and
        audience (by the key its derived files are kept under)."""
        deletes = self.readers.iceberg.deletes
        bound = reader.bound(reader.snapshot().metadata)
        folder = reader.files
        # An Iceberg table's files (served as they are, and derived ones, which keep their
        # columns) carry its field ids: the generated schema gives each column the same.
        ids = source_field_ids(reader.inner.catalog_table().schema()) if table.is_iceberg else None
        return DeltaAsIceberg(reader, f"{table.id}-{bound.key}", folder.bucket, deletes.cache_prefix, 1, ids)

    def _delta(self, table: SharedTable, reader: Any) -> DeltaAsIceberg:
        deletes = self.readers.iceberg.deletes
        bucket = deletes.cache_bucket or table.bucket
        return DeltaAsIceberg(reader, table.id, bucket, deletes.cache_prefix, deletes.delta_snapshots)

    def _kept(self, table: SharedTable) -> TableGrant:
        with self._lock:
            grant = self._grants.get(_grant_key(table))
        if grant is None or time.monotonic() - grant.made > GRANT_SECONDS:
            grant = self.load(table)
        return grant

    def signature(
        self, table: SharedTable, method: str, uri: str, headers: dict[str, list[str]], recheck: bool = False
    ) -> tuple[ObjectRequest, dict[str, list[str]]] | None:
        """The headers that sign the request, if `table`'s grant allows it; else None.

        With `recheck`, a grant that does not allow it is made again first, if it
        is older than `RECHECK_SECONDS`. `SigningRefused` when the request is no
        object read at the table's store.
        """
        grant = self._kept(table)
        request = parse_object_request(method, uri, headers, grant.endpoint)
        allowed = all(grant.readable.allows(bucket, key) for bucket, key in request.objects())
        if not allowed and recheck and time.monotonic() - grant.made > RECHECK_SECONDS:
            grant = self.load(table)
            allowed = all(grant.readable.allows(bucket, key) for bucket, key in request.objects())
        return (request, self._signer(table, grant).sign(request)) if allowed else None

    def _signer(self, table: SharedTable, grant: TableGrant) -> HeaderSigner:
        """What signs a recipient's read: with vending on (the store has STS), keys from
        `AssumeRole` whose session policy is the table's prefixes, so that the store bounds what a
        signature reaches as well as `ReadableFiles` does; else the store's own keys."""
        # The table's prefixes, not the grant's exact files: a new snapshot needs no new keys.
        scope = VendingScope(grant.prefixes or grant.readable.bucket_prefixes)
        vendor = self.vendor if self.vends else None
        return scoped_signer(grant.signer, vendor, grant.store, scope, f"signer-{table.id[:48]}")
