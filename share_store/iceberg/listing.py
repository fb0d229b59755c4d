"""An Iceberg table's snapshots as dense versions, listed as a Delta log's commits: `IcebergListing`.

The snapshots of the current ancestry are numbered in order, once and for good:
the numbers persist in the share store (`VersionStore`), and a version whose
snapshot has since expired or was rolled back is refused, saying which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from share_store.delta.log_listing import LogListing
from share_store.errors import InvalidParameter, TableFilesMissing
from share_store.iceberg.ancestry import ancestors
from share_store.iceberg.versions import EMPTY_SNAPSHOT, SnapshotVersion, new_versions, visible_versions


@dataclass
class IcebergListing(LogListing):
    """A listing whose "commits" are the numbered snapshots of the current ancestry."""

    table: Any = None
    snapshots: dict[int, int] = field(default_factory=dict)  # version -> snapshot id


class VersionStore(Protocol):
    """Where snapshot versions persist (the share store)."""

    def snapshot_versions(self, table_id: str) -> list[SnapshotVersion]: ...

    def add_snapshot_versions(
        self, table_id: str, versions: list[SnapshotVersion]
    ) -> list[SnapshotVersion]: ...


def list_snapshots(table: Any, table_id: str, versions: VersionStore) -> IcebergListing:
    """The versions of `table` (a pyiceberg table) still in its ancestry; new snapshots numbered now."""
    current = table.current_snapshot()
    ancestry = list(reversed(ancestors(table.metadata, current))) if current else []
    known = versions.snapshot_versions(table_id)
    created = int(table.metadata.last_updated_ms)
    added = new_versions(known, [(s.snapshot_id, s.timestamp_ms) for s in ancestry], created)
    if added:
        known = versions.add_snapshot_versions(table_id, added)
    visible = visible_versions(known, {s.snapshot_id for s in ancestry})
    if ancestry and not first_snapshot_kept(known, {s.snapshot_id for s in ancestry}):
        # The table before its first snapshot (version 0 of a table shared while empty) is
        # readable only while that first snapshot is: once it expired, so did the empty state.
        visible = [v for v in visible if v.snapshot_id != EMPTY_SNAPSHOT]
    listing = IcebergListing(table=table)
    for entry in visible:
        listing.commits[entry.version] = str(entry.snapshot_id)
        listing.commit_times[entry.version] = entry.timestamp_ms
        listing.snapshots[entry.version] = entry.snapshot_id
    if not listing.commits:
        raise TableFilesMissing("the Iceberg table's snapshots have all expired")
    return listing


def first_snapshot_kept(known: list[SnapshotVersion], ancestry_ids: set[int]) -> bool:
    """Whether the snapshot numbered right after the empty table's version is still in the ancestry.

    Asked of the numbering, not of parent ids: pyiceberg's `remove-snapshots` clears the parent id
    of a snapshot whose parent it removes, so the oldest snapshot left always looks like a root.
    """
    empty = [v.version for v in known if v.snapshot_id == EMPTY_SNAPSHOT]
    later = [v for v in known if empty and v.version > empty[0]]
    return not later or min(later, key=lambda v: v.version).snapshot_id in ancestry_ids


def snapshot_id_at(listing: IcebergListing, version: int, versions: VersionStore, table_id: str) -> int:
    """The snapshot `version` names; InvalidParameter for a version unknown, rolled back or expired."""
    if version in listing.snapshots:
        return listing.snapshots[version]
    known = {v.version: v for v in versions.snapshot_versions(table_id)}
    if version not in known:
        raise InvalidParameter(
            f"Cannot load table version {version} as it does not exist. "
            f"The latest version of the table is {listing.latest_version}."
        )
    snapshot_id = known[version].snapshot_id
    if snapshot_id != EMPTY_SNAPSHOT and listing.table.metadata.snapshot_by_id(snapshot_id) is not None:
        raise InvalidParameter(
            f"Version {version} is no longer in the history of the Iceberg table (it was rolled back)."
        )
    # Only what really expired is named: a snapshot, or the table's state before its first one.
    gone = (
        "the table as it was before its first snapshot, which has expired"
        if snapshot_id == EMPTY_SNAPSHOT
        else f"its Iceberg snapshot {snapshot_id} has expired"
    )
    raise InvalidParameter(
        f"Version {version} of the table is no longer available: {gone} "
        f"under {retention(listing.table.metadata.properties)}. The earliest version available is "
        f"{min(listing.snapshots)}; read from there, or ask the provider to keep history longer."
    )


#: Iceberg's table properties for snapshot retention, which win over the catalog's maintenance.
MAX_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"
MIN_KEPT_PROPERTY = "history.expire.min-snapshots-to-keep"


def retention(properties: dict[str, str]) -> str:
    """The retention a recipient is told expired a version: the table's own `history.expire.*`
    where it sets them, else the maintenance that keeps own warehouses' tables by S3 Tables' rules."""
    age, kept = properties.get(MAX_AGE_PROPERTY), properties.get(MIN_KEPT_PROPERTY)
    if age is None and kept is None:
        return (
            "the provider's snapshot management (by default, as S3 Tables': snapshots older than "
            "120 hours expire, keeping at least 1)"
        )
    rules = []
    if age is not None and age.isdigit():
        rules.append(f"snapshots older than {_duration(int(age))} expire ({MAX_AGE_PROPERTY})")
    if kept is not None and kept.isdigit():
        rules.append(f"keeping at least {int(kept)} ({MIN_KEPT_PROPERTY})")
    return "the table's snapshot retention: " + (", ".join(rules) or "its history.expire.* properties")


def previous_version(listing: IcebergListing, version: int) -> int | None:
    """The version listed just before `version`, None for the first."""
    earlier = [v for v in listing.snapshots if v < version]
    return max(earlier) if earlier else None


def schema_at(table: Any, snapshot_id: int) -> Any:
    """The schema a snapshot was written with (the table's current one for an empty table)."""
    if snapshot_id == EMPTY_SNAPSHOT:
        return table.schema()
    snap = table.metadata.snapshot_by_id(snapshot_id)
    schemas = table.schemas()
    return schemas.get(snap.schema_id, table.schema()) if snap.schema_id is not None else table.schema()


def _duration(ms: int) -> str:
    for unit, size in (("hours", 3_600_000), ("minutes", 60_000), ("seconds", 1000)):
        if ms >= size:
            return f"{ms / size:g} {unit}"
    return f"{ms} ms"
