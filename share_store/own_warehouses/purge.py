"""What a purge deletes: the files a table's metadata reaches, inside the table's own location only.

Metadata files (the current one and those in its log), statistics files,
each snapshot's manifest list, its manifests and every data and delete file
they name, whatever their status. Manifests are read through the table's
`ConfinedFileIO`, so one named outside the table is never opened (it is
skipped, with everything it would have named), and only paths inside the
recorded location are deleted: a table whose metadata names another
table's files, by mistake or by design, never takes them with it.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyiceberg.table.metadata import TableMetadata

from share_store.iceberg.locations import OutsideTable, TableLocation
from share_store.own_warehouses.file_io import ConfinedFileIO
from share_store.storage.base import ObjectStorage


def reachable_files(metadata_location: str, metadata: TableMetadata, io: ConfinedFileIO) -> Iterator[str]:
    yield metadata_location
    for logged in metadata.metadata_log:
        yield logged.metadata_file
    for statistics in metadata.statistics:
        yield statistics.statistics_path
    for partition_statistics in metadata.partition_statistics:
        yield partition_statistics.statistics_path
    manifests_seen: set[str] = set()
    for snapshot in metadata.snapshots:
        yield snapshot.manifest_list
        try:
            manifests = snapshot.manifests(io)
        except (OutsideTable, FileNotFoundError):
            continue
        for manifest in manifests:
            if manifest.manifest_path in manifests_seen:
                continue  # later snapshots list the manifests they kept: each is read once
            manifests_seen.add(manifest.manifest_path)
            yield manifest.manifest_path
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except (OutsideTable, FileNotFoundError):
                continue
            for entry in entries:
                yield entry.data_file.file_path


def purge(
    storage: ObjectStorage, metadata_location: str, metadata: TableMetadata, location: TableLocation
) -> int:
    """Delete every file `reachable_files` finds inside `location`; how many were asked to go."""
    io = ConfinedFileIO(storage, location)
    keys = [location.confine(storage, path)[1] for path in reachable_files(metadata_location, metadata, io)
            if location.holds_path(storage, path)]  # fmt: skip
    if keys:
        storage.delete(location.bucket, keys)
    return len(keys)
