"""What an Iceberg REST recipient of a shared table may see and read.

The catalog facade (`sharing_server/iceberg_catalog.py`) hands out a shared
table's metadata and signs reads of its files. Both follow the share's grant:

- a table that shares its history shows the current snapshot's ancestry (the
  versions Delta Sharing recipients can time-travel to), and any object under
  the table's location may be read;
- a table that does not shows the current snapshot alone, and only the files
  that snapshot reaches (its manifest list, manifests, data and delete files)
  may be read: not older manifests, and not the metadata files, whose JSON
  lists every snapshot.

Branches and tags other than `main` are not shared, whatever the history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from share_store.errors import UnsupportedOperation


def shared_metadata(metadata: Any, history_shared: bool) -> Any:
    """`metadata` (pyiceberg `TableMetadata`) cut to what the grant shows."""
    from pyiceberg.table.refs import MAIN_BRANCH
    from pyiceberg.table.snapshots import ancestors_of

    current = metadata.current_snapshot()
    if current is None:
        kept: list[Any] = []
    elif history_shared:
        kept = list(reversed(list(ancestors_of(current, metadata))))
    else:
        kept = [current]
    ids = {snapshot.snapshot_id for snapshot in kept}
    refs = {
        name: ref for name, ref in metadata.refs.items() if name == MAIN_BRANCH and ref.snapshot_id in ids
    }
    update: dict[str, Any] = {
        "snapshots": kept,
        "snapshot_log": [entry for entry in metadata.snapshot_log if entry.snapshot_id in ids],
        "refs": refs,
        # Older metadata files list every snapshot: never named to a recipient.
        "metadata_log": [],
        "statistics": [s for s in metadata.statistics if s.snapshot_id in ids],
    }
    if hasattr(metadata, "partition_statistics"):
        update["partition_statistics"] = [s for s in metadata.partition_statistics if s.snapshot_id in ids]
    return metadata.model_copy(update=update)


def object_location(uri: str) -> tuple[str, str]:
    """Bucket and key of an `s3://` (or `s3a://`, `s3n://`) URI."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a", "s3n") or not parsed.netloc:
        raise UnsupportedOperation(
            "the Iceberg REST facade serves tables stored in S3; this table's files are at "
            f"'{parsed.scheme or 'a local path'}' locations"
        )
    return parsed.netloc, unquote(parsed.path.lstrip("/"))


@dataclass(frozen=True)
class ReadableFiles:
    """The objects a recipient may read: everything under some prefixes, or an exact set."""

    bucket_prefixes: tuple[tuple[str, str], ...] = ()
    exact: frozenset[tuple[str, str]] = frozenset()

    def allows(self, bucket: str, key: str) -> bool:
        if (bucket, key) in self.exact:
            return True
        return any(bucket == b and key.startswith(prefix) for b, prefix in self.bucket_prefixes)


def under_locations(locations: Iterable[str]) -> ReadableFiles:
    """Everything under each of `locations` (a table's location, its data and metadata paths)."""
    prefixes = []
    for location in locations:
        bucket, key = object_location(location)
        prefixes.append((bucket, key.rstrip("/") + "/"))
    return ReadableFiles(bucket_prefixes=tuple(prefixes))


def snapshot_files(snapshot: Any, io: Any) -> ReadableFiles:
    """Exactly the objects `snapshot` reaches: its manifest list, manifests, data and delete files."""
    paths = {snapshot.manifest_list}
    for manifest in snapshot.manifests(io):
        paths.add(manifest.manifest_path)
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
            paths.add(entry.data_file.file_path)
    return ReadableFiles(exact=frozenset(object_location(path) for path in paths))


def readable_files(table: Any, history_shared: bool) -> ReadableFiles:
    """What the signer may sign for a pyiceberg `table` under the grant."""
    metadata = table.metadata
    if history_shared:
        locations = [metadata.location]
        for setting in ("write.data.path", "write.metadata.path"):
            if metadata.properties.get(setting):
                locations.append(metadata.properties[setting])
        return under_locations(locations)
    current = metadata.current_snapshot()
    return snapshot_files(current, table.io) if current is not None else ReadableFiles()
