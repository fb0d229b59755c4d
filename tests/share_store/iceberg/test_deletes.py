"""`share_store.iceberg.deletes` on bytes (Puffin deletion vectors, position deletes, good and damaged),
and `live_vectors` on hand-written v3 delete manifests."""

from __future__ import annotations

import io
import json
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import DataFileContent, FileFormat, ManifestContent, ManifestEntryStatus
from pyiceberg.typedef import Record
from pyiceberg.types import StructType

from share_store.delta.deletion_vectors import serialize_positions, z85_decode
from share_store.errors import UnsupportedOperation
from share_store.iceberg import deletes, live_vectors
from share_store.iceberg.deletes import CorruptDeleteFile, DeleteFiles, LiveVector
from share_store.iceberg.planning import Plan, applicable_vectors

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


# -- live deletion vectors: a data file's vector comes from its live manifest entry ---------------


def live_vector(data_file: str, puffin_path: str, content: bytes, sequence_number: int = 1) -> LiveVector:
    """The manifest entry's view of `data_file`'s blob in a Puffin file made by `puffin`."""
    (blob,) = [b for b in deletes.puffin_blobs(content, puffin_path).values() if b.data_file == data_file]
    return LiveVector(data_file, puffin_path, blob.offset, blob.length, blob.cardinality, sequence_number)


def test_a_replaced_vector_left_in_a_live_puffin_file_is_never_served() -> None:
    # The DELETE's Puffin file holds A's and B's vectors; an UPDATE replaced A's with a new
    # file, and B's entry keeps the old file live. Its footer still names A's old vector.
    old = puffin({DATA_A: [1], DATA_B: [2]})
    new = puffin({DATA_A: [1, 3, 4]})
    files = DeleteFiles({"old.puffin": old, "new.puffin": new}.__getitem__)
    served = files.descriptor(DATA_A, [], vector=live_vector(DATA_A, "new.puffin", new))
    assert served is not None and inline_positions(served) == [1, 3, 4]
    served = files.descriptor(DATA_B, [], vector=live_vector(DATA_B, "old.puffin", old))
    assert served is not None and inline_positions(served) == [2]


def test_a_manifest_entry_that_disagrees_with_its_puffin_file_is_corrupt() -> None:
    content = puffin({DATA_A: [1], DATA_B: [2, 3]})
    files = DeleteFiles({"p.puffin": content}.__getitem__)
    vector = live_vector(DATA_A, "p.puffin", content)
    with pytest.raises(
        CorruptDeleteFile, match=r"no deletion vector where its manifest entry for a\.parquet"
    ):
        files.descriptor(DATA_A, [], vector=replace(vector, offset=vector.offset + 1))
    # B's blob, claimed by A's entry: the footer says whose it is.
    elsewhere = live_vector(DATA_B, "p.puffin", content)
    with pytest.raises(CorruptDeleteFile, match="disagrees with its manifest entry"):
        files.descriptor(DATA_A, [], vector=replace(elsewhere, data_file=DATA_A))


def test_two_vectors_for_one_data_file_in_a_catalogs_plan_are_corrupt_not_a_choice() -> None:
    store = {"one.puffin": puffin({DATA_A: [1]}), "two.puffin": puffin({DATA_A: [2]})}
    files = DeleteFiles(store.__getitem__)
    with pytest.raises(CorruptDeleteFile, match=r"a\.parquet has two live deletion vectors"):
        files.descriptor(DATA_A, [DeleteFile("one.puffin"), DeleteFile("two.puffin")])


ADDED, EXISTING, DELETED = (
    ManifestEntryStatus.ADDED,
    ManifestEntryStatus.EXISTING,
    ManifestEntryStatus.DELETED,
)


def delete_manifest(
    path: Path, entries: list[tuple[ManifestEntryStatus, int | None, str, int | None]]
) -> Any:
    """A v3 delete manifest of Puffin entries (status, sequence number, referenced data file, offset)."""
    schema = live_vectors.ENTRY_SCHEMA
    data_file_type = schema.find_field("data_file").field_type
    assert isinstance(data_file_type, StructType)
    records = []
    for status, sequence_number, target, offset in entries:
        values = {
            "content": DataFileContent.POSITION_DELETES.value,
            "file_path": f"{target}.puffin",
            "file_format": "PUFFIN",
            "partition": Record(),
            "record_count": 3,
            "file_size_in_bytes": 100,
            "referenced_data_file": target,
            "content_offset": offset,
            "content_size_in_bytes": None if offset is None else 20,
        }
        data_file = Record(*[values.get(field.name) for field in data_file_type.fields])
        entry: dict[str, Any] = {"status": status.value, "snapshot_id": 1, "sequence_number": sequence_number}
        entry["data_file"] = data_file
        records.append(Record(*[entry.get(field.name) for field in schema.fields]))
    io = PyArrowFileIO()
    with AvroOutputFile[Any](io.new_output(str(path)), schema, "manifest_entry") as output:
        output.write_block(records)
    return SimpleNamespace(manifest_path=str(path), content=ManifestContent.DELETES, sequence_number=9), io


def test_live_vectors_come_from_live_entries_with_their_sequence_numbers(tmp_path: Path) -> None:
    manifest, io = delete_manifest(
        tmp_path / "m.avro",
        [(DELETED, 4, DATA_A, 4), (EXISTING, 4, DATA_B, 24), (ADDED, None, DATA_A, 44)],
    )
    found = live_vectors.read_live_vectors([manifest], io)
    assert sorted(found) == [DATA_A, DATA_B]
    assert (found[DATA_A].offset, found[DATA_A].sequence_number) == (44, 9)  # inherited from the manifest
    assert (found[DATA_B].offset, found[DATA_B].length, found[DATA_B].sequence_number) == (24, 20, 4)


def test_two_live_vectors_for_one_data_file_make_the_table_corrupt(tmp_path: Path) -> None:
    manifest, io = delete_manifest(tmp_path / "m.avro", [(EXISTING, 4, DATA_A, 4), (ADDED, None, DATA_A, 44)])
    with pytest.raises(CorruptDeleteFile, match=r"data file a\.parquet has two live deletion vectors"):
        live_vectors.read_live_vectors([manifest], io)


def test_a_vector_entry_that_does_not_say_where_its_blob_is_is_corrupt(tmp_path: Path) -> None:
    manifest, io = delete_manifest(tmp_path / "m.avro", [(ADDED, None, DATA_A, None)])
    with pytest.raises(CorruptDeleteFile, match="does not say which data file it applies to or where"):
        live_vectors.read_live_vectors([manifest], io)


def test_a_vector_older_than_its_data_file_does_not_apply() -> None:
    vector = LiveVector(DATA_A, "p.puffin", 4, 20, 1, sequence_number=3)
    tasks = [SimpleNamespace(file=SimpleNamespace(file_path=path)) for path in (DATA_A, DATA_B)]
    older = Plan(tasks=tasks, sequence_numbers={DATA_A: 3, DATA_B: 1})
    assert applicable_vectors({DATA_A: vector}, older) == {DATA_A: vector}
    newer = Plan(tasks=tasks, sequence_numbers={DATA_A: 4, DATA_B: 1})
    assert applicable_vectors({DATA_A: vector}, newer) == {}
