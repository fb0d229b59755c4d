"""What a snapshot's head lines say, kept apart from its files: persisted, for a restarted server.

The protocol and metadata lines of `/metadata` (and of `/query`) need a
version's protocol, metadata, size and file count, and nothing else of its
files; building the snapshot to learn them replays the log (most of a second
for 100,000 files). The snapshot warmer saves a summary of each version it
builds in the share store; a server that holds no snapshot of the table's
latest version yet (just restarted, or the table evicted) answers `/metadata`
from the summary when it is of that very version. A summary of any other
version says nothing and is not used.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from share_store.tables.active_files import Action, FileSet
from share_store.tables.reader import VersionListing
from share_store.tables.snapshot import TableSnapshot


@dataclass(frozen=True)
class SnapshotSummary:
    """One version of a Delta table at one location, as its head lines describe it."""

    bucket: str
    path: str
    version: int
    #: The version's commit file's time as listed (ms), which tells a table written anew at
    #: the same place from the one summarized; None when only a checkpoint was listed.
    commit_time: int | None
    size: int
    num_files: int
    deletion_vectors: bool
    protocol: dict[str, Any]
    metadata: dict[str, Any]

    @classmethod
    def of(cls, snapshot: TableSnapshot, bucket: str, path: str, listing: VersionListing) -> SnapshotSummary:
        return cls(
            bucket, path, snapshot.version, listing.commit_times.get(snapshot.version),
            snapshot.size, snapshot.num_files, snapshot.adds.has_deletion_vectors,
            snapshot.protocol, snapshot.metadata,
        )  # fmt: skip

    def describes(self, bucket: str, path: str, listing: VersionListing) -> bool:
        """Whether this is the summary of the latest version `listing` shows at that location."""
        return (
            (self.bucket, self.path) == (bucket, path)
            and self.version == listing.latest_version
            and self.commit_time == listing.commit_times.get(self.version)
        )

    def snapshot(self) -> TableSnapshot:
        """A snapshot for the head lines alone: listing its files is an error."""
        files = SummarizedFiles(self.num_files, self.size, self.deletion_vectors)
        return TableSnapshot(self.version, self.protocol, self.metadata, files)

    # As the store keeps them: the two actions as JSON text.
    def protocol_text(self) -> str:
        return json.dumps(self.protocol)

    def metadata_text(self) -> str:
        return json.dumps(self.metadata)


class SummarizedFiles(FileSet):
    """A file count, size and whether any file has a deletion vector: no files."""

    def __init__(self, count: int, total_size: int, has_deletion_vectors: bool) -> None:
        self._adds = []
        self.count = count
        self.total_size = total_size
        self.has_deletion_vectors = has_deletion_vectors

    @property
    def resident_files(self) -> int:
        return 0

    def __iter__(self) -> Iterator[Action]:
        raise RuntimeError("a snapshot summary has no files: build the snapshot to list them")


class SummaryStore(Protocol):
    """Where summaries persist (the share store)."""

    def snapshot_summary(self, table_id: str) -> SnapshotSummary | None: ...

    def save_snapshot_summary(self, table_id: str, summary: SnapshotSummary) -> None: ...
