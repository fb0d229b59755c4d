"""What a Delta table's `_delta_log/` holds: its commits and complete checkpoints by version.

`list_log` lists the log (all of it, or from a version on) into a `LogListing`,
which tells the versions a snapshot can be rebuilt at, and whether the commits
the latest version needs are all there (`gap`); `check_available` refuses a
version the log no longer holds. Reading the files is the replay's
(`share_store.delta.replay`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from share_store.errors import InvalidParameter, TableFilesMissing, TableLogDamaged
from share_store.storage.base import ObjectStorage

# Matched whole (`fullmatch`): `$` would also match before a trailing newline.
COMMIT = re.compile(r"([0-9]{20})\.json")
CLASSIC_CHECKPOINT = re.compile(r"([0-9]{20})\.checkpoint\.parquet")
MULTIPART_CHECKPOINT = re.compile(r"([0-9]{20})\.checkpoint\.([0-9]{10})\.([0-9]{10})\.parquet")
V2_CHECKPOINT = re.compile(r"([0-9]{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)")


@dataclass
class LogListing:
    """What `_delta_log/` holds: commit files and complete checkpoints by version."""

    commits: dict[int, str] = field(default_factory=dict)
    commit_times: dict[int, int] = field(default_factory=dict)
    checkpoints: dict[int, list[str]] = field(default_factory=dict)
    #: Bytes of each checkpoint's files (their sidecars not included).
    checkpoint_bytes: dict[int, int] = field(default_factory=dict)
    #: Versions of multi-part checkpoints with parts missing: a damaged log, not a usable one.
    incomplete_checkpoints: set[int] = field(default_factory=set)

    @property
    def earliest_version(self) -> int:
        """The oldest version a snapshot can be rebuilt at: 0 with the first commit, else the
        oldest complete checkpoint (the commits before it were cleaned up)."""
        if 0 in self.commits or not self.checkpoints:
            return min(self.commits, default=0)
        return min(self.checkpoints)

    @property
    def latest_version(self) -> int:
        versions = list(self.commits) + list(self.checkpoints)
        if not versions:
            raise TableFilesMissing()
        return max(versions)

    @cached_property
    def gap(self) -> tuple[int, int] | None:
        """The first run of commits missing between the newest checkpoint (or the oldest commit,
        without one) and the latest version, as (first missing, next present); None when whole.

        Those are the commits a Delta table's latest version is rebuilt from, so a
        gap there makes it unreadable, as Delta's own readers hold (its versions are
        "not contiguous"). Commits missing before a checkpoint were cleaned up, not
        lost. Worked out once per listing, by counting when the commits are whole.
        """
        if not self.commits:
            return None
        latest = self.latest_version
        base = max(self.checkpoints, default=None)
        if base is None:
            start = min(self.commits)
            if len(self.commits) == latest - start + 1:
                return None
        else:
            start = base + 1
        first = next((v for v in range(start, latest + 1) if v not in self.commits), None)
        if first is None:
            return None
        return first, min(v for v in self.commits if v > first)

    def check_contiguous(self) -> None:
        """TableLogDamaged, naming the missing commits, when a Delta log has a `gap`."""
        if self.gap is None:
            return
        first, after = self.gap
        missing = f"commit {first} is" if first == after - 1 else f"commits {first} to {after - 1} are"
        raise TableLogDamaged(
            f"{missing} missing from the log (a gap in its commits, between versions {first - 1} "
            f"and {after}): its latest version, {self.latest_version}, cannot be read"
        )

    def extended(self, newer: LogListing) -> LogListing:
        """This listing with the files of a later, partial one (`list_log(after=...)`) added."""
        return LogListing(
            commits=self.commits | newer.commits,
            commit_times=self.commit_times | newer.commit_times,
            checkpoints=self.checkpoints | newer.checkpoints,
            checkpoint_bytes=self.checkpoint_bytes | newer.checkpoint_bytes,
            incomplete_checkpoints=self.incomplete_checkpoints | newer.incomplete_checkpoints,
        )


def list_log(storage: ObjectStorage, bucket: str, log_prefix: str, after: int | None = None) -> LogListing:
    """The log's commits and complete checkpoints; with `after`, only those from that version on."""
    listing = LogListing()
    parts: dict[int, dict[int, tuple[int, str, int]]] = {}
    # "{version:020d}" sorts before both "{version:020d}.json" and "….checkpoint…".
    start_after = f"{log_prefix}{after:020d}" if after is not None else None
    for info in storage.list(bucket, log_prefix, start_after):
        name = info.key.rpartition("/")[2]
        if match := COMMIT.fullmatch(name):
            version = int(match.group(1))
            listing.commits[version] = info.key
            listing.commit_times[version] = info.modified_ms
        elif (match := CLASSIC_CHECKPOINT.fullmatch(name)) or (match := V2_CHECKPOINT.fullmatch(name)):
            version = int(match.group(1))
            if version not in listing.checkpoints:
                listing.checkpoints[version] = [info.key]
                listing.checkpoint_bytes[version] = info.size
        elif match := MULTIPART_CHECKPOINT.fullmatch(name):
            version, part, total = (int(g) for g in match.groups())
            parts.setdefault(version, {})[part] = (total, info.key, info.size)
    for version, found in parts.items():
        totals = {total for total, _, _ in found.values()}
        if len(totals) == 1 and set(found) == set(range(1, totals.pop() + 1)):
            if version not in listing.checkpoints:
                listing.checkpoints[version] = [found[i][1] for i in sorted(found)]
                listing.checkpoint_bytes[version] = sum(size for _, _, size in found.values())
        elif version not in listing.checkpoints:
            listing.incomplete_checkpoints.add(version)
    return listing


def check_available(listing: LogListing, version: int) -> None:
    """Refuse a version older than the log still holds (cleaned up), naming the ones it has."""
    if listing.commits and 0 not in listing.commits and not listing.checkpoints:
        parts = " (a checkpoint is missing parts)" if listing.incomplete_checkpoints else ""
        raise TableLogDamaged(f"the log has neither its first commit nor a whole checkpoint{parts}")
    earliest = listing.earliest_version
    damaged = [v for v in listing.incomplete_checkpoints if v <= version]
    if version < earliest and damaged:
        # The commits before were cleaned up on the strength of a checkpoint that is not whole.
        raise TableLogDamaged(
            f"checkpoint {max(damaged)} is missing parts, and the commits before it are gone"
        )
    if version < earliest:
        raise InvalidParameter(
            f"Cannot load table version {version}: the table's log was cleaned up before it. "
            f"Versions {earliest} to {listing.latest_version} are available."
        )
