"""`share_store.iceberg.deletes` on bytes: Puffin deletion vectors and position deletes, good and damaged."""

from __future__ import annotations

import io
import json
import zlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent, FileFormat

from share_store.delta.deletion_vectors import serialize_positions, z85_decode
from share_store.errors import UnsupportedOperation
from share_store.iceberg import deletes
from share_store.iceberg.deletes import CorruptDeleteFile, DeleteFiles

DATA_A = "s3://bucket/t/data/a.parquet"
DATA_B = "s3://bucket/t/data/b.parquet"


def framed(positions: list[int]) -> bytes:
    payload, _ = serialize_positions(positions)
    return len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")


def puffin(vectors: dict[str, list[int]], cardinality_of: dict[str, int] | None = None) -> bytes:
    """A Puffin file as Iceberg writers make one: magic, blobs, magic, footer JSON, size, flags, magic."""
    body = bytearray(deletes.PUFFIN_MAGIC)
    blobs = []
    for target, positions in vectors.items():
        blob = framed(positions)
        count = (cardinality_of or {}).get(target, len(set(positions)))
        blobs.append(
            {
                "type": "deletion-vector-v1",
                "fields": [2147483645],
                "snapshot-id": 1,
                "sequence-number": 1,
                "offset": len(body),
                "length": len(blob),
                "properties": {"referenced-data-file": target, "cardinality": str(count)},
            }
        )
        body += blob
    footer = json.dumps({"blobs": blobs}).encode()
    return bytes(
        body + deletes.PUFFIN_MAGIC + footer + len(footer).to_bytes(4, "little") + bytes(4) + b"PFA1"
    )


def position_deletes(rows: list[tuple[str, int]]) -> bytes:
    sink = io.BytesIO()
    table = pa.table({"file_path": [r[0] for r in rows], "pos": pa.array([r[1] for r in rows], pa.int64())})
    pq.write_table(table, sink)
    return sink.getvalue()


@dataclass
class DeleteFile:
    file_path: str
    file_format: FileFormat = FileFormat.PUFFIN
    content: DataFileContent = DataFileContent.POSITION_DELETES


def inline_positions(descriptor: dict) -> list[int]:
    payload = z85_decode(descriptor["pathOrInlineDv"])[: descriptor["sizeInBytes"]]
    return sorted(deletes.positions(payload))


def test_a_puffin_vector_is_served_inline_with_its_own_bytes() -> None:
    content = puffin({DATA_A: [1, 5, 2**32 + 3], DATA_B: [0]})
    files = DeleteFiles({"p.puffin": content}.__getitem__)
    descriptor = files.descriptor(DATA_A, [DeleteFile("p.puffin")])
    assert descriptor is not None and descriptor["storageType"] == "i"
    assert descriptor["cardinality"] == 3 and inline_positions(descriptor) == [1, 5, 2**32 + 3]
    payload = z85_decode(descriptor["pathOrInlineDv"])[: descriptor["sizeInBytes"]]
    assert payload in content  # the blob's payload, not a re-encoding of it


def test_a_vector_naming_another_data_file_does_not_apply() -> None:
    files = DeleteFiles({"p.puffin": puffin({DATA_B: [0]})}.__getitem__)
    assert files.descriptor(DATA_A, [DeleteFile("p.puffin")]) is None


def test_position_deletes_become_one_bitmap_per_data_file() -> None:
    parquet = {
        "d1.parquet": position_deletes([(DATA_A, 7), (DATA_B, 1), (DATA_A, 2)]),
        "d2.parquet": position_deletes([(DATA_A, 2), (DATA_A, 9)]),
    }
    files = DeleteFiles(parquet.__getitem__)
    found = [DeleteFile(name, FileFormat.PARQUET) for name in parquet]
    descriptor = files.descriptor(DATA_A, found)
    assert descriptor is not None and inline_positions(descriptor) == [2, 7, 9]
    assert descriptor["cardinality"] == 3


