"""Deletion vectors as a Delta Sharing recipient gets them: decoded to the row positions they delete.

A deletion vector is the magic number 1681511377 (little-endian), then a
portable 64-bit roaring bitmap of row positions within its data file, which is
exactly pyroaring's `BitMap64` serialization. It comes inline (`i`: Z85 text
of those bytes) or in a file (`p`: a signed URL; `offset` is where a
big-endian length, the vector and its big-endian CRC-32 sit). `u` names a
path relative to the table, which only the table's owner can resolve.

This runs on executors: it imports nothing of the server's packages.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from pyroaring import BitMap64

MAGIC = 1681511377
Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUES = {char: index for index, char in enumerate(Z85_ALPHABET)}


class DeletionVectorError(ValueError):
    """A deletion vector that cannot be read as its descriptor says."""


def z85_decode(text: str) -> bytes:
    if len(text) % 5:
        raise DeletionVectorError("an inline deletion vector's Z85 text is not a multiple of 5 long")
    out = bytearray()
    try:
        for start in range(0, len(text), 5):
            value = 0
            for char in text[start : start + 5]:
                value = value * 85 + _Z85_VALUES[char]
            out += value.to_bytes(4, "big")
    except (KeyError, OverflowError) as error:
        raise DeletionVectorError("an inline deletion vector is not valid Z85") from error
    return bytes(out)


def framed_payload(content: bytes, size: int) -> bytes:
    """The vector in `content` (length, vector, CRC-32), checked against its length and checksum."""
    length = int.from_bytes(content[:4], "big")
    if length != size:
        raise DeletionVectorError(f"a deletion vector is {length} bytes long, its descriptor says {size}")
    if len(content) < size + 8:
        raise DeletionVectorError(f"a deletion vector's file ends {size + 8 - len(content)} bytes early")
    payload = content[4 : 4 + size]
    (crc,) = struct.unpack(">I", content[4 + size : 8 + size])
    if zlib.crc32(payload) != crc:
        raise DeletionVectorError("a deletion vector fails its CRC-32 check")
    return payload


def positions(payload: bytes, cardinality: int | None = None) -> np.ndarray:
    """The sorted row positions (uint64) a serialized vector deletes."""
    if len(payload) < 12 or int.from_bytes(payload[:4], "little") != MAGIC:
        raise DeletionVectorError("a deletion vector does not start with Delta's magic number")
    try:
        bitmap = BitMap64.deserialize(payload[4:])
    except ValueError as error:
        raise DeletionVectorError("a deletion vector is not a portable 64-bit roaring bitmap") from error
    rows = np.frombuffer(bitmap.to_array(), dtype=np.uint64)
    if cardinality is not None and len(rows) != cardinality:
        raise DeletionVectorError(
            f"a deletion vector deletes {len(rows)} rows, its descriptor says {cardinality}"
        )
    return rows


def deleted_rows(descriptor: dict[str, Any], get: Callable[[str, int, int], bytes]) -> np.ndarray:
    """The row positions a descriptor's vector deletes; `get(url, start, length)` fetches file ranges."""
    kind = descriptor.get("storageType")
    size = int(descriptor["sizeInBytes"])
    cardinality = descriptor.get("cardinality")
    expected = None if cardinality is None else int(cardinality)
    if kind == "i":
        return positions(z85_decode(descriptor["pathOrInlineDv"])[:size], expected)
    if kind == "p":
        offset = int(descriptor.get("offset") or 0)
        content = get(descriptor["pathOrInlineDv"], offset, size + 8)
        return positions(framed_payload(content, size), expected)
    if kind == "u":
        raise DeletionVectorError(
            "the server sent a deletion vector by its path inside the table (storageType 'u'), which "
            "a recipient cannot read; Delta Sharing servers send 'p' with a signed URL instead"
        )
    raise DeletionVectorError(f"unknown deletion vector storage type {kind!r}")


def kept(deleted: np.ndarray, start: int, length: int) -> np.ndarray | None:
    """A mask of the rows [start, start + length) of a file that survive, or None if all do."""
    low, high = np.searchsorted(deleted, [start, start + length])
    if low == high:
        return None
    mask = np.ones(length, dtype=bool)
    mask[(deleted[low:high] - np.uint64(start)).astype(np.intp)] = False
    return mask


def chosen(selected: np.ndarray, start: int, length: int) -> np.ndarray:
    """A mask of the rows [start, start + length) of a file that are among `selected` (sorted)."""
    low, high = np.searchsorted(selected, [start, start + length])
    mask = np.zeros(length, dtype=bool)
    mask[(selected[low:high] - np.uint64(start)).astype(np.intp)] = True
    return mask
