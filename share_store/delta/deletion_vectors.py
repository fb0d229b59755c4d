"""Deletion vectors (Delta protocol, "Deletion Vectors"): where one lives, and how one is written.

A serialized deletion vector is the magic number, then a portable 64-bit roaring
bitmap: a count of 32-bit bitmaps, each after the high 32 bits of its
positions, all little-endian. Inline vectors are that, Z85-encoded.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from pyroaring import BitMap

from share_store.errors import UnsupportedOperation

DV_MAGIC = 1681511377

Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
Z85_VALUES = {char: index for index, char in enumerate(Z85_ALPHABET)}


def z85_decode(text: str) -> bytes:
    if len(text) % 5:
        raise ValueError("Z85 text length must be a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            value = value * 85 + Z85_VALUES[char]
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Z85 of `data`, zero-padded to a multiple of 4 bytes (readers cut to `sizeInBytes`)."""
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for start in range(0, len(padded), 4):
        value = int.from_bytes(padded[start : start + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(Z85_ALPHABET[digit])
        out.append("".join(reversed(chunk)))
    return "".join(out)


def serialize_positions(positions: Iterable[int]) -> tuple[bytes, int]:
    """A deletion vector of row `positions` and how many rows it deletes."""
    groups: dict[int, list[int]] = {}
    for position in positions:
        groups.setdefault(position >> 32, []).append(position & 0xFFFFFFFF)
    parts = [DV_MAGIC.to_bytes(4, "little"), len(groups).to_bytes(8, "little")]
    count = 0
    for key in sorted(groups):
        bitmap = BitMap(groups[key])
        count += len(bitmap)
        parts += [key.to_bytes(4, "little"), bitmap.serialize()]
    return b"".join(parts), count


def dv_relative_path(descriptor: dict[str, Any]) -> str:
    """The table-relative path of an on-disk (`u`) deletion vector file."""
    encoded = descriptor["pathOrInlineDv"]
    prefix, encoded_uuid = encoded[:-20], encoded[-20:]
    try:
        file_uuid = uuid.UUID(bytes=z85_decode(encoded_uuid))
    except (KeyError, ValueError) as error:
        raise UnsupportedOperation("table has a malformed deletion vector descriptor") from error
    name = f"deletion_vector_{file_uuid}.bin"
    return f"{prefix}/{name}" if prefix else name


def dv_storage_path(descriptor: dict[str, Any]) -> str | None:
    """Table-relative path of the DV file, or None for an inline DV."""
    storage_type = descriptor.get("storageType")
    if storage_type == "i":
        return None
    if storage_type == "u":
        return dv_relative_path(descriptor)
    # `p` holds an absolute URI: it may point anywhere, so it is not shared.
    raise UnsupportedOperation("tables with deletion vectors stored at absolute paths cannot be shared")
