"""What to compact: the data files worth rewriting, in groups, from a snapshot's scan tasks.

`plan` is pure: per partition, the files smaller than `SMALL_SHARE` of the target and any file a
delete applies to; a partition is rewritten when it has two such files or one with deletes. A
partition's files are split into groups of at most `GROUP_TARGETS` targets of input, so that a run
stopped by its budget still commits whole groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

#: A file under this share of the target is small.
SMALL_SHARE = 0.75
#: A group holds at most this many targets of input bytes: a partition with more is split, so
#: that a run within its budget commits whole groups (as Java's `max-file-group-size-bytes`).
GROUP_TARGETS = 4


@dataclass(frozen=True)
class Candidate:
    """A live data file as the plan sees it."""

    path: str
    size: int
    partition: tuple[int, tuple[Any, ...]]  # (spec id, partition values)
    deletes: int  # delete files that apply to it
    equality_deletes: bool = False


def plan(files: Iterable[Candidate], target_bytes: int) -> list[list[Candidate]]:
    """Groups of files to rewrite together: per partition worth it, in a stable order, split at
    `GROUP_TARGETS` targets of input bytes."""
    by_partition: dict[tuple[int, tuple[Any, ...]], list[Candidate]] = defaultdict(list)
    for file in files:
        if file.equality_deletes:
            continue
        if file.deletes or file.size < target_bytes * SMALL_SHARE:
            by_partition[file.partition].append(file)
    groups = []
    for partition in sorted(by_partition, key=repr):
        chosen = sorted(by_partition[partition], key=lambda f: f.path)
        for group in _split(chosen, GROUP_TARGETS * target_bytes):
            if worth(group):
                groups.append(group)
    return groups


def worth(files: list[Any]) -> bool:
    """Whether rewriting these files (candidates or scan tasks) does anything: two or more become
    fewer, or deletes are applied."""
    return len(files) >= 2 or any(getattr(f, "deletes", 0) or getattr(f, "delete_files", ()) for f in files)


def _split(files: list[Candidate], cap: int) -> list[list[Candidate]]:
    """`files` in runs of at most `cap` bytes; a run that would be one file without deletes (not
    worth a rewrite alone) joins its neighbour instead."""
    runs: list[list[Candidate]] = []
    size = 0
    for file in files:
        if not runs or (runs[-1] and size + file.size > cap):
            runs.append([])
            size = 0
        runs[-1].append(file)
        size += file.size
    joined: list[list[Candidate]] = []
    for run in runs:
        if joined and (not worth(run) or not worth(joined[-1])):
            joined[-1] = joined[-1] + run
        else:
            joined.append(run)
    return joined


def scan_tasks(table: Table, snapshot: Snapshot) -> dict[str, Any] | None:
    """The snapshot's scan tasks by data file path; None if it has equality deletes (pyiceberg's
    planning raises on them, so they are looked for in its delete manifests first)."""
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DELETES:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                return None
    return {task.file.file_path: task for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()}


def candidate(task: Any) -> Candidate:
    """A scan task's data file as the plan sees it."""
    file = task.file
    return Candidate(
        path=file.file_path,
        size=int(file.file_size_in_bytes),
        partition=(file.spec_id, tuple(file.partition)),
        deletes=len(task.delete_files),
        equality_deletes=any(d.content == DataFileContent.EQUALITY_DELETES for d in task.delete_files),
    )
