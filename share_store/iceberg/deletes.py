"""Iceberg row-level deletes as Delta deletion vectors, so delta-format readers drop the rows.

Two kinds of delete files are served:

- **v3 deletion vectors** (`deletion-vector-v1` blobs in Puffin files). A blob is
  byte for byte a Delta on-disk deletion vector: a 4-byte big-endian length, the
  magic number and a portable 64-bit roaring bitmap, then a big-endian CRC-32 of
  them. Pointing the `add` at the blob inside the Puffin file would copy nothing,
  but delta-kernel (the Python client's delta path) checks that a deletion vector
  file starts with the format version byte 1, and a Puffin file starts with
  `PFA1`. So the blob's payload is served inline (`storageType: "i"`, Z85).
- **v2 position deletes** (Parquet files of `file_path`, `pos`). The positions that
  apply to a data file become a bitmap, served inline in the same way.

Small vectors are served inline; larger ones are written once as Delta deletion
vector files to the cache of derived files (`iceberg/derived.py`) and served by
signed URL. Without a writable cache, vectors up to `MAX_INLINE_BYTES` are still
inlined and larger ones refused.

Equality deletes are resolved to positions elsewhere (`share_store.iceberg.equality.positions`,
which reads the equality columns of the data files) and united here with the
position deletes of the same data file. Every blob is checked (framing, magic, CRC,
cardinality against the manifest) before it is pointed at, and a file that fails
the check makes the snapshot unreadable, never served with rows that should be
gone. The I/O goes through a `read(path) -> bytes` callable, so the mapping here
is tested on bytes alone.
"""

from __future__ import annotations

import io
import json
import logging
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pyiceberg.manifest import DataFileContent, FileFormat
from pyroaring import BitMap

from share_store.delta.deletion_vectors import DV_MAGIC, serialize_positions, z85_encode
from share_store.errors import ShareStoreError, UnsupportedOperation
from share_store.iceberg.derived import DerivedFiles
from share_store.tables.options import MAX_INLINE_BYTES

log = logging.getLogger(__name__)

PUFFIN_MAGIC = b"PFA1"
DV_BLOB_TYPE = "deletion-vector-v1"

Read = Callable[[str], bytes]
#: The positions a data file's equality deletes delete, resolved when called.
Resolve = Callable[[], Iterable[int]]
Descriptor = dict[str, Any]


class VectorSource(Protocol):
    """What the snapshot mapping asks for each data file that may have deletes."""

    def may_delete(self, data_file: str) -> bool:
        """Whether `data_file` may have a vector besides its task's delete files (index or live vector)."""
        ...

    def descriptor(
        self, data_file: str, delete_files: Iterable[Any], resolve: Resolve | None = None
    ) -> Descriptor | None: ...


class CorruptDeleteFile(ShareStoreError):
    """A delete file that does not say which rows are deleted: the snapshot cannot be served."""

    error_code = "INVALID_TABLE_DATA"
    status_code = 500


@dataclass(frozen=True)
class LiveVector:
    """One live deletion vector (`live_vectors` reads them): its data file and where its blob is."""

    data_file: str
    puffin_path: str
    offset: int
    length: int
    cardinality: int
    #: The data sequence number of the vector: it applies to data files at or below it.
    sequence_number: int


@dataclass(frozen=True)
class PuffinBlob:
    """One deletion vector in a Puffin file: where its framed bytes are, and how many rows it deletes."""

    offset: int
    length: int
    cardinality: int
    #: The data file the footer says the vector belongs to.
    data_file: str = ""

    def payload(self, content: bytes) -> bytes:
        """The serialized vector (magic + bitmap), without its length and CRC."""
        return content[self.offset + 4 : self.offset + self.length - 4]


def puffin_blobs(content: bytes, path: str) -> dict[int, PuffinBlob]:
    """The deletion vector blobs a Puffin file's footer lists, by offset.

    The footer lists every blob the file was written with, including vectors a
    later commit replaced: which one is live is for the manifests to say.
    """
    if len(content) < 12 or content[:4] != PUFFIN_MAGIC or content[-4:] != PUFFIN_MAGIC:
        raise CorruptDeleteFile(f"delete file {file_name(path)} is not a Puffin file")
    flags = content[-8:-4]
    if flags[0] & 1:
        raise UnsupportedOperation(f"delete file {file_name(path)} has a compressed Puffin footer")
    size = int.from_bytes(content[-12:-8], "little")
    start = len(content) - 12 - size
    if size <= 0 or start < 4 or content[start - 4 : start] != PUFFIN_MAGIC:
        raise CorruptDeleteFile(f"delete file {file_name(path)} has a damaged Puffin footer")
    try:
        footer = json.loads(content[start : start + size])
        blobs: dict[int, PuffinBlob] = {}
        for blob in footer["blobs"]:
            if blob.get("type") != DV_BLOB_TYPE:
                continue
            if blob.get("compression-codec"):
                raise UnsupportedOperation(f"delete file {file_name(path)} holds compressed deletion vectors")
            properties = blob.get("properties") or {}
            offset = int(blob["offset"])
            blobs[offset] = PuffinBlob(
                offset,
                int(blob["length"]),
                int(properties["cardinality"]),
                properties["referenced-data-file"],
            )
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptDeleteFile(f"delete file {file_name(path)} has an unreadable Puffin footer") from error
    return blobs


