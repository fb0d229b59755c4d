"""Snapshots kept between requests, and the versions whose files were recently checked.

One `SnapshotCache` bounds the snapshots of every table together by the files
they hold; each reader sees its own table's part (`TableSnapshots`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable

from share_store.tables.snapshot import TableSnapshot

# The defaults of `SnapshotCache`, which `[cache]` settings override.
SNAPSHOTS_PER_TABLE = 8
# Held actions take about 900 bytes a file with simple stats, 1.5 KB once one response
# format's lines are pre-encoded (measured on 100,000 files): up to some 750 MB in all.
SNAPSHOT_CACHE_FILES = 500_000
# How long a check that a version's data files exist is taken as true, at least.
FILES_CHECK_SECONDS = 5.0
# A check is trusted for at least this many times what it took (see `CheckedVersions`).
CHECK_COST_FACTOR = 20.0


class SnapshotCache:
    """Recent snapshots of every table, bounded by the files they hold all together (LRU).

    Tables share the one bound, so that many tables queried once each cannot
    hold more than the bound between them; each table also keeps at most
    `per_table` versions. A version never changes, so entries never go stale.
    The snapshot just put stays even when it alone exceeds the bound: every
    query of its table would otherwise replay the log again.
    """

    def __init__(self, max_files: int = SNAPSHOT_CACHE_FILES, per_table: int = SNAPSHOTS_PER_TABLE) -> None:
        self.max_files = max_files
        self.per_table = per_table
        self._entries: OrderedDict[tuple[object, int], TableSnapshot] = OrderedDict()
        self._counts: dict[object, int] = {}
        self._files = 0
        self._lock = threading.Lock()

    @property
    def files(self) -> int:
        """The files the cached snapshots hold (the figure `max_files` bounds)."""
        return self._files

    def __len__(self) -> int:
        return len(self._entries)

    def table(self) -> TableSnapshots:
        """The cache as one table sees it: a view of its own versions."""
        return TableSnapshots(self, object())

    def get(self, table: object, version: int) -> TableSnapshot | None:
        with self._lock:
            snapshot = self._entries.get((table, version))
            if snapshot is not None:
                self._entries.move_to_end((table, version))
            return snapshot

    def put(self, table: object, snapshot: TableSnapshot) -> None:
        """Keep `snapshot`; a held snapshot replaces a streamed one of its version, built behind
        its first reader (see `DeltaTableReader.snapshot`); anything else already kept stays."""
        key = (table, snapshot.version)
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None and kept.streamed and not snapshot.streamed:
                self._evict(key)
            elif kept is not None:
                self._entries.move_to_end(key)
                return
            self._entries[key] = snapshot
            self._files += snapshot.adds.resident_files
            self._counts[table] = self._counts.get(table, 0) + 1
            if self._counts[table] > self.per_table:
                self._evict(next(k for k in self._entries if k[0] is table))
            while self._files > self.max_files and len(self._entries) > 1:
                self._evict(next(iter(self._entries)))

    def _evict(self, key: tuple[object, int]) -> None:
        snapshot = self._entries.pop(key)
        self._files -= snapshot.adds.resident_files
        self._counts[key[0]] -= 1
        if not self._counts[key[0]]:
            del self._counts[key[0]]

    def drop(self, table: object, version: int) -> None:
        with self._lock:
            if (table, version) in self._entries:
                self._evict((table, version))

    def contains(self, table: object, version: int) -> bool:
        return (table, version) in self._entries

    def holds(self, table: object) -> bool:
        """Whether any version of `table` is still cached."""
        return table in self._counts


class TableSnapshots:
    """One table's part of a `SnapshotCache`: its snapshots by version."""

    def __init__(self, cache: SnapshotCache, table: object) -> None:
        self._cache = cache
        self._table = table

    def get(self, version: int) -> TableSnapshot | None:
        return self._cache.get(self._table, version)

    def put(self, snapshot: TableSnapshot) -> None:
        self._cache.put(self._table, snapshot)

    def drop(self, version: int) -> None:
        self._cache.drop(self._table, version)

    def __contains__(self, version: int) -> bool:
        return self._cache.contains(self._table, version)

    @property
    def held(self) -> bool:
        """Whether the cache still holds any of this table's versions (none once all were evicted)."""
        return self._cache.holds(self._table)


class CheckedVersions:
    """When each version's data files were last found all present; trusted for `seconds`.

    Files can be removed at any time (vacuum, lifecycle rules, by hand): a
    check made once and kept forever would hand out URLs to files long gone.
    A check that took long is trusted longer, `CHECK_COST_FACTOR` times what it
    took: listing 100,000 files on S3 takes seconds, and redone every 5 s it
    would be most of a busy table's queries' time. With `seconds` 0 every
    answer checks, however long that takes.
    """

    def __init__(self, seconds: float = FILES_CHECK_SECONDS) -> None:
        self.seconds = seconds
        self._expiries: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def fresh(self, key: Hashable, ahead: float = 0.0) -> bool:
        """Whether `key`'s files were found present recently enough to be trusted still
        (and `ahead` seconds from now: the snapshot warmer checks again before a query must)."""
        with self._lock:
            expiry = self._expiries.get(key)
        return expiry is not None and time.monotonic() + ahead < expiry

    def mark(self, key: Hashable, took: float = 0.0) -> None:
        """`key`'s files were found present just now, by a check that took `took` seconds."""
        now = time.monotonic()
        trusted = max(self.seconds, took * CHECK_COST_FACTOR) if self.seconds > 0 else 0.0
        with self._lock:
            self._expiries[key] = now + trusted
            # Expired entries say nothing: dropped here, so the dict stays small.
            if len(self._expiries) > 64:
                for stale in [k for k, expiry in self._expiries.items() if expiry <= now]:
                    del self._expiries[stale]
