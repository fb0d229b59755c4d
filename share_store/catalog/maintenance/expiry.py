"""Snapshot expiry of the own warehouses' tables: which snapshots and refs go, and the commit that drops them.

`expired` decides, as Iceberg's Java `RemoveSnapshots` (and so S3 Tables'
snapshot management) does, with the maintenance settings in place of Java's
defaults and the table's `history.expire.*` properties and each ref's own
retention over them:

- a ref other than `main` whose snapshot is older than its max ref age goes,
  and protects nothing from then on;
- each remaining branch keeps its newest `min-snapshots-to-keep` ancestors and,
  after those, its ancestors up to the first one older than its max snapshot age;
- each remaining tag keeps its snapshot, and every remaining ref its head;
- a snapshot no remaining ref reaches (left by a rollback, or by a removed ref)
  goes once it is older than the table's max snapshot age;
- the current snapshot never goes.

`expire_snapshots` commits that through the catalog as one request guarded by
every ref's snapshot and by the metadata file it was decided on, so a writer's
commit in between (a new ref included) makes it conflict (then it loads and
decides again) instead of dropping a snapshot the writer now builds on. Only
metadata changes: the files the expired snapshots alone reached are left for
unreferenced-file removal, as S3 Tables does.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.errors import CommitConflict
from share_store.catalog.maintenance.configuration import SnapshotManagement
from share_store.catalog.names import TableName

log = logging.getLogger(__name__)

#: Iceberg's table properties (`TableProperties.MIN_SNAPSHOTS_TO_KEEP` and the others).
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
HOUR_MS = 3_600_000

# Java's Integer/Long.parseLong take an optional sign and ASCII digits only; Python's int() would also
# take spaces, `_` and other scripts' digits, which Java refuses.
_WHOLE_NUMBER = re.compile(r"\+?[0-9]+")


@dataclass(frozen=True)
class Expiry:
    """What an expiry removes: snapshots by id, and refs (branches, tags) by name."""

    snapshot_ids: frozenset[int] = frozenset()
    refs: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.snapshot_ids or self.refs)


@dataclass(frozen=True)
class _Retention:
    """The table-wide retention: the properties over the settings."""

    min_snapshots_to_keep: int
    max_snapshot_age_ms: int
    max_ref_age_ms: int | None


def expired(metadata: TableMetadata, settings: SnapshotManagement, now_ms: int) -> Expiry:
    """The snapshots and refs of `metadata` that expire at `now_ms` (a pure function: nothing read)."""
    if not settings.enabled or not metadata.snapshots:
        return Expiry()
    table = _retention(metadata.properties, settings)
    snapshots = {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}

    retained: dict[str, SnapshotRef] = {}
    removed: set[str] = set()
    for name, ref in metadata.refs.items():
        head = snapshots.get(ref.snapshot_id)
        if head is None:
            # Java drops such a ref; pyiceberg's remove-snapshot-ref refuses one whose snapshot is
            # unknown, so it is left as it is: it protects nothing, having nothing to protect.
            continue
        max_ref_age = _own(ref.max_ref_age_ms) or table.max_ref_age_ms
        if name != MAIN_BRANCH and max_ref_age is not None and now_ms - head.timestamp_ms > max_ref_age:
            removed.add(name)
        else:
            retained[name] = ref

    kept: set[int] = {ref.snapshot_id for ref in retained.values()}
    reachable: set[int] = set(kept)  # what a remaining ref reaches, kept or not
    for ref in retained.values():
        if ref.snapshot_ref_type != SnapshotRefType.BRANCH:
            continue  # a tag keeps its snapshot alone, already in `kept`
        min_to_keep = _own(ref.min_snapshots_to_keep) or table.min_snapshots_to_keep
        oldest_kept = now_ms - (_own(ref.max_snapshot_age_ms) or table.max_snapshot_age_ms)
        walking = True
        for index, ancestor in enumerate(_ancestors(ref.snapshot_id, snapshots)):
            reachable.add(ancestor.snapshot_id)
            # As Java's `computeBranchSnapshotsToRetain`: the first ancestor past the minimum that is
            # too old ends the branch's protection, even if an older one has a later timestamp.
            walking = walking and (index < min_to_keep or ancestor.timestamp_ms >= oldest_kept)
            if walking:
                kept.add(ancestor.snapshot_id)

    # Unreachable snapshots (a rollback's, a removed ref's) go by the table's own age alone.
    oldest_unreachable = now_ms - table.max_snapshot_age_ms
    for snapshot_id, snapshot in snapshots.items():
        if snapshot_id not in reachable and snapshot.timestamp_ms >= oldest_unreachable:
            kept.add(snapshot_id)
    if metadata.current_snapshot_id is not None:
        kept.add(metadata.current_snapshot_id)
    return Expiry(frozenset(snapshots) - kept, frozenset(removed))


def expire_snapshots(
    catalog: WarehouseCatalog, table: TableName, settings: SnapshotManagement, now_ms: int, attempts: int = 5
) -> Expiry:
    """Expire `table`'s snapshots at `now_ms` in one commit; what was expired (nothing: no commit).

    A commit that loses a race (`CommitConflict`) is decided again on the table as it now is, up to
    `attempts` times in all; the last conflict is raised. No file is deleted.
    """
    for attempt in range(1, max(attempts, 1) + 1):
        loaded = catalog.load_table(table)
        expiry = expired(loaded.metadata, settings, now_ms)
        if not expiry:
            return expiry
        try:
            # Decided on this very metadata: a writer's commit since (a tag on a snapshot it
            # expires, which no requirement can name) makes it decide again.
            catalog.commit(
                table, expiry_commit(table, loaded.metadata, expiry), based_on=loaded.metadata_location
            )
        except CommitConflict:
            if attempt >= attempts:
                raise
            log.info("snapshot expiry of %s lost a race (attempt %d): deciding again", table, attempt)
            continue
        log.info("expired %d snapshots and %d refs of %s", len(expiry.snapshot_ids), len(expiry.refs), table)
        return expiry
    raise AssertionError("unreachable: the last attempt returns or raises")


def expiry_commit(table: TableName, base: TableMetadata, expiry: Expiry) -> CommitTableRequest:
    """The commit removing `expiry` from `base`: valid only while `base` is the table's metadata.

    Every ref of `base` is asserted, not only those removed: a writer that moved any of them may
    now build on a snapshot `expiry` names, and the commit must conflict rather than drop it.
    """
    # As a REST client would send it: pyiceberg's models take their aliased fields by these names.
    requirements: list[dict[str, Any]] = [{"type": "assert-table-uuid", "uuid": str(base.table_uuid)}]
    requirements += [
        {"type": "assert-ref-snapshot-id", "ref": name, "snapshot-id": ref.snapshot_id}
        for name, ref in sorted(base.refs.items())
    ]
    updates: list[dict[str, Any]] = [
        {"action": "remove-snapshot-ref", "ref-name": name} for name in sorted(expiry.refs)
    ]
    if expiry.snapshot_ids:
        updates.append({"action": "remove-snapshots", "snapshot-ids": sorted(expiry.snapshot_ids)})
    body = {
        "identifier": {"namespace": list(table.namespace), "name": table.name},
        "requirements": requirements,
        "updates": updates,
    }
    return CommitTableRequest.model_validate(body)


def _retention(properties: Mapping[str, str], settings: SnapshotManagement) -> _Retention:
    min_to_keep = _whole_number(properties, MIN_SNAPSHOTS_TO_KEEP)
    max_snapshot_age = _whole_number(properties, MAX_SNAPSHOT_AGE_MS)
    return _Retention(
        min_snapshots_to_keep=settings.min_snapshots_to_keep if min_to_keep is None else min_to_keep,
        max_snapshot_age_ms=(
            settings.max_snapshot_age_hours * HOUR_MS if max_snapshot_age is None else max_snapshot_age
        ),
        # A ref lives for ever unless the table or the ref says otherwise (Java's `Long.MAX_VALUE`).
        max_ref_age_ms=_whole_number(properties, MAX_REF_AGE_MS),
    )


def _whole_number(properties: Mapping[str, str], key: str) -> int | None:
    """A property's whole number of at least 0; None if it is absent or anything else: a table's
    properties are its writers' to set, and a bad one must not stop the table's maintenance."""
    raw = properties.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str) or not _WHOLE_NUMBER.fullmatch(raw):
        log.debug("ignoring table property %s=%r: not a whole number of at least 0", key, raw)
        return None
    return int(raw)


def _own(value: int | None) -> int | None:
    """A ref's own retention value, None where it has none (pyiceberg admits only positive ones,
    and a 0 read otherwise would be taken as unset by the `or` that follows, so it is unset here)."""
    return value if value is not None and value > 0 else None


def _ancestors(head: int, snapshots: Mapping[int, Snapshot]) -> Iterator[Snapshot]:
    """`head` and its ancestors, newest first, until a parent is missing (expired before) or repeats."""
    seen: set[int] = set()
    current = snapshots.get(head)
    while current is not None and current.snapshot_id not in seen:
        seen.add(current.snapshot_id)
        yield current
        parent = current.parent_snapshot_id
        current = snapshots.get(parent) if parent is not None else None