def check_blob(content: bytes, blob: PuffinBlob, path: str) -> None:
    """Refuse a blob that is not a whole Delta-compatible deletion vector of the stated cardinality."""
    end = blob.offset + blob.length
    if blob.offset < 4 or blob.length < 12 or end > len(content) - 12:
        raise CorruptDeleteFile(f"a deletion vector in {file_name(path)} lies outside the file")
    framed = content[blob.offset : end]
    (length,) = struct.unpack(">I", framed[:4])
    payload, (crc,) = framed[4:-4], struct.unpack(">I", framed[-4:])
    if length != blob.length - 8 or int.from_bytes(payload[:4], "little") != DV_MAGIC:
        raise CorruptDeleteFile(f"a deletion vector in {file_name(path)} has a bad length or magic number")
    if zlib.crc32(payload) != crc:
        raise CorruptDeleteFile(f"a deletion vector in {file_name(path)} fails its CRC check")
    if cardinality(payload) != blob.cardinality:
        raise CorruptDeleteFile(
            f"a deletion vector in {file_name(path)} has another cardinality than recorded"
        )


def bitmaps(payload: bytes) -> Iterator[tuple[int, BitMap]]:
    """The 32-bit bitmaps of a serialized deletion vector, each with its high 32 bits."""
    count = int.from_bytes(payload[4:12], "little")
    position = 12
    for _ in range(count):
        key = int.from_bytes(payload[position : position + 4], "little")
        bitmap = BitMap.deserialize(payload[position + 4 :])
        position += 4 + len(bitmap.serialize())
        yield key, bitmap


def cardinality(payload: bytes) -> int:
    """Rows deleted by a serialized deletion vector (magic + portable 64-bit roaring bitmap)."""
    return sum(len(bitmap) for _, bitmap in bitmaps(payload))


def positions(payload: bytes) -> Iterator[int]:
    """The row positions a serialized deletion vector deletes."""
    for key, bitmap in bitmaps(payload):
        yield from ((key << 32) | value for value in bitmap)


def positions_by_file(content: bytes) -> dict[str, list[int]]:
    """The positions a Parquet position-delete file deletes, by data file path."""
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(content), columns=["file_path", "pos"])
    found: dict[str, list[int]] = {}
    for path, position in zip(table["file_path"].to_pylist(), table["pos"].to_pylist(), strict=True):
        found.setdefault(path, []).append(position)
    return found


def inline_descriptor(payload: bytes, count: int, data_file: str) -> Descriptor:
    """An inline deletion vector of a serialized `payload`, refused when too large to inline."""
    if len(payload) > MAX_INLINE_BYTES:
        raise UnsupportedOperation(
            f"the deletes of {file_name(data_file)} need a {len(payload):,}-byte deletion vector, larger "
            f"than the {MAX_INLINE_BYTES:,} bytes served inline, and the server has no cache to write "
            "deletion vector files to"
        )
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(payload),
        "sizeInBytes": len(payload),
        "cardinality": count,
    }


