"""Where a `deltaSharing` stream is, and which files its next micro-batch reads.

Pure functions over plain file dicts (see `listing`), so the planning is tested
without Spark or a server. An offset names the last file a batch read: table
version, index of the file within that version, and whether that version is
read as its whole snapshot (a stream's first version) or as one commit, the
way the JVM connector's `DeltaSharingSourceOffset` does. Within a version,
files are ordered by id, so the same index names the same file when the
version is listed again after a restart.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

#: The layout of offsets this module writes; a checkpoint with another is refused.
OFFSET_FORMAT = 1


class ChangeCommitError(RuntimeError):
    """A commit removed data files, which a stream of appended rows cannot express."""


@dataclass(frozen=True)
class Offset:
    """After the file `index` of `version` (-1: before its first file)."""

    version: int
    index: int = -1
    #: The version is read as its snapshot (every file then live), not as its commit.
    snapshot: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "sourceVersion": OFFSET_FORMAT,
            "tableVersion": self.version,
            "index": self.index,
            "isStartingVersion": self.snapshot,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Offset:
        if data.get("sourceVersion") != OFFSET_FORMAT:
            raise ValueError(
                f"deltaSharing stream: offset {data!r} was not written by this source "
                f"(expected sourceVersion {OFFSET_FORMAT}); start over with a new checkpoint"
            )
        return cls(int(data["tableVersion"]), int(data["index"]), bool(data["isStartingVersion"]))

    @property
    def position(self) -> tuple[int, int]:
        return (self.version, self.index)

    @property
    def last_version(self) -> int:
        """The newest version with files at or before this offset."""
        return self.version if self.index >= 0 else self.version - 1


@dataclass(frozen=True)
class Entry:
    """One file a stream may read, at its place in the table's history."""

    version: int
    index: int
    file: dict[str, Any]
    snapshot: bool = False
    #: The version's last file: after it the stream stands at the next version.
    last: bool = False
    #: Admitted with the other atomic files of its version or not at all (a change
    #: feed's cdc files: an update's pre- and post-images stay in one batch).
    atomic: bool = False

    @property
    def position(self) -> tuple[int, int]:
        return (self.version, self.index)

    def after(self) -> Offset:
        if self.last:
            return Offset(self.version + 1)
        return Offset(self.version, self.index, self.snapshot)


@dataclass(frozen=True)
class Limits:
    """At most this many files / bytes a batch (None: no limit). One file is always admitted."""

    max_files: int | None = None
    max_bytes: int | None = None


def indexed(version: int, files: list[dict[str, Any]], snapshot: bool = False) -> list[Entry]:
    """One version's files as entries, ordered by id (then key: a change feed lists ids twice)."""
    ordered = sorted(files, key=lambda f: (f["id"], f["key"]))
    return [
        Entry(
            version,
            index,
            file,
            snapshot=snapshot,
            last=index == len(ordered) - 1,
            atomic=(file.get("change") or {}).get("_change_type", "") is None,
        )
        for index, file in enumerate(ordered)
    ]


def by_version(files: list[dict[str, Any]]) -> list[Entry]:
    """Files of a range of commits (each with `change._commit_version`) as entries, version by version."""
    versions: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for file in files:
        versions[int(file["change"]["_commit_version"])].append(file)
    return [entry for version in sorted(versions) for entry in indexed(version, versions[version])]


def end_offset(start: Offset, entries: list[Entry], latest: int, limits: Limits) -> Offset:
    """Where the batch after `start` ends, `entries` being every file from `start` to version `latest`.

    Without limits (or when all fit) the batch takes every version up to
    `latest`, those without files included, so the next one starts after it.
    """
    files_left = limits.max_files
    bytes_left = limits.max_bytes
    end = start
    group: int | None = None  # the version whose atomic files are being admitted
    for entry in entries:
        if entry.position <= start.position:
            continue
        if not (entry.atomic and group == entry.version):
            if (files_left is not None and files_left <= 0) or (bytes_left is not None and bytes_left <= 0):
                return end
            group = entry.version if entry.atomic else None
        if files_left is not None:
            files_left -= 1
        if bytes_left is not None:
            bytes_left -= int(entry.file.get("size") or 0)
        end = entry.after()
    return max(end, Offset(latest + 1), key=lambda o: o.position)


def between(entries: list[Entry], start: Offset, end: Offset) -> list[Entry]:
    """The entries after `start`, up to and including `end`."""
    return [e for e in entries if start.position < e.position <= end.position]


def appended_files(
    files: list[dict[str, Any]],
    ignore_deletes: bool = False,
    ignore_changes: bool = False,
    skip_change_commits: bool = False,
) -> list[dict[str, Any]]:
    """The files a stream of appends reads from commits' adds and removes, as the JVM connector decides.

    A commit that removes files has deleted or rewritten rows. By default the
    stream fails on it, naming the options that say what to do instead:
    `skipChangeCommits` drops such commits whole, `ignoreChanges` reads their
    added files (rewritten files' unchanged rows come again), `ignoreDeletes`
    lets through commits that only remove files.
    """
    adds: dict[int, list[dict[str, Any]]] = defaultdict(list)
    removes: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for file in files:
        change = file["change"]
        target = removes if change["_change_type"] == "delete" else adds
        target[int(change["_commit_version"])].append(file)
    kept = []
    for version in sorted(adds.keys() | removes.keys()):
        if removes[version]:
            if skip_change_commits:
                continue
            if adds[version] and not ignore_changes:
                raise ChangeCommitError(
                    f"deltaSharing stream: table version {version} removed {len(removes[version])} "
                    f"data file(s) and added {len(adds[version])} (an UPDATE, MERGE, DELETE by "
                    "deletion vector or an overwrite), which a stream of appended rows cannot "
                    "express. Set the option skipChangeCommits=true to skip such commits, or "
                    "ignoreChanges=true to read their added files (unchanged rows of rewritten "
                    "files come again); readChangeFeed=true streams the row changes themselves."
                )
            if not adds[version] and not (ignore_deletes or ignore_changes):
                raise ChangeCommitError(
                    f"deltaSharing stream: table version {version} removed "
                    f"{len(removes[version])} data file(s) without adding any (a DELETE or a "
                    "dropped partition), which a stream of appended rows cannot express. Set the "
                    "option ignoreDeletes=true to go on past such commits (skipChangeCommits=true "
                    "also skips commits that rewrite files); readChangeFeed=true streams the "
                    "deleted rows themselves."
                )
        kept += adds[version]
    return kept


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """`maxBytesPerTrigger` as Spark writes byte sizes: `1048576`, `512k`, `64m`, `1g`, `1tb`."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"maxBytesPerTrigger {text!r}: expected a byte count such as 1048576, 64m or 1g")
    number, unit = match.groups()
    value = int(number) * 1024 ** ("kmgt".index(unit.lower()) + 1 if unit else 0)
    if value <= 0:
        raise ValueError(f"maxBytesPerTrigger {text!r} must be positive")
    return value
