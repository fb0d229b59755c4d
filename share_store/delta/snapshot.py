"""A shared Delta table: its commits, and its snapshots (cached by version)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from share_store.arrow_text import string_data
from share_store.delta.active_files import FileSet, StreamedFileSet
from share_store.delta.deletion_vectors import dv_storage_path
from share_store.delta.log import Commit, monotonic
from share_store.delta.replay import LogListing, LogReader, ReplayState, collector_paused, file_identity
from share_store.errors import InvalidParameter, TableFilesMissing, UnsupportedOperation
from share_store.storage.base import BatchSigning, ObjectStorage, UrlSigning

# How stale a listing may be about anything but new versions (see `DeltaTableReader.listing`).
FULL_LISTING_SECONDS = 60.0
# Beyond this many commits after the newest snapshot held, a version is replayed from its checkpoint.
MAX_ADVANCED_COMMITS = 100
#: A held snapshot's memo entry: its active files by identity, which later versions start from.
ACTIVE = "active files"


def file_key(table_path: str, log_path: str) -> str:
    """Object key of a data file; paths in the log are relative, URL-encoded URIs."""
    if "://" in log_path or log_path.startswith("/"):
        # Absolute paths point outside the shared table: sharing them would hand
        # out URLs to objects the provider never shared.
        raise UnsupportedOperation("tables with absolute file paths cannot be shared")
    key = unquote(log_path) if "%" in log_path else log_path
    wrapped = f"/{key}/"  # a "." or ".." segment, first and last ones included
    if "/./" in wrapped or "/../" in wrapped:
        raise UnsupportedOperation("tables with file paths leaving the table cannot be shared")
    return f"{table_path}/{key}"


# Log paths `file_key` decodes (%) or refuses (absolute, or with a "." or ".." segment).
UNUSUAL_PATH = r"%|://|^/|(^|/)\.\.?(/|$)"


@dataclass(frozen=True)
class DeltaSnapshot:
    """The raw protocol, metadata and active `add` actions of one version."""

    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    #: The active `add` actions (a list is wrapped in a `FileSet`).
    adds: FileSet
    #: Response format → why this snapshot cannot be served in it (Iceberg tables).
    refusals: dict[str, str] = field(default_factory=dict)
    #: Files name their columns as the schema does, whatever the column mapping says
    #: (Iceberg tables whose columns were never renamed).
    native_column_names: bool = False
    #: What the server derives from this snapshot once and keeps with it (pre-encoded
    #: lines). Not an `__init__` argument, so `dataclasses.replace` starts a new one.
    memo: dict[Hashable, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.adds, FileSet):
            object.__setattr__(self, "adds", FileSet(self.adds))

    @property
    def num_files(self) -> int:
        return self.adds.count

    @property
    def size(self) -> int:
        return self.adds.total_size

    @property
    def streamed(self) -> bool:
        """Whether the files are read from the checkpoint each time rather than held."""
        return isinstance(self.adds, StreamedFileSet)

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.get("configuration") or {}

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.get("partitionColumns") or [])

    @property
    def min_reader_version(self) -> int:
        return int(self.protocol.get("minReaderVersion", 1))

    @property
    def reader_features(self) -> tuple[str, ...]:
        return tuple(self.protocol.get("readerFeatures") or ())

    @property
    def column_mapping_mode(self) -> str:
        return self.configuration.get("delta.columnMapping.mode", "none")

    def narrowed(self, adds: Iterable[dict[str, Any]]) -> DeltaSnapshot:
        """The same version with only `adds`, some of its own files: a query's planned subset.

        It shares this snapshot's memo, so the pre-encoded lines of its files are
        the held snapshot's, made once for every query that plans its way to them.
        (They are keyed by the actions' ids: the subset's actions are this
        snapshot's own, so the ids mean the same files.)
        """
        subset = dataclasses.replace(self, adds=FileSet(adds))
        object.__setattr__(subset, "memo", self.memo)
        return subset

    @cached_property
    def has_deletion_vectors(self) -> bool:
        # Cached: checked on every request, and a snapshot never changes.
        return (
            "deletionVectors" in self.reader_features
            or self.configuration.get("delta.enableDeletionVectors", "false").lower() == "true"
            or self.adds.has_deletion_vectors
        )

    @property
    def change_data_feed_enabled(self) -> bool:
        return cdf_enabled(self.metadata)

    @cached_property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.metadata["schemaString"])


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
        self._entries: OrderedDict[tuple[object, int], DeltaSnapshot] = OrderedDict()
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

    def get(self, table: object, version: int) -> DeltaSnapshot | None:
        with self._lock:
            snapshot = self._entries.get((table, version))
            if snapshot is not None:
                self._entries.move_to_end((table, version))
            return snapshot

    def put(self, table: object, snapshot: DeltaSnapshot) -> None:
        key = (table, snapshot.version)
        with self._lock:
            if key in self._entries:
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

    def get(self, version: int) -> DeltaSnapshot | None:
        return self._cache.get(self._table, version)

    def put(self, snapshot: DeltaSnapshot) -> None:
        self._cache.put(self._table, snapshot)

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


def cdf_enabled(metadata: dict[str, Any]) -> bool:
    config = metadata.get("configuration") or {}
    return str(config.get("delta.enableChangeDataFeed", "false")).lower() == "true"


class DeltaTableReader:
    def __init__(
        self,
        storage: ObjectStorage,
        bucket: str,
        path: str,
        snapshots: TableSnapshots | None = None,
        checked: CheckedVersions | None = None,
        persisted: Callable[[LogListing], DeltaSnapshot | None] | None = None,
    ) -> None:
        self.storage = storage
        self.bucket = bucket
        self.path = path
        #: The persisted summary of a listing's latest version, as a snapshot, if any (see `head`).
        self._persisted = persisted
        #: The last summary `head` answered from, by its version and commit time (it never changes).
        self._summarized: tuple[tuple[int, int | None], DeltaSnapshot] | None = None
        self.log = LogReader(storage, bucket, path)
        self._snapshots = snapshots if snapshots is not None else SnapshotCache().table()
        self._commits: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._ict: dict[int, int] = {}
        self._checked = checked if checked is not None else CheckedVersions()
        self._lock = threading.Lock()
        self._listing: LogListing | None = None
        self._listed_at = 0.0
        #: The newest snapshot built, which later versions are built from (see `_advanced`);
        #: weakly, so that the snapshot cache alone decides what stays in memory.
        self._newest: Callable[[], DeltaSnapshot | None] = lambda: None

    def listing(self) -> LogListing:
        """The log's files as of now: only what follows the newest known version is listed.

        New commits and checkpoints always show at once. Everything else (logs
        cleaned up, checkpoints written late for older versions) is picked up by
        a full listing at most `FULL_LISTING_SECONDS` later, or at once after a
        read finds a listed file gone. A log with a gap in the commits its latest
        version needs is TableLogDamaged, for every request (and listed in full
        each time, so that a restored commit shows at once).
        """
        now = time.monotonic()
        with self._lock:
            known, listed_at = self._listing, self._listed_at
        if known is None or now - listed_at > FULL_LISTING_SECONDS or not known.commits or known.gap:
            fresh = self.log.listing()
            with self._lock:
                self._listing, self._listed_at = fresh, now
            fresh.check_contiguous()
            return fresh
        extended = known.extended(self.log.listing(after=known.latest_version))
        with self._lock:
            if self._listing is known:
                self._listing = extended
        extended.check_contiguous()
        return extended

    def _forget_listing(self) -> None:
        with self._lock:
            self._listing = None

    @property
    def holds_snapshot(self) -> bool:
        return self._snapshots.held

    def latest_version(self, listing: LogListing | None = None) -> int:
        return (listing or self.listing()).latest_version

    def head(self, listing: LogListing | None = None) -> DeltaSnapshot:
        """The latest version, for its head lines alone (`/metadata`): held, summarized or built.

        A summary persisted by an earlier server counts only if it is of the version the
        listing names as latest (and of its very commit file); its files cannot be listed
        (`summaries.SummarizedFiles`).
        """
        listing = listing or self.listing()
        version = listing.latest_version
        held = self._snapshots.get(version)
        if held is not None:
            return held
        if self._persisted is not None:
            key = (version, listing.commit_times.get(version))
            remembered = self._summarized
            if remembered is not None and remembered[0] == key:
                return remembered[1]  # no store read per request for the same version
            summarized = self._persisted(listing)
            if summarized is not None:
                self._summarized = (key, summarized)
                return summarized
        return self.snapshot(version, listing)

    def snapshot(self, version: int | None = None, listing: LogListing | None = None) -> DeltaSnapshot:
        # A cached version needs no listing; the latest version always does.
        cached = self._snapshots.get(version) if version is not None else None
        if cached is not None:
            return cached
        listing = listing or self.listing()
        if version is None:
            version = listing.latest_version
            cached = self._snapshots.get(version)
            if cached is not None:
                return cached
        if version > listing.latest_version:
            raise InvalidParameter(
                f"Cannot load table version {version} as it does not exist. "
                f"The latest version of the table is {listing.latest_version}."
            )
        try:
            snapshot = self._advanced(listing, version)
            if snapshot is None:
                state = self.log.replay(listing, version)
                assert state.protocol is not None and state.metadata is not None  # or replay raises
                snapshot = DeltaSnapshot(version, state.protocol, state.metadata, state.files())
                if not snapshot.streamed:
                    snapshot.memo[ACTIVE] = state.active
        except TableFilesMissing:
            self._forget_listing()  # a listed file is gone: list in full next time
            raise
        self._snapshots.put(snapshot)
        with self._lock:
            newest = self._newest()
            if newest is None or snapshot.version > newest.version:
                self._newest = weakref.ref(snapshot)
                older = newest
            else:
                older = snapshot
        # Only the newest snapshot is advanced from: an older one's index of its active
        # files (a dictionary the size of the table) would be held for nothing.
        if older is not None:
            older.memo.pop(ACTIVE, None)
        return snapshot

    def _advanced(self, listing: LogListing, version: int) -> DeltaSnapshot | None:
        """`version` as the newest snapshot built so far plus the commits after it; None if it cannot be.

        A table that is written to while it is read gets a new version every few
        commits: replaying the log from its checkpoint for each would cost as much as
        a cold query (most of a second for 100,000 files), where applying the new
        commits to the files already held costs a dictionary copy. The new snapshot
        shares the unchanged files' actions, and keeps their pre-encoded lines.
        """
        with self._lock:
            base = self._newest()
        if (
            base is None
            or base.streamed
            or not base.version < version <= base.version + MAX_ADVANCED_COMMITS
            or any(v not in listing.commits for v in range(base.version + 1, version + 1))
        ):
            return None
        with collector_paused():
            held = base.memo.get(ACTIVE) or {file_identity(add): add for add in base.adds}
            state = ReplayState(base.protocol, base.metadata, dict(held))
            touched = set()
            for commit in range(base.version + 1, version + 1):
                for action in self.commit(listing, commit):
                    state.apply(action)
                    file = action.get("add") or action.get("remove")
                    if file is not None:
                        touched.add(file_identity(file))
            assert state.protocol is not None and state.metadata is not None
            snapshot = DeltaSnapshot(version, state.protocol, state.metadata, state.files())
            snapshot.memo[ACTIVE] = state.active
            # Commits touch few files: only theirs can have gone.
            gone = [
                id(held[identity])
                for identity in touched
                if identity in held and state.active.get(identity) is not held[identity]
            ]
            for key, derived in list(base.memo.items()):
                if isinstance(key, tuple) and key[0] == "lines":  # keyed by their actions' ids
                    kept = derived.copy()
                    for action_id in gone:
                        kept.pop(action_id, None)
                    snapshot.memo[key] = kept
        return snapshot

    def planned(self, snapshot: DeltaSnapshot, hint: dict[str, Any]) -> DeltaSnapshot:
        # Delta has no planning of its own: predicate hints are applied per file.
        return snapshot

    def for_parquet(self, snapshot: DeltaSnapshot) -> DeltaSnapshot:
        # Delta tables are served as they are; the format check refuses what parquet cannot carry.
        return snapshot

    def parquet_commit(self, listing: LogListing, version: int) -> list[dict[str, Any]]:
        return self.commit(listing, version)

    def commit(self, listing: LogListing, version: int) -> list[dict[str, Any]]:
        """The actions of one commit; commits never change, so they are cached."""
        with self._lock:
            cached = self._commits.get(version)
        if cached is None:
            try:
                cached = self.log.read_commit(listing, version)
            except TableFilesMissing:
                self._forget_listing()
                raise
            with self._lock:
                self._commits[version] = cached
                while len(self._commits) > 256:
                    self._commits.popitem(last=False)
        return cached

    def commits(self, listing: LogListing, snapshot: DeltaSnapshot | None = None) -> list[Commit]:
        """Every commit still in the log with its timestamp, oldest first."""
        config = snapshot.configuration if snapshot else {}
        ict_from: int | None = None
        if str(config.get("delta.enableInCommitTimestamps", "false")).lower() == "true":
            ict_from = int(config.get("delta.inCommitTimestampEnablementVersion", "0"))
        versions = sorted(listing.commits)
        if not versions:
            raise TableFilesMissing()
        # File times are made increasing, as Delta readers do; in-commit
        # timestamps are the writer's promise and are used as written.
        with_ict = [v for v in versions if ict_from is not None and v >= ict_from]
        by_file = [v for v in versions if ict_from is None or v < ict_from]
        times = dict(zip(by_file, monotonic([listing.commit_times[v] for v in by_file]), strict=True))
        times.update({v: self._in_commit_timestamp(listing, v) for v in with_ict})
        return [Commit(v, times[v]) for v in versions]

    def _in_commit_timestamp(self, listing: LogListing, version: int) -> int:
        if version not in self._ict:
            commit = self.commit(listing, version)
            info: dict[str, Any] = next((a["commitInfo"] for a in commit if "commitInfo" in a), {})
            value = info.get("inCommitTimestamp")
            self._ict[version] = int(value) if value is not None else listing.commit_times[version]
        return self._ict[version]

    # -- where files live -------------------------------------------------------------

    def locate(self, path: str) -> tuple[str, str]:
        """Bucket and key of a file named by a log path."""
        return self.bucket, file_key(self.path, path)

    def locate_many(self, paths: pa.Array) -> tuple[str, pa.Array] | None:
        """`locate` for many log paths at once (a checkpoint's record batch): their bucket and keys.

        None when a path is unusual (see `UNUSUAL_PATH`): `locate` decodes or refuses each.
        """
        # Checked first on all the paths' bytes at once, which is far faster and finds
        # every unusual path (and a few usual ones, which the exact check then clears).
        text = string_data(paths)
        maybe = b"%" in text or b":" in text or b"/." in text
        maybe = maybe or pc.any(pc.or_(pc.starts_with(paths, "/"), pc.starts_with(paths, "."))).as_py()
        if maybe and pc.any(pc.match_substring_regex(paths, UNUSUAL_PATH)).as_py():
            return None
        return self.bucket, pc.binary_join_element_wise(f"{self.path}/", paths, "")

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        """Bucket and key of an on-disk deletion vector (None when inline)."""
        relative = dv_storage_path(descriptor)
        return None if relative is None else (self.bucket, f"{self.path}/{relative}")

    def url_signer(self, now: float) -> UrlSigning:
        return self.storage.url_signer(now)

    def batch_signer(self, now: float) -> BatchSigning | None:
        return self.storage.batch_signer(now)

    def check_files_exist(self, snapshot: DeltaSnapshot, with_dvs: bool = False, ahead: float = 0.0) -> bool:
        """`TableFilesMissing` if any active data file (or DV file) is gone (vacuumed, lost).

        A check of the files and their vectors covers one of the files alone. `ahead`:
        check unless an earlier check is still trusted that many seconds from now.
        Whether it looked the files up (not when an earlier check covered them).
        """
        # Without vectors, checking them adds nothing: both checks are one.
        with_dvs = with_dvs and snapshot.adds.has_deletion_vectors
        key = (snapshot.version, with_dvs)
        covered = self._checked.fresh(key, ahead) or (
            not with_dvs and self._checked.fresh((snapshot.version, True), ahead)
        )
        if snapshot.streamed or covered:
            # A streamed snapshot has too many files to look each one up; its
            # recipients learn of a missing file from that file's URL.
            return False
        locations = [self.locate(add["path"]) for add in snapshot.adds]
        if with_dvs:
            dvs = (
                self.locate_dv(add["deletionVector"]) for add in snapshot.adds if add.get("deletionVector")
            )
            locations += [dv for dv in dvs if dv is not None]
        started = time.monotonic()
        self.check_exist(locations)
        self._checked.mark(key, time.monotonic() - started)
        return True

    def check_exist(self, locations: list[tuple[str, str]]) -> None:
        missing = self.storage.count_missing(locations)
        if missing:
            raise TableFilesMissing.counted(missing)
