"""Delta's change-feed rules over raw commits: what a range of versions changed, in order.

Streaming reads (`/query` with `startingVersion`) and change data feed reads
(`/changes`) both walk commits version by version. The rules for that walk
are Delta's, not the protocol's: which files changed data, when `cdc` files
replace `add`/`remove`, which MERGEs changed nothing, where metadata changed.

The functions read commits and snapshots through the two lookups they are
given (`commit_at`, `snapshot_at`), so they are tested on plain action lists
without storage or a server. They yield `Change` values; the protocol side
signs and encodes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.tables.commit_times import Commit
from share_store.tables.snapshot import TableSnapshot, cdf_enabled

Action = dict[str, Any]
CommitAt = Callable[[int], list[Action]]
SnapshotAt = Callable[[int], TableSnapshot]

FILE_KINDS = ("add", "remove")


@dataclass(frozen=True, slots=True)
class FileChange:
    """A data-changing file of one version: `kind` is `add`, `remove` or `cdc`."""

    kind: str
    action: Action
    partition_columns: tuple[str, ...]
    version: int
    timestamp: int


@dataclass(frozen=True)
class MetadataChange:
    """The table's metadata as changed at `version`."""

    snapshot: TableSnapshot
    version: int


@dataclass(frozen=True)
class ProtocolChange:
    """The table's protocol as changed at `version`."""

    snapshot: TableSnapshot
    version: int


Change = FileChange | MetadataChange | ProtocolChange


def is_noop_merge(commit: list[Action]) -> bool:
    """A MERGE that touched no row: the reference emits nothing for it."""
    info = next((a["commitInfo"] for a in commit if "commitInfo" in a), None)
    if not info or info.get("operation") != "MERGE":
        return False
    metrics = info.get("operationMetrics") or {}
    keys = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return all(str(metrics.get(key, "")) == "0" for key in keys)


def commit_times(commits: list[Commit], start: int, end: int) -> dict[int, int]:
    """Each version's commit timestamp, from `start` to `end`; refused if the log lost any."""
    times = {c.version: c.timestamp for c in commits}
    missing = [v for v in range(start, end + 1) if v not in times]
    if missing:
        # The log was cleaned up before these versions (a log never lists none).
        raise InvalidParameter(f"You can only query table changes since version {min(times)}.")
    return times


def check_cdf_recorded(start_snapshot: TableSnapshot, commit_at: CommitAt, start: int, end: int) -> None:
    """Refuse a change data feed range in which any version did not record change data."""
    disabled = [] if start_snapshot.change_data_feed_enabled else [start]
    for version in range(start + 1, end + 1):
        for action in commit_at(version):
            if "metaData" in action and not cdf_enabled(action["metaData"]):
                disabled.append(version)
    if disabled:
        listed = ", ".join(str(v) for v in disabled)
        raise InvalidParameter(
            f"Error getting change data for range [{start}, {end}] as change data was not recorded "
            f"for version [{listed}]"
        )


def changed_paths(commit_at: CommitAt, start: int, end: int) -> Iterator[str]:
    """Paths of the files a change data feed read of the range hands out.

    A version with `cdc` files is read from them alone; otherwise from its
    data-changing `add` and `remove` files.
    """
    for version in range(start, end + 1):
        commit = commit_at(version)
        kinds = ("cdc",) if any("cdc" in a for a in commit) else FILE_KINDS
        for action in commit:
            for kind in kinds:
                if kind in action and (kind == "cdc" or action[kind].get("dataChange", True)):
                    yield action[kind]["path"]


def first_with_vectors(commit_at: CommitAt, start: int, end: int, *, use_cdc: bool) -> int | None:
    """The first version in the range handing out a file with a deletion vector, if any.

    The parquet format has no way to say which of a file's rows are deleted:
    such a range is refused before the response starts rather than read wrong.
    """
    for version in range(start, end + 1):
        commit = commit_at(version)
        if use_cdc and any("cdc" in a for a in commit):
            continue  # read from its change files, which have no deletion vectors
        for action in commit:
            for kind in FILE_KINDS:
                body = action.get(kind)
                if body is not None and body.get("dataChange", True) and body.get("deletionVector"):
                    return version
    return None


def removed_size(previous: TableSnapshot, path: str, version: int) -> int:
    """The size of a file removed in `version`, from its add in the version before.

    Older writers omit `size` on removes, and Spark refuses a remove without one.
    """
    for add in previous.adds:
        if add["path"] == path:
            return int(add.get("size") or 0)
    raise UnsupportedOperation(f"cannot determine the size of a file removed in version {version}")


def version_changes(
    commit_at: CommitAt,
    snapshot_at: SnapshotAt,
    start: int,
    end: int,
    times: dict[int, int],
    *,
    use_cdc: bool,
    include_metadata: bool,
    include_protocol: bool = False,
    check: Callable[[TableSnapshot], None] = lambda snapshot: None,
) -> Iterator[Change]:
    """Per version, in order: metadata and protocol changes after `start`, then its data changes.

    `use_cdc` reads a version's `cdc` files instead of its adds and removes
    when it has any (change data feed); `include_metadata`/`include_protocol`
    say whether changes of those after `start` are wanted. `check` is given
    every snapshot whose protocol or metadata changed, to refuse one the
    response cannot carry.
    """
    partition_columns = tuple(snapshot_at(start).partition_columns)
    for version in range(start, end + 1):
        commit = commit_at(version)
        timestamp = times[version]
        meta = next((a["metaData"] for a in commit if "metaData" in a), None)
        protocol = next((a["protocol"] for a in commit if "protocol" in a), None)
        if meta is not None or protocol is not None:
            snapshot = snapshot_at(version)
            check(snapshot)
            partition_columns = tuple(snapshot.partition_columns)
            if protocol is not None and include_protocol and version > start:
                yield ProtocolChange(snapshot, version)
            if meta is not None and include_metadata and version > start:
                yield MetadataChange(snapshot, version)
        if is_noop_merge(commit):
            continue
        if use_cdc and any("cdc" in a for a in commit):
            for action in commit:
                if "cdc" in action:
                    yield FileChange("cdc", action["cdc"], partition_columns, version, timestamp)
            continue
        for action in commit:
            for kind in FILE_KINDS:
                body = action.get(kind)
                if body is not None and body.get("dataChange", True):
                    if kind == "remove" and "size" not in body:
                        body = body | {"size": removed_size(snapshot_at(version - 1), body["path"], version)}
                    yield FileChange(kind, body, partition_columns, version, timestamp)
