"""Commit versions and timestamps read from a table's `_delta_log` listing.

deltalake answers "what is in version N"; the protocol also asks "which
version was current at time T" and "when was version N committed", with
timestamps defined by the Delta protocol: the in-commit timestamp when the
table has them, else the commit file's modification time. File times are made
strictly increasing, as Delta readers do, so that every version has its own
timestamp.
"""

from __future__ import annotations

import json
import re
import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime

from share_store.errors import InvalidParameter, TableFilesMissing
from share_store.storage.base import ObjectStorage

COMMIT_FILE = re.compile(r"(\d{20})\.json$")


@dataclass(frozen=True)
class Commit:
    version: int
    timestamp: int  # epoch milliseconds


def monotonic(timestamps: list[int]) -> list[int]:
    result: list[int] = []
    for value in timestamps:
        result.append(value if not result or value > result[-1] else result[-1] + 1)
    return result


class CommitLog:
    """The commits of one table, listed on demand; in-commit timestamps cached."""

    def __init__(self, storage: ObjectStorage, bucket: str, path: str) -> None:
        self.storage = storage
        self.bucket = bucket
        self.log_prefix = f"{path}/_delta_log/"
        self._ict: dict[int, int] = {}
        self._lock = threading.Lock()

    def list_commits(self, ict_from: int | None = None) -> list[Commit]:
        """Every commit still in the log, oldest first.

        `ict_from` is the version from which the table writes in-commit
        timestamps (None when it does not).
        """
        found: list[tuple[int, int]] = []
        for info in self.storage.list(self.bucket, self.log_prefix):
            match = COMMIT_FILE.search(info.key)
            if match and info.key.rpartition("/")[2] == match.group(0):
                found.append((int(match.group(1)), info.modified_ms))
        if not found:
            raise TableFilesMissing()
        found.sort()
        times = [
            self._in_commit_timestamp(version) if ict_from is not None and version >= ict_from else modified
            for version, modified in found
        ]
        return [Commit(version, ts) for (version, _), ts in zip(found, monotonic(times), strict=True)]

    def _in_commit_timestamp(self, version: int) -> int:
        with self._lock:
            cached = self._ict.get(version)
        if cached is not None:
            return cached
        raw = self.storage.read(self.bucket, f"{self.log_prefix}{version:020d}.json")
        value = None
        for line in raw.splitlines():
            if b"commitInfo" in line:
                info = json.loads(line).get("commitInfo", {})
                value = info.get("inCommitTimestamp")
                break
        if not isinstance(value, int):
            raise TableFilesMissing(f"commit {version} has no in-commit timestamp")
        with self._lock:
            self._ict[version] = value
        return value


def version_at(commits: list[Commit], timestamp: int, shown: str) -> int:
    """The version current at `timestamp`: the last commit at or before it."""
    times = [c.timestamp for c in commits]
    index = bisect_right(times, timestamp) - 1
    if index < 0:
        first = commits[0]
        raise InvalidParameter(
            f"The provided timestamp ({shown}) is before the earliest available version "
            f"{first.version}. Please use a timestamp greater than or equal to "
            f"{format_ms(first.timestamp)}."
        )
    return commits[index].version


def first_version_at_or_after(commits: list[Commit], timestamp: int, shown: str) -> int:
    """The earliest version committed at or after `timestamp`."""
    times = [c.timestamp for c in commits]
    index = bisect_left(times, timestamp)
    if index >= len(commits):
        last = commits[-1]
        raise InvalidParameter(
            f"The provided timestamp ({shown}) is after the latest available version "
            f"{last.version}. Please use a timestamp less than or equal to {format_ms(last.timestamp)}."
        )
    return commits[index].version


def format_ms(timestamp: int) -> str:
    return (
        datetime.fromtimestamp(timestamp / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )
