"""A shared Delta table's reader: its log's commits, and its snapshots (cached by version)."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from share_store.delta import replay
from share_store.delta.advanced_snapshots import ACTIVE, advanced
from share_store.delta.deletion_vectors import dv_storage_path
from share_store.delta.file_keys import file_key, file_keys
from share_store.delta.log_listing import LogListing
from share_store.delta.replay import LogReader
from share_store.errors import InvalidParameter, TableFilesMissing
from share_store.storage.base import BatchSigning, ObjectStorage, UrlSigning
from share_store.tables.active_files import FileSet, UnheldFileSet
from share_store.tables.commit_times import Commit, monotonic
from share_store.tables.snapshot import TableSnapshot
from share_store.tables.snapshot_cache import CheckedVersions, SnapshotCache, TableSnapshots

# How stale a listing may be about anything but new versions (see `DeltaTableReader.listing`).
FULL_LISTING_SECONDS = 60.0
# Beyond this many commits after the newest snapshot held, a version is replayed from its checkpoint.
MAX_ADVANCED_COMMITS = 100

logger = logging.getLogger(__name__)

#: Held snapshots built behind a first reader (see `DeltaTableReader.snapshot`), one at a
#: time for all tables: after a start many tables may be read for the first time at once,
#: and their builds, each a core's work for most of a second, must not crowd the answers.
_builds = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-build")
#: A build waits for the first listing of the streamed files to end, at most this long: it
#: would take half the interpreter from that answer while it runs (the first of a client's
#: calls is often `/metadata`, which lists nothing, its `/query` a moment later).
BUILD_WAIT_SECONDS = 2.0
#: Builds waiting or running, all tables together, beyond which a first reader's snapshot is
#: not built behind it (its next reader streams too, and asks again): a recipient reading
#: many cold versions cheaply, each answer left after its first byte, must not queue a
#: core-second of work per request.
MAX_PENDING_BUILDS = 4
_pending = threading.BoundedSemaphore(MAX_PENDING_BUILDS)


class DeltaTableReader:
    def __init__(
        self,
        storage: ObjectStorage,
        bucket: str,
        path: str,
        snapshots: TableSnapshots | None = None,
        checked: CheckedVersions | None = None,
        persisted: Callable[[LogListing], TableSnapshot | None] | None = None,
    ) -> None:
        self.storage = storage
        self.bucket = bucket
        self.path = path
        #: The persisted summary of a listing's latest version, as a snapshot, if any (see `head`).
        self._persisted = persisted
        #: The last summary `head` answered from, by its version and commit time (it never changes).
        self._summarized: tuple[tuple[int, int | None], TableSnapshot] | None = None
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
        self._newest: Callable[[], TableSnapshot | None] = lambda: None
        #: Held snapshots being built behind their first readers, by version.
        self._building: dict[int, Future[TableSnapshot]] = {}
        #: Called with each snapshot built behind a first reader, once its files were looked up:
        #: the server makes its lines there, as the snapshot warmer does for what it builds.
        self.on_built: Callable[[TableSnapshot], None] | None = None

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

    def head(self, listing: LogListing | None = None) -> TableSnapshot:
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

    def snapshot(self, version: int | None = None, listing: LogListing | None = None) -> TableSnapshot:
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
                snapshot = self._replayed(listing, version, first_reader=True)
        except TableFilesMissing:
            self._forget_listing()  # a listed file is gone: list in full next time
            raise
        if (
            snapshot.streamed
            and version == listing.latest_version  # what the next readers read; time travel is rare
            and self.log.checkpoint_bytes(listing, version) <= replay.STREAM_THRESHOLD_BYTES
        ):
            self._build_behind(listing, snapshot)
        return self._keep(snapshot)

    def _replayed(self, listing: LogListing, version: int, first_reader: bool) -> TableSnapshot:
        """`version` replayed from its checkpoint; for a `first_reader`, streamed from a checkpoint
        too big to hold at once (`replay.COLD_STREAM_BYTES`), else held as long as it fits."""
        stream_above = min(replay.COLD_STREAM_BYTES, replay.STREAM_THRESHOLD_BYTES) if first_reader else None
        state = self.log.replay(listing, version, stream_above, first_reader=first_reader)
        assert state.protocol is not None and state.metadata is not None  # or replay raises
        snapshot = TableSnapshot(version, state.protocol, state.metadata, state.files())
        if not snapshot.streamed:
            snapshot.memo[ACTIVE] = state.active
        return snapshot

    def _build_behind(self, listing: LogListing, streamed: TableSnapshot) -> None:
        """Build the held snapshot of `streamed`'s version in the background, for the reads after the first.

        The first reader of a table nobody read yet gets its lines as the checkpoint is
        decoded (first byte in milliseconds rather than after the whole replay); the
        next ones get the held snapshot, whose lines are made once and kept, and whose
        files were looked up here (a streamed answer does not look them up).
        """
        version = streamed.version
        kept = self._snapshots.get(version)
        with self._lock:
            if version in self._building or (kept is not None and not kept.streamed):
                return  # being built, or built by now (this reader replayed while it was)
            if not _pending.acquire(blocking=False):
                return  # enough builds queued already
            try:
                future = _builds.submit(self._build, listing, version, streamed.adds)
            except RuntimeError:  # the interpreter is exiting: nothing more is built
                _pending.release()
                return
            self._building[version] = future

    def _build(self, listing: LogListing, version: int, streamed: FileSet) -> TableSnapshot:
        try:
            if isinstance(streamed, UnheldFileSet):
                streamed.listed.wait(BUILD_WAIT_SECONDS)
            held = self._replayed(listing, version, first_reader=False)
            self._keep(held)
            try:
                self.check_files_exist(held, with_dvs=True)
            except TableFilesMissing:
                return held  # the next query looks again, and tells its recipient
            if self.on_built is not None:
                try:
                    self.on_built(held)
                except Exception:
                    logger.debug("making the lines of %s/%s failed", self.bucket, self.path, exc_info=True)
            return held
        except Exception:
            logger.debug("building a held snapshot of %s/%s failed", self.bucket, self.path, exc_info=True)
            self._snapshots.drop(version)  # the next query replays again, and reports what fails
            raise
        finally:
            with self._lock:
                self._building.pop(version, None)
            _pending.release()

    def built(self, snapshot: TableSnapshot) -> TableSnapshot:
        """`snapshot` with its files held: waits for a build behind its first reader, if one runs."""
        if not snapshot.streamed:
            return snapshot
        with self._lock:
            future = self._building.get(snapshot.version)
        if future is None:  # never built, or built already
            return self._snapshots.get(snapshot.version) or snapshot
        try:
            return future.result()
        except Exception:  # noqa: BLE001 - reported by the next query, which replays again
            return snapshot

    def _keep(self, snapshot: TableSnapshot) -> TableSnapshot:
        """Cache `snapshot` and advance later versions from it if it is the newest built."""
        self._snapshots.put(snapshot)
        with self._lock:
            newest = self._newest()
            if (
                newest is None
                or snapshot.version > newest.version
                or (snapshot.version == newest.version and newest.streamed and not snapshot.streamed)
            ):
                self._newest = weakref.ref(snapshot)
                older = newest
            else:
                older = snapshot
        # Only the newest snapshot is advanced from: an older one's index of its active
        # files (a dictionary the size of the table) would be held for nothing.
        if older is not None:
            older.memo.pop(ACTIVE, None)
        return snapshot

    def _advanced(self, listing: LogListing, version: int) -> TableSnapshot | None:
        """`version` as the newest snapshot built so far plus the commits after it; None if it cannot be
        (see `advanced_snapshots`)."""
        with self._lock:
            base = self._newest()
        if (
            base is None
            or base.streamed
            or not base.version < version <= base.version + MAX_ADVANCED_COMMITS
            or any(v not in listing.commits for v in range(base.version + 1, version + 1))
        ):
            return None
        return advanced(
            base, version, (self.commit(listing, v) for v in range(base.version + 1, version + 1))
        )

    def planned(self, snapshot: TableSnapshot, hint: dict[str, Any]) -> TableSnapshot:
        # Delta has no planning of its own: predicate hints are applied per file.
        return snapshot

    def for_parquet(self, snapshot: TableSnapshot) -> TableSnapshot:
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

    def commits(self, listing: LogListing, snapshot: TableSnapshot | None = None) -> list[Commit]:
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

        None when a path is unusual (see `file_keys.UNUSUAL_PATH`): `locate` decodes or refuses each.
        """
        keys = file_keys(self.path, paths)
        return None if keys is None else (self.bucket, keys)

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        """Bucket and key of an on-disk deletion vector (None when inline)."""
        relative = dv_storage_path(descriptor)
        return None if relative is None else (self.bucket, f"{self.path}/{relative}")

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        return self.storage.url_signer(now, lifetime)

    def batch_signer(self, now: float, lifetime: int | None = None) -> BatchSigning | None:
        return self.storage.batch_signer(now, lifetime)

    @property
    def batch_signs_faster(self) -> bool:
        return self.storage.batch_signs_faster

    def check_files_exist(self, snapshot: TableSnapshot, with_dvs: bool = False, ahead: float = 0.0) -> bool:
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
