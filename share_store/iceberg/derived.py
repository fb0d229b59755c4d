"""Files the server derives from an Iceberg table's deletes, kept in object storage.

Delta readers take a deletion vector either inline in the `add` or from a
deletion vector file. Large vectors would swell every response that lists the
file, so they are written once as Delta deletion vector files (a version byte,
then the framed vector) under a cache prefix and served by signed URL. The
parquet response format cannot carry deletes at all; in "materialize" mode the
server writes each affected data file once more without its deleted rows.

Everything here is content-addressed (a file's name is the SHA-256 of what
defines it), so replicas sharing the storage share the cache, a restart reuses
it, and writing the same file twice is harmless. Per snapshot, an index maps
each data file to its deletion vector, so a restarted server answers without
reading delete files again.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import struct
import threading
import zlib
from collections.abc import Callable
from typing import Any

from share_store.delta.deletion_vectors import z85_decode
from share_store.errors import UnsupportedOperation
from share_store.storage.base import ObjectStorage

log = logging.getLogger(__name__)

#: Delta's deletion vector file format version, the first byte of every DV file.
DV_FILE_VERSION = b"\x01"
#: Without a writable cache, vectors up to this size are still served inline.

Descriptor = dict[str, Any]


def dv_file_bytes(payload: bytes) -> bytes:
    """A Delta deletion vector file holding one vector: version byte, big-endian size, payload, CRC."""
    framed = struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    return DV_FILE_VERSION + framed


def content_name(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def index_identity(metadata: Any) -> str:
    """What a table's vector index is kept under: its uuid and its location.

    The uuid and snapshot ids are whatever the table's committer wrote; keyed by the
    table's location too, one table's index is never another's, whoever copies its uuid.
    """
    where = hashlib.sha256(metadata.location.encode()).hexdigest()[:16]
    return f"{metadata.table_uuid}-{where}"


class DerivedFiles:
    """The cache location of one table: deletion vector files, materialized data files, indexes.

    `uri(bucket, key)` turns a location into the absolute URI the table's
    reader locates and signs like any of the table's files.
    """

    def __init__(
        self,
        storage: ObjectStorage,
        bucket: str,
        prefix: str,
        uri: Callable[[str, str], str],
    ) -> None:
        self.storage = storage
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/"
        self.uri = uri
        self._written: dict[str, int] = {}  # key -> size
        self._lock = threading.Lock()

    def holds(self, bucket: str, key: str) -> bool:
        """Whether (bucket, key) is a file of this cache: the only derived files signed."""
        return bucket == self.bucket and key.startswith(self.prefix) and ".." not in key.split("/")

    # -- deletion vector files ----------------------------------------------------------

    def dv_descriptor(self, payload: bytes, cardinality: int) -> Descriptor:
        """A deletion vector served from a DV file in the cache, written if not there yet."""
        key = f"{self.prefix}dv/{content_name(payload)}.bin"
        self._write_once(key, lambda: dv_file_bytes(payload))
        return {
            "storageType": "p",
            "pathOrInlineDv": self.uri(self.bucket, key),
            "offset": len(DV_FILE_VERSION),
            "sizeInBytes": len(payload),
            "cardinality": cardinality,
        }

    # -- per-snapshot indexes -------------------------------------------------------------

    def _index_key(self, table_uuid: str, snapshot_id: int) -> str:
        # `index2/`: indexes under `index/` were written when vectors were taken from Puffin
        # footers, which could pick a replaced vector; they are never read again.
        return f"{self.prefix}index2/{table_uuid}/{snapshot_id}.json"

    def read_index(self, table_uuid: str, snapshot_id: int) -> dict[str, Descriptor | None]:
        """The deletion vectors recorded for a snapshot, by data file; empty if none or unreadable."""
        try:
            raw = self.storage.read(self.bucket, self._index_key(table_uuid, snapshot_id))
        except FileNotFoundError:
            return {}
        except OSError as error:  # an unusable cache costs recomputing, never an answer
            log.warning("cannot read the deletion vector index: %s", type(error).__name__)
            return {}
        try:
            index = json.loads(raw)
            vectors = index["vectors"]
            if not isinstance(vectors, dict):
                raise TypeError("vectors is not an object")
        except (ValueError, KeyError, TypeError):
            # Rebuilt from the delete files; a damaged index never decides which rows are gone.
            log.warning("ignoring an unreadable deletion vector index for snapshot %s", snapshot_id)
            return {}
        return {path: d for path, d in vectors.items() if self._trusted(d)}

    def write_index(self, table_uuid: str, snapshot_id: int, vectors: dict[str, Descriptor | None]) -> None:
        body = json.dumps({"vectors": vectors}, sort_keys=True).encode()
        key = self._index_key(table_uuid, snapshot_id)
        try:
            self.storage.write(self.bucket, key, body)
        except (OSError, UnsupportedOperation) as error:
            log.warning("cannot write the deletion vector index %s: %s", key, type(error).__name__)

    def _trusted(self, descriptor: Any) -> bool:
        if descriptor is None:  # the data file's delete files delete none of its rows
            return True
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("cardinality"), int):
            return False
        if descriptor.get("storageType") == "i":
            return isinstance(descriptor.get("pathOrInlineDv"), str)
        path = descriptor.get("pathOrInlineDv")
        return descriptor.get("storageType") == "p" and isinstance(path, str) and f"/{self.prefix}dv/" in path

    # -- materialized data files ----------------------------------------------------------

    def materialized(self, data_file: str, payload: bytes, write: Callable[[], bytes]) -> tuple[str, int]:
        """URI and size of `data_file` without the rows `payload` deletes; `write` makes its bytes."""
        key = f"{self.prefix}data/{content_name(data_file, payload)}.parquet"
        return self.uri(self.bucket, key), self._write_once(key, write)

    def change_file(
        self, data_file: str, before: bytes, after: bytes, change_type: str, write: Callable[[], bytes]
    ) -> tuple[str, int]:
        """URI and size of a change file of `data_file`'s rows between two vectors (see `change_rows`)."""
        key = f"{self.prefix}changes/{content_name(data_file, before, after, change_type)}.parquet"
        return self.uri(self.bucket, key), self._write_once(key, write)

    def _write_once(self, key: str, content: Callable[[], bytes]) -> int:
        """Write `key` unless it is there (from this process, a replica or a run before); its size."""
        with self._lock:
            size = self._written.get(key)
        if size is not None:
            return size
        found = self.storage.stat(self.bucket, key)
        if found is not None:
            size = found.size
        else:
            data = content()
            try:
                self.storage.write(self.bucket, key, data)
            except OSError as error:
                raise UnsupportedOperation(
                    f"the server cannot write its cache of derived files ({type(error).__name__}); "
                    "check the [iceberg] cache_bucket setting and the storage's permissions"
                ) from error
            size = len(data)
        with self._lock:
            self._written[key] = size
        return size


