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

Inline vectors are served up to `MAX_INLINE_BYTES`; larger ones are refused until
a cache of Delta deletion vector files exists.

Equality deletes are resolved to positions elsewhere (`share_store.iceberg.equality`,
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
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import DataFileContent, FileFormat
from pyroaring import BitMap

from share_store.delta.deletion_vectors import DV_MAGIC, serialize_positions, z85_encode
from share_store.errors import ShareStoreError, UnsupportedOperation

PUFFIN_MAGIC = b"PFA1"
DV_BLOB_TYPE = "deletion-vector-v1"
#: Larger bitmaps would swell every response that lists the file.
MAX_INLINE_BYTES = 64 * 1024

Read = Callable[[str], bytes]
Descriptor = dict[str, Any]


class CorruptDeleteFile(ShareStoreError):
    """A delete file that does not say which rows are deleted: the snapshot cannot be served."""

    error_code = "INVALID_TABLE_DATA"
    status_code = 500


@dataclass(frozen=True)
class PuffinBlob:
    """One deletion vector in a Puffin file: where its framed bytes are, and how many rows it deletes."""

    offset: int
    length: int
    cardinality: int

    def payload(self, content: bytes) -> bytes:
        """The serialized vector (magic + bitmap), without its length and CRC."""
        return content[self.offset + 4 : self.offset + self.length - 4]


def puffin_blobs(content: bytes, path: str) -> dict[str, PuffinBlob]:
    """The deletion vector blobs of a Puffin file by the data file each applies to."""
    if len(content) < 12 or content[:4] != PUFFIN_MAGIC or content[-4:] != PUFFIN_MAGIC:
        raise CorruptDeleteFile(f"delete file {_name(path)} is not a Puffin file")
    flags = content[-8:-4]
    if flags[0] & 1:
        raise UnsupportedOperation(f"delete file {_name(path)} has a compressed Puffin footer")
    size = int.from_bytes(content[-12:-8], "little")
    start = len(content) - 12 - size
    if size <= 0 or start < 4 or content[start - 4 : start] != PUFFIN_MAGIC:
        raise CorruptDeleteFile(f"delete file {_name(path)} has a damaged Puffin footer")
    try:
        footer = json.loads(content[start : start + size])
        blobs: dict[str, PuffinBlob] = {}
        for blob in footer["blobs"]:
            if blob.get("type") != DV_BLOB_TYPE:
                continue
            if blob.get("compression-codec"):
                raise UnsupportedOperation(f"delete file {_name(path)} holds compressed deletion vectors")
            properties = blob.get("properties") or {}
            target = properties["referenced-data-file"]
            blobs[target] = PuffinBlob(
                int(blob["offset"]), int(blob["length"]), int(properties["cardinality"])
            )
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptDeleteFile(f"delete file {_name(path)} has an unreadable Puffin footer") from error
    return blobs


def check_blob(content: bytes, blob: PuffinBlob, path: str) -> None:
    """Refuse a blob that is not a whole Delta-compatible deletion vector of the stated cardinality."""
    end = blob.offset + blob.length
    if blob.offset < 4 or blob.length < 12 or end > len(content) - 12:
        raise CorruptDeleteFile(f"a deletion vector in {_name(path)} lies outside the file")
    framed = content[blob.offset : end]
    (length,) = struct.unpack(">I", framed[:4])
    payload, (crc,) = framed[4:-4], struct.unpack(">I", framed[-4:])
    if length != blob.length - 8 or int.from_bytes(payload[:4], "little") != DV_MAGIC:
        raise CorruptDeleteFile(f"a deletion vector in {_name(path)} has a bad length or magic number")
    if zlib.crc32(payload) != crc:
        raise CorruptDeleteFile(f"a deletion vector in {_name(path)} fails its CRC check")
    if cardinality(payload) != blob.cardinality:
        raise CorruptDeleteFile(f"a deletion vector in {_name(path)} has another cardinality than recorded")


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
            f"the deletes of {_name(data_file)} need a {len(payload):,}-byte deletion vector, larger "
            f"than the {MAX_INLINE_BYTES:,} bytes served inline"
        )
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(payload),
        "sizeInBytes": len(payload),
        "cardinality": count,
    }


class DeleteFiles:
    """Reads delete files once each (they never change) and answers each data file's deletion vector."""

    def __init__(self, read: Read) -> None:
        self.read = read
        self._puffins: dict[str, dict[str, tuple[PuffinBlob, bytes]]] = {}
        self._positions: dict[str, dict[str, list[int]]] = {}

    def descriptor(
        self, data_file: str, delete_files: Iterable[Any], resolved: Iterable[int] = ()
    ) -> Descriptor | None:
        """The deletion vector for `data_file` given the delete files pyiceberg's planning matched.

        `resolved` are positions deleted otherwise (its equality deletes, resolved).
        """
        vector: tuple[PuffinBlob, bytes] | None = None
        deleted: set[int] = set(resolved)
        for delete in delete_files:
            if delete.content == DataFileContent.EQUALITY_DELETES:
                # Our planning takes them out to resolve them; only a catalog's own
                # (server-side) planning would hand them over here.
                raise UnsupportedOperation(
                    "equality deletes planned by the catalog (server-side scan planning) are not served"
                )
            if delete.file_format == FileFormat.PUFFIN:
                # pyiceberg matches delete files by partition and sequence number only:
                # a vector applies to the one data file its blob names, no other.
                vector = self._puffin(delete.file_path).get(data_file) or vector
            elif delete.file_format == FileFormat.PARQUET:
                deleted.update(self._parquet(delete.file_path).get(data_file, ()))
            else:
                raise UnsupportedOperation(
                    f"position delete files in {delete.file_format.name} are not served yet"
                )
        if vector is not None and not deleted:
            blob, payload = vector
            return inline_descriptor(payload, blob.cardinality, data_file)
        if vector is not None:  # a vector and older position deletes: serve their union
            deleted.update(positions(vector[1]))
        if not deleted:
            return None
        payload, count = serialize_positions(deleted)
        return inline_descriptor(payload, count, data_file)

    def _puffin(self, path: str) -> dict[str, tuple[PuffinBlob, bytes]]:
        vectors = self._puffins.get(path)
        if vectors is None:
            content = self.read(path)
            blobs = puffin_blobs(content, path)
            for blob in blobs.values():
                check_blob(content, blob, path)
            vectors = {target: (blob, blob.payload(content)) for target, blob in blobs.items()}
            self._puffins[path] = vectors
        return vectors

    def _parquet(self, path: str) -> dict[str, list[int]]:
        found = self._positions.get(path)
        if found is None:
            content = self.read(path)  # a vanished file raises as the reader does for any file
            try:
                found = positions_by_file(content)
            except (OSError, ValueError, KeyError) as error:
                raise CorruptDeleteFile(f"position delete file {_name(path)} cannot be read") from error
            self._positions[path] = found
        return found


def _name(path: str) -> str:
    # Recipients see file names, never where the provider keeps them.
    return path.rsplit("/", 1)[-1]
