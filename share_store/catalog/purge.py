"""What a purge deletes: the files a table's metadata reaches, inside the table's own location only.

Metadata files (the current one and those in its log), statistics files,
each snapshot's manifest list, its manifests and every data and delete file
they name, whatever their status. Manifests are read through the table's
`ConfinedFileIO`, so one named outside the table is never opened (it is
skipped, with everything it would have named), and only paths inside the
recorded location are deleted: a table whose metadata names another
table's files, by mistake or by design, never takes them with it.

A dropped table whose retention has passed goes whole (`purge_folder`):
every object under its folder, which no other table's may overlap, so that
nothing of it is left for a register to take once its folder is free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from pyiceberg.table.metadata import TableMetadata

from share_store.errors import ShareStoreError
from share_store.storage.base import ObjectStorage
from share_store.storage.table_location import OutsideTable, TableLocation

#: Keys a delete call is given at once (S3's DeleteObjects takes 1,000).
DELETE_CHUNK = 1000

if TYPE_CHECKING:
    from share_store.catalog.file_io import ConfinedFileIO


class UnreadableTable(ShareStoreError):
    """A snapshot's manifest list or manifest cannot be read: what is live is unknown, so nothing goes."""


def reachable_files(
    metadata_location: str, metadata: TableMetadata, io: ConfinedFileIO, strict: bool = False
) -> Iterator[str]:
    """Every file the metadata reaches. A manifest list or manifest that is gone or outside the
    table is skipped, with all it names (a purge deletes what it can); `strict` raises
    `UnreadableTable` for one that cannot be read at all, since then any file may be live."""
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
        listed = f"the manifest list of snapshot {snapshot.snapshot_id}"
        manifests = _read(partial(snapshot.manifests, io), listed, strict)
        for manifest in manifests or ():
            if manifest.manifest_path in manifests_seen:
                continue  # later snapshots list the manifests they kept: each is read once
            manifests_seen.add(manifest.manifest_path)
            yield manifest.manifest_path
            named = f"a manifest of snapshot {snapshot.snapshot_id}"
            entries = _read(partial(manifest.fetch_manifest_entry, io, discard_deleted=False), named, strict)
            for entry in entries or ():
                yield entry.data_file.file_path


def _read(read: Callable[[], list[Any]], what: str, strict: bool) -> list[Any] | None:
    try:
        return read()
    except (OutsideTable, FileNotFoundError):
        if not strict:
            return None
        raise _unreadable(what, "its file is gone or outside the table") from None
    except Exception as error:
        if not strict:
            raise
        raise _unreadable(what, type(error).__name__) from None


def _unreadable(what: str, why: str) -> UnreadableTable:
    # The message names no path: it may be another table's file, and run statuses are shown to users.
    return UnreadableTable(
        f"unreferenced file removal deleted nothing: {what} cannot be read ({why}), "
        "so which files are live is unknown"
    )


def purge(
    storage: ObjectStorage, metadata_location: str, metadata: TableMetadata, location: TableLocation
) -> int:
    """Delete every file `reachable_files` finds inside `location`; how many were asked to go."""
    # Imported here, not with the catalog: pyiceberg's pyarrow FileIO (and the pyarrow dataset
    # modules it brings) takes 5 MB a server without own warehouses never needs; one with some
    # loads it as it starts (`app.CATALOG_MODULES`).
    from share_store.catalog.file_io import ConfinedFileIO

    io = ConfinedFileIO(storage, location)
    keys = [location.confine(storage, path)[1] for path in reachable_files(metadata_location, metadata, io)
            if location.holds_path(storage, path)]  # fmt: skip
    if keys:
        storage.delete(location.bucket, keys)
    return len(keys)


def purge_folder(storage: ObjectStorage, location: TableLocation, nested: tuple[str, ...] = ()) -> int:
    """Delete every object under the table's folder but those under `nested` (other tables' folders
    inside it, which the catalog never lets in, kept should one ever have been); how many went."""
    keys = [key for key in _keys_under(storage, location.bucket, location.folder)
            if location.holds(location.bucket, key) and not key.startswith(nested)]  # fmt: skip
    for start in range(0, len(keys), DELETE_CHUNK):
        storage.delete(location.bucket, keys[start : start + DELETE_CHUNK])
    return len(keys)


def _keys_under(storage: ObjectStorage, bucket: str, folder: str) -> Iterator[str]:
    """Every key under `folder` (ending in '/'), at any depth: storages list one level at a time."""
    pending = [folder]
    while pending:
        current = pending.pop()
        yield from (info.key for info in storage.list(bucket, current))
        below = storage.folders(bucket, current)
        pending.extend(sub for sub in below if sub.startswith(current) and sub != current)