def without_rows(content: bytes, deleted: set[int]) -> bytes:
    """A Parquet file's bytes without the rows at `deleted` positions, schema and field ids kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.ParquetFile(io.BytesIO(content))
    output = io.BytesIO()
    with pq.ParquetWriter(output, source.schema_arrow) as writer:
        start = 0
        for batch in source.iter_batches():
            keep = [i for i in range(batch.num_rows) if start + i not in deleted]
            start += batch.num_rows
            if len(keep) == batch.num_rows:
                writer.write_batch(batch)
            elif keep:
                writer.write_batch(batch.take(pa.array(keep, type=pa.int64())))
    return output.getvalue()


def change_rows(content: bytes, positions: set[int], inside: bool, change_type: str) -> bytes:
    """A Delta change file: the rows of a Parquet file at `positions` (or, not `inside`, all the
    others), with a `_change_type` column saying what happened to them.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = pq.ParquetFile(io.BytesIO(content))
    schema = source.schema_arrow.append(pa.field("_change_type", pa.string()))
    output = io.BytesIO()
    with pq.ParquetWriter(output, schema) as writer:
        start = 0
        for batch in source.iter_batches():
            rows = [i for i in range(batch.num_rows) if (start + i in positions) == inside]
            start += batch.num_rows
            if rows:
                picked = batch.take(pa.array(rows, type=pa.int64()))
                kinds = pa.array([change_type] * len(rows), type=pa.string())
                writer.write_batch(pa.RecordBatch.from_arrays([*picked.columns, kinds], schema=schema))
    return output.getvalue()


def vector_payload(descriptor: Descriptor, dv_file: bytes | None) -> bytes:
    """The serialized vector a descriptor names: inline, or read from its DV file's bytes."""
    if descriptor["storageType"] == "i":
        return z85_decode(descriptor["pathOrInlineDv"])
    assert dv_file is not None
    start = int(descriptor.get("offset") or 1) + 4
    return dv_file[start : start + int(descriptor["sizeInBytes"])]


def materialized_add(add: dict[str, Any], uri: str, size: int) -> dict[str, Any]:
    """The `add` of a materialized copy: no deletion vector, its own path and size, and stats
    that count only the rows left. The bounds stay those of the original file, which the
    rows left lie within, so they are marked as not tight (as Delta marks them after deletes).
    """
    cardinality = int(add["deletionVector"]["cardinality"])
    copy = {key: value for key, value in add.items() if key != "deletionVector"}
    copy["path"], copy["size"] = uri, size
    if add.get("stats"):
        stats = json.loads(add["stats"])
        stats["numRecords"] = max(int(stats.get("numRecords", 0)) - cardinality, 0)
        stats["tightBounds"] = False
        copy["stats"] = json.dumps(stats, separators=(",", ":"))
    return copy
