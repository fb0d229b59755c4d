"""Dense, permanent Delta versions for Iceberg snapshots.

Delta Sharing clients expect versions 0, 1, 2, … that never change meaning;
Iceberg identifies snapshots by random ids and may expire old ones. Versions
are handed out in the order snapshots appear in the current snapshot's
ancestry (oldest first) and persisted, so expiring or rolling back never
renumbers anything: a version whose snapshot is gone is an error, never a
different snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The snapshot id recorded for "the table had no snapshot yet" (version 0 of an empty table).
EMPTY_SNAPSHOT = 0


@dataclass(frozen=True)
class SnapshotVersion:
    version: int
    snapshot_id: int
    timestamp_ms: int


def new_versions(
    known: list[SnapshotVersion], ancestry: list[tuple[int, int]], created_ms: int
) -> list[SnapshotVersion]:
    """Versions for the snapshots of `ancestry` ((id, timestamp), oldest first) not yet numbered."""
    if not ancestry:
        return [] if known else [SnapshotVersion(0, EMPTY_SNAPSHOT, created_ms)]
    numbered = {entry.snapshot_id for entry in known}
    next_version = max((entry.version for entry in known), default=-1) + 1
    added = []
    for snapshot_id, timestamp in ancestry:
        if snapshot_id not in numbered:
            added.append(SnapshotVersion(next_version, snapshot_id, timestamp))
            next_version += 1
    return added


def visible_versions(known: list[SnapshotVersion], ancestry_ids: set[int]) -> list[SnapshotVersion]:
    """The numbered snapshots still in the current ancestry, in version order."""
    return sorted(
        (
            entry
            for entry in known
            if entry.snapshot_id in ancestry_ids or entry.snapshot_id == EMPTY_SNAPSHOT
        ),
        key=lambda entry: entry.version,
    )
