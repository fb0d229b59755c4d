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
from share_store.iceberg.catalog_view import ReadableFiles, metadata_json, readable_files, shared_metadata
from share_store.iceberg.delta_metadata import DeltaAsIceberg, GeneratedTable
from share_store.model import SharedTable
from share_store.signing.request_signing import HeaderSigner, ObjectRequest, parse_object_request
from share_store.storage.s3 import S3Storage
from share_store.tables.readers import TableReaders

#: How long a table's readable files are trusted, and how soon a miss may look again.
GRANT_SECONDS = 30.0
RECHECK_SECONDS = 1.0
MAX_TABLES = 256

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

    def shared_metadata(self, history_shared: bool) -> dict[str, Any]:
        """The metadata as recipients get it: without history, cut to the current snapshot."""
        return shared_metadata(self.metadata, history_shared)


def store_signer(storage: Any) -> tuple[HeaderSigner, str]:
    """The header signer and public endpoint of an S3 store; refused for local storage."""
    if not isinstance(storage, S3Storage):
        raise UnsupportedOperation(NEEDS_S3)
    settings = storage.settings
    endpoint = settings.public_endpoint or settings.endpoint
    if not (endpoint and settings.access_key and settings.secret_key):
        raise UnsupportedOperation(
            "the table's S3 store has no endpoint and static keys configured, which remote signing needs"
        )
    signer = HeaderSigner(settings.region, settings.access_key, settings.secret_key, settings.session_token)
    return signer, endpoint


def delta_readable(
    generated: GeneratedTable, reader: DeltaTableReader, history_shared: bool
) -> ReadableFiles:
    """A Delta table's files: all of the table and its generated metadata with history, else one version's."""
    if history_shared:
        return ReadableFiles([(reader.bucket, reader.path.rstrip("/") + "/"), generated.generated_prefix])
    return ReadableFiles(generated.version_prefixes, exact=generated.files)


class IcebergGrants:
    def __init__(self, readers: TableReaders) -> None:
        self.readers = readers
        self._grants: dict[tuple[str, bool], TableGrant] = {}
        self._lock = threading.Lock()

    def load(self, table: SharedTable) -> TableGrant:
        """The table as it is now, with a fresh grant: an Iceberg table as its catalog has it,
        a Delta table as Iceberg metadata generated for its versions."""
        reader = self.readers.reader(table)
        signer, endpoint = store_signer(reader.storage)  # type: ignore[attr-defined]
        if table.is_iceberg:
            loaded = reader.catalog_table()  # type: ignore[attr-defined]
            location, metadata = loaded.metadata_location, metadata_json(loaded)
            readable = readable_files(loaded, table.history_shared)
        else:
            assert isinstance(reader, DeltaTableReader)
            generated = self._delta(table, reader).generate(table.history_shared)
            location, metadata = generated.metadata_location, generated.metadata
            readable = delta_readable(generated, reader, table.history_shared)
        grant = TableGrant(location, metadata, readable, signer, endpoint, time.monotonic())
        with self._lock:
            if len(self._grants) >= MAX_TABLES:
                self._grants.pop(next(iter(self._grants)))
            self._grants[(table.id, table.history_shared)] = grant
        return grant

    def _delta(self, table: SharedTable, reader: Any) -> DeltaAsIceberg:
        deletes = self.readers.iceberg.deletes
        bucket = deletes.cache_bucket or table.bucket
        return DeltaAsIceberg(reader, table.id, bucket, deletes.cache_prefix, deletes.delta_snapshots)

    def _kept(self, table: SharedTable) -> TableGrant:
        with self._lock:
            grant = self._grants.get((table.id, table.history_shared))
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
        allowed = grant.readable.allows(request.bucket, request.key)
        if not allowed and recheck and time.monotonic() - grant.made > RECHECK_SECONDS:
            grant = self.load(table)
            allowed = grant.readable.allows(request.bucket, request.key)
        return (request, grant.signer.sign(request)) if allowed else None