def test_a_vector_and_older_position_deletes_are_united() -> None:
    store = {"p.puffin": puffin({DATA_A: [1]}), "d.parquet": position_deletes([(DATA_A, 4)])}
    files = DeleteFiles(store.__getitem__)
    descriptor = files.descriptor(
        DATA_A, [DeleteFile("p.puffin"), DeleteFile("d.parquet", FileFormat.PARQUET)]
    )
    assert descriptor is not None and inline_positions(descriptor) == [1, 4]


def test_delete_files_are_read_once() -> None:
    reads: list[str] = []
    content = puffin({DATA_A: [1], DATA_B: [2]})

    def read(path: str) -> bytes:
        reads.append(path)
        return content

    files = DeleteFiles(read)
    files.descriptor(DATA_A, [DeleteFile("p.puffin")])
    files.descriptor(DATA_B, [DeleteFile("p.puffin")])
    assert reads == ["p.puffin"]


def test_equality_deletes_and_oversized_vectors_are_refused_clearly() -> None:
    files = DeleteFiles({}.__getitem__)
    equality = DeleteFile("e.parquet", FileFormat.PARQUET, DataFileContent.EQUALITY_DELETES)
    with pytest.raises(UnsupportedOperation, match="equality deletes"):
        files.descriptor(DATA_A, [equality])
    many = list(range(0, 4_000_000, 3))  # no runs: a large bitmap
    big = DeleteFiles({"d.parquet": position_deletes([(DATA_A, p) for p in many])}.__getitem__)
    with pytest.raises(UnsupportedOperation, match=r"a\.parquet need a .*-byte deletion vector"):
        big.descriptor(DATA_A, [DeleteFile("d.parquet", FileFormat.PARQUET)])


def damaged(content: bytes, at: int, value: int) -> bytes:
    return content[:at] + bytes([value]) + content[at + 1 :]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda c: b"XXXX" + c[4:], "is not a Puffin file"),
        (lambda c: damaged(c, 9, c[9] ^ 0xFF), "bad length or magic number"),  # the vector's magic
        (lambda c: damaged(c, 20, c[20] ^ 0x01), "fails its CRC check"),  # a bitmap byte
        (lambda c: c[:-12] + (10**6).to_bytes(4, "little") + c[-8:], "damaged Puffin footer"),
    ],
)
def test_a_damaged_puffin_file_is_refused_and_nothing_is_kept(damage, message: str) -> None:
    content = damage(puffin({DATA_A: [1, 2, 3]}))
    files = DeleteFiles({"p.puffin": content}.__getitem__)
    for _ in range(2):  # refused again: a failure is not cached as a success
        with pytest.raises(CorruptDeleteFile, match=message):
            files.descriptor(DATA_A, [DeleteFile("p.puffin")])


def test_a_vector_whose_cardinality_disagrees_or_lies_outside_the_file_is_refused() -> None:
    wrong = puffin({DATA_A: [1, 2, 3]}, cardinality_of={DATA_A: 2})
    with pytest.raises(CorruptDeleteFile, match="another cardinality"):
        DeleteFiles({"p": wrong}.__getitem__).descriptor(DATA_A, [DeleteFile("p")])
    content = puffin({DATA_A: [1]})
    (blob,) = deletes.puffin_blobs(content, "p").values()
    outside = deletes.PuffinBlob(len(content), blob.length, 1)
    with pytest.raises(CorruptDeleteFile, match="outside the file"):
        deletes.check_blob(content, outside, "p")


@pytest.mark.parametrize("kind", [FileFormat.PUFFIN, FileFormat.PARQUET])
def test_a_vanished_delete_file_is_missing_not_corrupt(kind: FileFormat) -> None:
    # The table reader turns FileNotFoundError into "table files missing".
    def read(path: str) -> bytes:
        raise FileNotFoundError(path)

    with pytest.raises(FileNotFoundError):
        DeleteFiles(read).descriptor(DATA_A, [DeleteFile("gone", kind)])


def test_an_unreadable_position_delete_file_is_corrupt() -> None:
    files = DeleteFiles({"d.parquet": b"not parquet"}.__getitem__)
    with pytest.raises(CorruptDeleteFile, match=r"d\.parquet cannot be read"):
        files.descriptor(DATA_A, [DeleteFile("d.parquet", FileFormat.PARQUET)])