class DeleteFiles:
    """Reads delete files once each (they never change) and answers each data file's deletion vector.

    Vectors up to `inline_bytes` are inlined; larger ones go to `derived`'s
    deletion vector files when there is a cache to write them to.
    """

    def __init__(self, read: Read, derived: DerivedFiles | None = None, inline_bytes: int = 1024) -> None:
        self.read = read
        self.derived = derived
        self.inline_bytes = inline_bytes
        #: Puffin file → its checked blobs by offset, with their payloads (Puffin files never change).
        self._puffins: dict[str, dict[int, tuple[PuffinBlob, bytes]]] = {}
        self._positions: dict[str, dict[str, list[int]]] = {}

    def descriptor(
        self,
        data_file: str,
        delete_files: Iterable[Any],
        resolve: Resolve | None = None,
        vector: LiveVector | None = None,
    ) -> Descriptor | None:
        """The deletion vector for `data_file`: its live `vector`, united with the other deletes.

        `delete_files` are the position delete files pyiceberg's planning matched;
        `resolve` gives the positions deleted otherwise (its equality deletes, resolved).
        """
        found = self._live(vector) if vector is not None else None
        deleted: set[int] = set(resolve()) if resolve is not None else set()
        for delete in delete_files:
            if delete.content == DataFileContent.EQUALITY_DELETES:
                # Our planning takes them out to resolve them; only a catalog's own
                # (server-side) planning would hand them over here.
                raise UnsupportedOperation(
                    "equality deletes planned by the catalog (server-side scan planning) are not served"
                )
            if delete.file_format == FileFormat.PUFFIN:
                # Only a catalog's own planning hands over Puffin files: it matched this
                # one to the data file, so the file's blob for it is the live vector.
                planned = self._named(delete.file_path, data_file)
                if planned is not None and found is not None:
                    raise CorruptDeleteFile(f"data file {file_name(data_file)} has two live deletion vectors")
                found = planned or found
            elif delete.file_format == FileFormat.PARQUET:
                deleted.update(self._parquet(delete.file_path).get(data_file, ()))
            else:
                raise UnsupportedOperation(
                    f"position delete files in {delete.file_format.name} are not served yet"
                )
        if found is not None and not deleted:
            blob, payload = found
            return self.serve(payload, blob.cardinality, data_file)
        if found is not None:  # a vector and older position deletes: serve their union
            deleted.update(positions(found[1]))
        if not deleted:
            return None
        payload, count = serialize_positions(deleted)
        return self.serve(payload, count, data_file)

    def _live(self, vector: LiveVector) -> tuple[PuffinBlob, bytes]:
        """The blob a live manifest entry points at, checked against what the footer says of it."""
        found = self._puffin(vector.puffin_path).get(vector.offset)
        if found is None or found[0].length != vector.length:
            raise CorruptDeleteFile(
                f"delete file {file_name(vector.puffin_path)} has no deletion vector where its manifest "
                f"entry for {file_name(vector.data_file)} points"
            )
        blob = found[0]
        if blob.data_file != vector.data_file or blob.cardinality != vector.cardinality:
            raise CorruptDeleteFile(
                f"a deletion vector in {file_name(vector.puffin_path)} disagrees with its manifest entry "
                f"(data file {file_name(vector.data_file)})"
            )
        return found

    def _named(self, path: str, data_file: str) -> tuple[PuffinBlob, bytes] | None:
        """The one blob of a Puffin file for `data_file`, if any; two make the file corrupt."""
        named = [found for found in self._puffin(path).values() if found[0].data_file == data_file]
        if len(named) > 1:
            raise CorruptDeleteFile(
                f"delete file {file_name(path)} holds two deletion vectors for {file_name(data_file)}"
            )
        return named[0] if named else None

    def serve(self, payload: bytes, count: int, data_file: str) -> Descriptor:
        """The descriptor of a vector: inline when small, else a deletion vector file in the cache."""
        if len(payload) <= self.inline_bytes or self.derived is None:
            return inline_descriptor(payload, count, data_file)
        try:
            return self.derived.dv_descriptor(payload, count)
        except UnsupportedOperation:
            if len(payload) > MAX_INLINE_BYTES:
                raise
            log.warning("the cache of derived files is not writable: serving a deletion vector inline")
            return inline_descriptor(payload, count, data_file)

    def _puffin(self, path: str) -> dict[int, tuple[PuffinBlob, bytes]]:
        vectors = self._puffins.get(path)
        if vectors is None:
            content = self.read(path)
            blobs = puffin_blobs(content, path)
            for blob in blobs.values():
                check_blob(content, blob, path)
            vectors = {offset: (blob, blob.payload(content)) for offset, blob in blobs.items()}
            self._puffins[path] = vectors
        return vectors

    def _parquet(self, path: str) -> dict[str, list[int]]:
        found = self._positions.get(path)
        if found is None:
            content = self.read(path)  # a vanished file raises as the reader does for any file
            try:
                found = positions_by_file(content)
            except (OSError, ValueError, KeyError) as error:
                raise CorruptDeleteFile(f"position delete file {file_name(path)} cannot be read") from error
            self._positions[path] = found
        return found


class SnapshotVectors:
    """One snapshot's vectors: those its index recorded, the others computed from its delete files.

    `live` holds the snapshot's live deletion vectors by data file (see
    `live_vectors`). `computed` holds what the index lacked (None for a data
    file its delete files leave whole), to be recorded for the next server to start.
    """

    def __init__(
        self,
        deletes: DeleteFiles,
        recorded: dict[str, Descriptor | None],
        live: dict[str, LiveVector] | None = None,
    ) -> None:
        self.deletes = deletes
        self.recorded = recorded
        self.live = live or {}
        self.computed: dict[str, Descriptor | None] = {}

    def may_delete(self, data_file: str) -> bool:
        return data_file in self.recorded or data_file in self.live

    def descriptor(
        self, data_file: str, delete_files: Iterable[Any], resolve: Resolve | None = None
    ) -> Descriptor | None:
        if data_file in self.recorded:
            return self.recorded[data_file]
        found = self.deletes.descriptor(data_file, delete_files, resolve, self.live.get(data_file))
        self.computed[data_file] = found
        return found


def file_name(path: str) -> str:
    """A file's name without its folders, for messages."""
    # Recipients see file names, never where the provider keeps them.
    return path.rsplit("/", 1)[-1]
