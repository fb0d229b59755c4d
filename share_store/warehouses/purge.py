"""What a table's metadata reaches: every file a purge may delete, found from the metadata alone.

Metadata files (the current one and those in its log), statistics files,
each snapshot's manifest list, its manifests and every data and delete file
they name, whatever their status. The catalog deletes only those inside the
table's own location, so a table registered over another's files, or naming
files elsewhere, never takes them with it.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyiceberg.table.metadata import TableMetadata

from share_store.storage.base import ObjectStorage
from share_store.warehouses.file_io import file_io_for


def reachable_files(metadata_location: str, metadata: TableMetadata, storage: ObjectStorage) -> Iterator[str]:
    yield metadata_location
    for logged in metadata.metadata_log:
        yield logged.metadata_file
    for statistics in metadata.statistics:
        yield statistics.statistics_path
    for partition_statistics in metadata.partition_statistics:
        yield partition_statistics.statistics_path
    io = file_io_for(storage)
    manifests_seen: set[str] = set()
    for snapshot in metadata.snapshots:
        yield snapshot.manifest_list
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in manifests_seen:
                continue  # later snapshots list the manifests they kept: each is read once
            manifests_seen.add(manifest.manifest_path)
            yield manifest.manifest_path
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                yield entry.data_file.file_path
