"""What an Iceberg REST recipient of a shared table may see and read.

The catalog facade (`sharing_server/iceberg_shares/routes.py`) hands out a shared
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

import gzip
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlparse

from share_store.errors import UnsupportedOperation
from share_store.storage.table_location import TableLocation, table_location_of

MAIN_BRANCH = "main"
GZIP_MAGIC = b"\x1f\x8b"


def _ancestry(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The current snapshot and its ancestors still in `metadata`, oldest first."""
    by_id = {snapshot["snapshot-id"]: snapshot for snapshot in metadata.get("snapshots", [])}
    chain: list[dict[str, Any]] = []
    snapshot = by_id.get(metadata.get("current-snapshot-id"))
    while snapshot is not None and len(chain) < len(by_id):
        chain.append(snapshot)
        snapshot = by_id.get(snapshot.get("parent-snapshot-id"))
    return chain[::-1]


def shared_metadata(metadata: dict[str, Any], history_shared: bool) -> dict[str, Any]:
    """A table metadata file's JSON, cut to what the grant shows.

    Worked on the JSON itself, whatever the format version: pyiceberg reads
    v3 metadata but will not write it, and the recipient should get the
    provider's metadata as written, less what it may not see.
    """
    ancestry = _ancestry(metadata)
    kept = ancestry if history_shared else ancestry[-1:]
    ids = {snapshot["snapshot-id"] for snapshot in kept}
    main = metadata.get("refs", {}).get(MAIN_BRANCH)
    cut = dict(metadata)
    cut["snapshots"] = kept
    cut["snapshot-log"] = [e for e in metadata.get("snapshot-log", []) if e["snapshot-id"] in ids]
    cut["refs"] = {MAIN_BRANCH: main} if main is not None and main["snapshot-id"] in ids else {}
    # Older metadata files list every snapshot: never named to a recipient.
    cut["metadata-log"] = []
    for listing in ("statistics", "partition-statistics"):
        if listing in metadata:
            cut[listing] = [s for s in metadata[listing] if s["snapshot-id"] in ids]
    if not kept:
        cut.pop("current-snapshot-id", None)
    return cut


def metadata_json(table: Any) -> dict[str, Any]:
    """The JSON of a pyiceberg table's current metadata file, as its writer wrote it."""
    with table.io.new_input(table.metadata_location).open() as stream:
        data = stream.read()
    if data[:2] == GZIP_MAGIC:  # `.gz.metadata.json`
        data = gzip.decompress(data)
    return json.loads(data)  # type: ignore[no-any-return]


def object_location(uri: str) -> tuple[str, str]:
    """Bucket and key of an `s3://` (or `s3a://`, `s3n://`) URI."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a", "s3n") or not parsed.netloc:
        raise UnsupportedOperation(
            "the Iceberg REST facade serves tables stored in S3; this table's files are at "
            f"'{parsed.scheme or 'a local path'}' locations"
        )
    return parsed.netloc, unquote(parsed.path.lstrip("/"))


class ReadableFiles:
    """The objects a recipient may read: everything under some prefixes, and the files snapshots reach.

    The snapshots' files (manifest lists, manifests, data and delete files) are
    listed on the first request the prefixes do not allow: a table whose files
    all sit under its location never reads a manifest for it, and one with files
    elsewhere (added from outside, or written with `write.data.path`) still has
    them readable.
    """

    def __init__(
        self,
        bucket_prefixes: Iterable[tuple[str, str]] = (),
        snapshots: Iterable[Any] = (),
        io: Any = None,
        live_only: bool = False,
        exact: frozenset[tuple[str, str]] = frozenset(),
        confined: TableLocation | None = None,
    ) -> None:
        #: An own-warehouse table's recorded location: nothing outside it is readable, whatever is named.
        self.confined = confined
        self.bucket_prefixes = tuple(bucket_prefixes)
        self._snapshots = list(snapshots)
        self._io = io
        self._live_only = live_only
        self._exact: frozenset[tuple[str, str]] | None = None if self._snapshots else exact

    def allows(self, bucket: str, key: str) -> bool:
        if self.confined is not None and not self.confined.holds(bucket, key):
            return False
        if any(bucket == b and key.startswith(prefix) for b, prefix in self.bucket_prefixes):
            return True
        return (bucket, key) in self.objects()

    def objects(self) -> frozenset[tuple[str, str]]:
        """The single objects readable beside the prefixes (the snapshots' files, listed once)."""
        if self._exact is None:
            found = reachable_files(self._snapshots, self._io, self._live_only)
            if self.confined is not None:
                found = frozenset(o for o in found if self.confined.holds(*o))
            self._exact = found
        return self._exact


def _prefixes(locations: Iterable[str]) -> list[tuple[str, str]]:
    prefixes = []
    for location in locations:
        bucket, key = object_location(location)
        prefixes.append((bucket, key.rstrip("/") + "/"))
    return prefixes


def reachable_files(snapshots: Iterable[Any], io: Any, live_only: bool = False) -> frozenset[tuple[str, str]]:
    """Exactly the objects `snapshots` reach: manifest lists, manifests, data and delete files.

    With `live_only`, not the files a snapshot removed (its manifests still name them).
    """
    paths: set[str] = set()
    manifests: set[str] = set()
    for snapshot in snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in manifests:  # shared by later snapshots: read once
                continue
            manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=live_only):
                paths.add(entry.data_file.file_path)
    return frozenset(object_location(path) for path in paths | manifests)


def table_locations(table: Any) -> list[str]:
    """Where a table's files are written: its location, and its data and metadata paths if set apart.

    An own-warehouse table's files are all in its recorded location, whatever its properties say.
    """
    confined = table_location_of(table)
    if confined is not None:
        return [confined.uri]
    metadata = table.metadata
    locations = [metadata.location]
    for setting in ("write.data.path", "write.metadata.path"):
        if metadata.properties.get(setting):
            locations.append(metadata.properties[setting])
    return locations


def readable_files(table: Any, history_shared: bool) -> ReadableFiles:
    """What the signer may sign for a pyiceberg `table` under the grant."""
    from share_store.iceberg.ancestry import ancestors

    metadata = table.metadata
    current = metadata.current_snapshot()
    if current is None:
        return ReadableFiles()
    confined = table_location_of(table)
    if not history_shared:
        return ReadableFiles(snapshots=[current], io=table.io, live_only=True, confined=confined)
    ancestry = ancestors(metadata, current)
    return ReadableFiles(_prefixes(table_locations(table)), ancestry, table.io, confined=confined)
