"""Where a restricted table's derived files are kept: written once, found again by any replica.

A derived file is named by what defines it (the source file, its deletion vector,
the bound restriction's key), so replicas on one storage share them, a restart
reuses them, and a new version of the table reuses every file it still holds.
Beside each file a small JSON sidecar keeps its size and statistics, written after
the file: where the sidecar is, the file is whole. A source file with no allowed
row gets a sidecar and no file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from share_store.errors import UnsupportedOperation
from share_store.model import SharedTable
from share_store.restrictions.derivation import Derived
from share_store.storage.base import ObjectStorage
from share_store.tables.reader import TableReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DerivedFile:
    """One derived file as the log names it: its URI (None: no row left), size and statistics."""

    uri: str | None
    bucket: str
    key: str
    size: int
    num_records: int
    stats: str


def content_key(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


#: Derived files a table's folder remembers (a sidecar less to read each), the most recently
#: used: a 10,000-file table's files for two restrictions (its audiences share the folder),
#: 21 MB measured with five columns' statistics. One forgotten is found again by its sidecar.
KNOWN_FILES = 20_000


class DerivedFiles:
    """One restricted table's folder of derived files in the cache."""

    def __init__(
        self,
        storage: ObjectStorage,
        bucket: str | Callable[[], str],
        prefix: str,
        uri: Callable[[str, str], str],
        known_files: int = KNOWN_FILES,
    ) -> None:
        """`bucket`: the folder's bucket, or what works it out when a file first needs it."""
        self.storage = storage
        self._bucket = bucket if isinstance(bucket, str) else None
        self._find_bucket = None if isinstance(bucket, str) else bucket
        self._bucket_lock = threading.Lock()
        self.prefix = prefix.strip("/") + "/"
        self.uri = uri
        self._known: OrderedDict[str, DerivedFile] = OrderedDict()
        self._known_files = known_files
        #: Every (bucket, key) this process made or found: the only derived files signed.
        self._locations: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    @property
    def bucket(self) -> str:
        """The bucket the folder is in, worked out once, when first asked (an Iceberg table's data
        bucket is read from a snapshot, which a reader that serves no derived file never needs)."""
        if self._bucket is None:
            with self._bucket_lock:
                if self._bucket is None:
                    assert self._find_bucket is not None
                    self._bucket = self._find_bucket()
        return self._bucket

    def location(self, uri: str) -> tuple[str, str] | None:
        """Bucket and key of a derived file by its URI, if it is one of this table's."""
        with self._lock:
            return self._locations.get(uri)

    def holds(self, bucket: str, key: str) -> bool:
        # The prefix first: only a key in the folder needs its bucket.
        return key.startswith(self.prefix) and bucket == self.bucket

    def find(self, name: str) -> DerivedFile | None:
        """The derived file named `name`, if made before (here, by a replica, before a restart)."""
        with self._lock:
            found = self._known.get(name)
            if found is not None:
                self._known.move_to_end(name)
                return found
        key = self._key(name)
        try:
            raw = self.storage.read(self.bucket, key + ".json")
        except FileNotFoundError:
            return None
        except OSError as error:  # an unreadable cache costs a derivation, never an answer
            log.warning("cannot read a derived file's sidecar: %s", type(error).__name__)
            return None
        try:
            body = json.loads(raw)
            made = self._remember(name, int(body["size"]), int(body["numRecords"]), str(body["stats"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring a damaged sidecar of a derived file")
            return None
        return made

    def put(self, name: str, derived: Derived) -> DerivedFile:
        """Write `derived` under `name` (unless a replica did), then its sidecar."""
        key = self._key(name)
        try:
            if derived.content is not None:
                self.storage.write(self.bucket, key + ".parquet", derived.content)
            sidecar = {
                "size": len(derived.content or b""),
                "numRecords": derived.num_records,
                "stats": derived.stats,
            }
            self.storage.write(self.bucket, key + ".json", json.dumps(sidecar).encode())
        except OSError as error:
            raise UnsupportedOperation(
                f"the server cannot write a restricted table's derived files ({type(error).__name__}); "
                "check the [iceberg] cache_bucket setting and the storage's permissions"
            ) from error
        return self._remember(name, len(derived.content or b""), derived.num_records, derived.stats)

    def _key(self, name: str) -> str:
        return f"{self.prefix}{name[:2]}/{name}"

    def _remember(self, name: str, size: int, records: int, stats: str) -> DerivedFile:
        key, bucket = self._key(name) + ".parquet", self.bucket
        uri = self.uri(bucket, key) if records else None
        made = DerivedFile(uri, bucket, key, size, records, stats)
        with self._lock:
            self._known[name] = made
            self._known.move_to_end(name)
            while len(self._known) > self._known_files:
                self._known.popitem(last=False)
            if uri is not None:
                self._locations[uri] = (bucket, key)
        return made


def derived_files_of(
    table: SharedTable,
    inner: TableReader,
    storage: ObjectStorage,
    cache_bucket: str | None,
    cache_prefix: str,
    uri: Callable[[str, str], str],
) -> DerivedFiles:
    """The folder of `table`'s derived files, written with the server's configured `storage`
    (vended keys are commonly read-only): in the cache bucket, else the bucket of the table's
    data (worked out when a file first needs it), under a folder of the table's own, so that no
    two tables' files meet."""
    import hashlib

    bucket: str | Callable[[], str] = cache_bucket or (lambda: _data_bucket(table, inner))
    identity = hashlib.sha256(f"{table.id}\0{table.bucket}\0{table.path}".encode()).hexdigest()[:24]
    prefix = f"{cache_prefix.strip('/')}/restricted/{identity}/"
    return DerivedFiles(storage, bucket, prefix, uri)


def _data_bucket(table: SharedTable, inner: TableReader) -> str:
    """A Delta table's bucket; an Iceberg table's is its first data file's (a warehouse's name is
    not a bucket). A table with no file yet derives none: its own bucket name stands."""
    if not table.is_iceberg:
        return table.bucket
    for add in inner.snapshot().adds:
        return inner.locate(add["path"])[0]
    return table.bucket
