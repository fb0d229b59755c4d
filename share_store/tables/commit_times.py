"""Commit timestamps and the version current at a point in time.

Timestamps follow the Delta protocol: the in-commit timestamp where the table
writes them, else the commit file's modification time, made strictly
increasing as Delta readers do, so that every version has its own timestamp.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, datetime

from share_store.errors import InvalidParameter


@dataclass(frozen=True)
class Commit:
    version: int
    timestamp: int  # epoch milliseconds


def monotonic(timestamps: list[int]) -> list[int]:
    result: list[int] = []
    for value in timestamps:
        result.append(value if not result or value > result[-1] else result[-1] + 1)
    return result


def format_ms(timestamp: int) -> str:
    moment = datetime.fromtimestamp(timestamp / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def version_at(commits: list[Commit], timestamp: int, shown: str) -> int:
    """The version current at `timestamp`: the last commit at or before it."""
    index = bisect_right([c.timestamp for c in commits], timestamp) - 1
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
    index = bisect_left([c.timestamp for c in commits], timestamp)
    if index >= len(commits):
        last = commits[-1]
        raise InvalidParameter(
            f"The provided timestamp ({shown}) is after the latest available version "
            f"{last.version}. Please use a timestamp less than or equal to {format_ms(last.timestamp)}."
        )
    return commits[index].version
