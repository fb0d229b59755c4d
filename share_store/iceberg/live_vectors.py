"""The deletion vectors live in one Iceberg snapshot, read from its delete manifests.

A v3 deletion vector is a blob in a Puffin file, and one Puffin file holds the
vectors of many data files. A later commit may replace some of them: it writes
a new Puffin file and marks the replaced vectors' manifest entries DELETED,
while the entries of the others stay live and keep the old file in the
snapshot. The old file's footer still names every blob it was written with,
so a reader that takes vectors from footers finds two for the replaced data
files and brings back rows the newer vector deleted. Which vector a data file
has is therefore read from the live manifest entries alone: their
`referenced_data_file`, `content_offset` and `content_size_in_bytes`.

pyiceberg 0.12 reads every manifest with the v2 entry schema, which drops those
three fields, so the delete manifests are read here again with the v3 schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pyiceberg.avro.file import AvroFile
from pyiceberg.manifest import MANIFEST_ENTRY_SCHEMAS, FileFormat, ManifestContent, ManifestEntryStatus
from pyiceberg.types import StructType

from share_store.iceberg.deletes import CorruptDeleteFile, LiveVector, file_name

#: Manifest entries are read whole: pyiceberg's Avro resolver cannot skip nested fields.
ENTRY_SCHEMA = MANIFEST_ENTRY_SCHEMAS[3]
_DATA_FILE = ENTRY_SCHEMA.find_field("data_file").field_type
assert isinstance(_DATA_FILE, StructType)


def _positions(struct: StructType, *names: str) -> tuple[int, ...]:
    fields = [field.name for field in struct.fields]
    return tuple(fields.index(name) for name in names)


_STATUS, _SEQUENCE_NUMBER, _FILE = _positions(
    ENTRY_SCHEMA.as_struct(), "status", "sequence_number", "data_file"
)
_PATH, _FORMAT, _RECORDS, _TARGET, _OFFSET, _SIZE = _positions(
    _DATA_FILE,
    "file_path",
    "file_format",
    "record_count",
    "referenced_data_file",
    "content_offset",
    "content_size_in_bytes",
)


def read_live_vectors(manifests: Iterable[Any], io: Any) -> dict[str, LiveVector]:
    """The live deletion vectors of a snapshot's `manifests` (pyiceberg `ManifestFile`s), by data file.

    Two live vectors for one data file make the table corrupt: which rows are
    gone would depend on which one a reader happens to pick.
    """
    found: dict[str, LiveVector] = {}
    for manifest in manifests:
        if manifest.content != ManifestContent.DELETES:
            continue
        for vector in _manifest_vectors(manifest, io):
            other = found.get(vector.data_file)
            if other is not None:
                raise CorruptDeleteFile(
                    f"data file {file_name(vector.data_file)} has two live deletion vectors "
                    f"(in {file_name(other.puffin_path)} and {file_name(vector.puffin_path)}): "
                    "the table is corrupt"
                )
            found[vector.data_file] = vector
    return found


def _manifest_vectors(manifest: Any, io: Any) -> Iterable[LiveVector]:
    with AvroFile[Any](io.new_input(manifest.manifest_path), ENTRY_SCHEMA) as reader:
        for entry in reader:
            data_file = entry[_FILE]
            if entry[_STATUS] == ManifestEntryStatus.DELETED.value:
                continue
            path = data_file[_PATH]
            if str(data_file[_FORMAT]).upper() != FileFormat.PUFFIN.value:
                continue
            target, offset, size = data_file[_TARGET], data_file[_OFFSET], data_file[_SIZE]
            if target is None or offset is None or size is None:
                raise CorruptDeleteFile(
                    f"delete file {file_name(path)} is a deletion vector whose manifest entry does not "
                    "say which data file it applies to or where its blob is"
                )
            sequence_number = entry[_SEQUENCE_NUMBER]
            if sequence_number is None:
                # Added entries inherit the manifest's sequence number (Iceberg's inheritance rule).
                sequence_number = manifest.sequence_number
            yield LiveVector(
                target, path, int(offset), int(size), int(data_file[_RECORDS]), int(sequence_number)
            )
