"""Where a deletion vector lives: descriptor → object key (Delta protocol, "Deletion Vectors")."""

from __future__ import annotations

import uuid
from typing import Any

from share_store.errors import UnsupportedOperation

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
