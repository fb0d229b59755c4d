"""Copy an Iceberg table written on local disk into an S3 bucket, paths and all.

Spark 3.5 + Iceberg runs here without S3 jars, so the tables with deletes are
written locally (`tests/iceberg_writer.py`). Their metadata names files by
absolute path: in the metadata JSON, in manifests and manifest lists (Avro,
compressed), in position delete files (Parquet) and in deletion vectors'
Puffin footers. Relocating replaces the local prefix with an `s3://` URI of the
very same length, so every offset stays valid: Avro blocks are decompressed,
edited and compressed again; Puffin footers (uncompressed, as Iceberg writes
them) are edited in place; position delete files are rewritten by pyarrow.
A test helper only: the server never rewrites a provider's table.
"""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

AVRO_MAGIC = b"Obj\x01"


def same_length_uri(local_prefix: str, bucket: str) -> str:
    """`s3://bucket/<padding>` exactly as long as `local_prefix`."""
    head = f"s3://{bucket}/"
    padding = len(local_prefix) - len(head)
    assert padding >= 1, "the local prefix is too short to relocate into this bucket"
    return head + "p" * padding


def _read_long(data: bytes, offset: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), offset


def _write_long(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _header_end(data: bytes) -> tuple[int, dict[bytes, bytes]]:
    """Where an Avro container's header ends (after the sync marker), and its metadata."""
    assert data[:4] == AVRO_MAGIC
    offset, meta = 4, {}
    while True:
        count, offset = _read_long(data, offset)
        if count == 0:
            break
        if count < 0:
            count = -count
            _, offset = _read_long(data, offset)  # the block's size in bytes
        for _ in range(count):
            length, offset = _read_long(data, offset)
            key = data[offset : offset + length]
            offset += length
            length, offset = _read_long(data, offset)
            meta[key] = data[offset : offset + length]
            offset += length
    return offset + 16, meta


def relocate_avro(data: bytes, old: bytes, new: bytes) -> bytes:
    end, meta = _header_end(data)
    codec = meta.get(b"avro.codec", b"null")
    assert codec in (b"null", b"deflate"), f"codec {codec!r} not handled"
    sync = data[end - 16 : end]
    out = io.BytesIO()
    out.write(data[:end].replace(old, new))
    offset = end
    while offset < len(data):
        count, offset = _read_long(data, offset)
        size, offset = _read_long(data, offset)
        block = data[offset : offset + size]
        offset += size
        assert data[offset : offset + 16] == sync
        offset += 16
        if codec == b"deflate":
            plain = zlib.decompress(block, -15).replace(old, new)
            packer = zlib.compressobj(9, zlib.DEFLATED, -15)
            block = packer.compress(plain) + packer.flush()
        else:
            block = block.replace(old, new)
        out.write(_write_long(count) + _write_long(len(block)) + block + sync)
    return out.getvalue()


def relocate_puffin(data: bytes, old: bytes, new: bytes) -> bytes:
    flags = int.from_bytes(data[-8:-4], "little")
    assert flags & 1 == 0, "a compressed Puffin footer is not handled"
    return data.replace(old, new)


def relocate_position_deletes(data: bytes, old: str, new: str) -> bytes:
    table = pq.read_table(pa.BufferReader(data))
    index = table.schema.get_field_index("file_path")
    paths = [path.replace(old, new, 1) for path in table.column("file_path").to_pylist()]
    field = table.schema.field(index)
    table = table.set_column(index, field, pa.array(paths, field.type))
    sink = io.BytesIO()
    # Small enough to pad: no Arrow schema copy, no statistics (the originals are Spark's, with both).
    pq.write_table(table, sink, compression="zstd", store_schema=False, write_statistics=False)
    return same_size(sink.getvalue(), len(data))


def same_size(parquet: bytes, size: int) -> bytes:
    """`parquet` padded to `size` bytes, as the manifests record it (engines such as DuckDB read the
    footer at the recorded size). The padding goes before the footer: column chunks are found by
    their offsets from the start, so bytes between the last one and the footer are never read."""
    footer_length = int.from_bytes(parquet[-8:-4], "little")
    footer_start = len(parquet) - 8 - footer_length
    padding = size - len(parquet)
    assert padding >= 0, "the rewritten delete file is larger than the original"
    return parquet[:footer_start] + b"\0" * padding + parquet[footer_start:]


def relocate_table(table_dir: Path, local_prefix: str, s3_prefix: str, s3: Any, bucket: str) -> str:
    """Upload the table under `table_dir` with its paths moved; the new metadata file's URI.

    `local_prefix` is how the table's files name their directory's root (as
    the writer saw it) and `s3_prefix` its same-length replacement.
    """
    assert len(local_prefix) == len(s3_prefix)
    old, new = local_prefix.encode(), s3_prefix.encode()
    key_root = s3_prefix.removeprefix(f"s3://{bucket}/")
    latest = max(table_dir.glob("metadata/v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    for path in table_dir.rglob("*"):
        if not path.is_file() or path.name.startswith(".") or path.suffix == ".crc":
            continue
        data = path.read_bytes()
        if path.suffix == ".avro":
            data = relocate_avro(data, old, new)
        elif path.suffix == ".puffin":
            data = relocate_puffin(data, old, new)
        elif path.name.endswith("-deletes.parquet"):
            data = relocate_position_deletes(data, local_prefix, s3_prefix)
        elif path.name.endswith(".metadata.json"):
            data = json.dumps(json.loads(data.decode().replace(local_prefix, s3_prefix))).encode()
        relative = str(path.resolve()).removeprefix(local_prefix).lstrip("/")
        s3.put_object(Bucket=bucket, Key=f"{key_root}/{relative}", Body=data)
    return latest.resolve().as_posix().replace(local_prefix, s3_prefix, 1)
