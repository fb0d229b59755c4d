"""Snapshots made before a recipient asks: the shared tables at start, and hot tables' new commits.

Without it, the first query of a table after a start waits for the whole log
replay (0.6 to 0.9 s for 100,000 files), and the first query after each commit
waits for the commit to be applied. A thread of its own:

- at start, builds (and summarizes, in one write at the end) the latest
  snapshot of the tables recipients read in the
  last `[cache] warm_window_hours` (as the activity kept in the store says),
  one per storage location however many shares name it, while the snapshot
  cache has room for them (it stops at 80% of the cache's bound, so it does not
  evict the tables recipients read to warm ones nobody asked for), using at
  most `START_SHARE` of a core: a restart with 11,000 shared tables of which
  100 are read builds 100 snapshots, not 11,000, and memory follows what is
  read, not what is shared; every other table is built on its first read;
- then, every `[cache] refresh_seconds`, brings the tables recipients read in
  the last minute (the 16 most recent, while the cache still holds one of their
  snapshots) up to their latest version, so a new
  commit is applied (incrementally, from the held snapshot) before the next
  query comes. Each round costs a tail listing of each such table's log.

A built snapshot is not all a first query waits for: it also looks up every
data file (the missing-file check, 0.2 to 0.5 s for 100,000 local files) and
makes each file line's template. So for each Delta snapshot it builds, the
warmer also runs that check and makes the templates of the format a request
without capabilities gets (parquet, or delta when parquet cannot carry the
table). A check is trusted as long as any (`CheckedVersions`): the warmer only
checks again, before the trust runs out, the tables whose snapshots it built or
refreshed in the last `KEEP_READY_SECONDS` and still cached, so a first query
in that time finds the check still trusted. Those checks take at most
`CHECK_SHARE` of the warmer's time; beyond it they wait and a query checks for
itself, as it would without the warmer.

Each Delta version it builds is also summarized in the share store (version,
size, file count, protocol, metadata: `share_store.tables.summaries`), so a
restarted server answers `/metadata` of a table whose log has not moved
without replaying it, even before the warming reaches that table.

It only ever calls what a query would (`reader.snapshot()`,
`check_files_exist`), so what it builds is exactly what a query would have
built; a failure is counted and left for the next query to report to its
recipient.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from share_store.errors import ShareStoreError
from share_store.model import SharedTable
from share_store.persistence import ShareStore
from share_store.readers.table_readers import TableReaders
from share_store.tables import actions
from share_store.tables.reader import TableReader
from share_store.tables.snapshot import TableSnapshot
from share_store.tables.summaries import SnapshotSummary
from sharing_server.delta_sharing.encoding import LineEncoder
from sharing_server.observability.metrics import Metrics

logger = logging.getLogger(__name__)

#: Tables read within this many seconds count as hot; at most this many are refreshed a round.
HOT_SECONDS = 60.0
HOT_TABLES = 16
#: Warming at start stops once the snapshot cache is this full.
START_BUDGET = 0.8
#: Warming at start takes at most this share of a core (it waits as long again as it worked).
START_SHARE = 0.5
#: Tables read within this many seconds before a start are warmed at start.
WARM_WINDOW_SECONDS = 24 * 3600.0
#: Checks made ahead of queries take at most this share of the last `CHECK_WINDOW` seconds.
CHECK_SHARE = 0.1
CHECK_WINDOW = 60.0
#: A table's check is kept ahead of queries this long after the warmer built its snapshot or a
#: recipient last read it: beyond, it costs the server more than it saves the rare late query.
KEEP_READY_SECONDS = 600.0
#: Checks are renewed ahead of queries only once no recipient has read a table for this long.
QUIET_SECONDS = 2.0


class SnapshotWarmer:
    def __init__(
        self,
        store: ShareStore,
        readers: TableReaders,
        metrics: Metrics,
        warm_on_start: bool = True,
        refresh_seconds: float = 1.0,
        warm_window: float = WARM_WINDOW_SECONDS,
    ) -> None:
        self.store = store
        self.warm_window = warm_window
        self.readers = readers
        # A snapshot built behind a table's first reader (see `DeltaTableReader.snapshot`) is
        # made ready as one built here: the query after the first finds its lines made.
        readers.on_built = prepare_lines
        self.metrics = metrics
        self.warm_on_start = warm_on_start
        self.refresh_seconds = refresh_seconds
        self._stopped = threading.Event()
        #: The version each table was last brought to (only the warmer's thread touches it).
        self._versions: dict[str, int] = {}
        #: The tables whose files are checked ahead of queries, with the snapshot built
        #: (weakly: once the cache evicts it, a query would build and check it anew).
        #: Kept so for `KEEP_READY_SECONDS` after it was built or last refreshed (monotonic time).
        self._kept: dict[str, tuple[SharedTable, Callable[[], TableSnapshot | None], float]] = {}
        #: What each table's last check took, and when and how long recent checks took.
        self._took: dict[str, float] = {}
        self._checks: deque[tuple[float, float]] = deque()
        self._thread: threading.Thread | None = None
        #: Summaries made while warming at start, written together at its end (None: one by one).
        self._pending: list[tuple[str, SnapshotSummary]] | None = None

    def start(self) -> None:
        if not self.warm_on_start and self.refresh_seconds <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="snapshot-warmer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        if self.warm_on_start:
            self.warm_shared_tables()
        while self.refresh_seconds > 0 and not self._stopped.wait(self.refresh_seconds):
            self.refresh_hot_tables()

    def refresh_hot_tables(self) -> None:
        """One round: the hot tables whose snapshots are still cached, brought to their latest version.

        A hot table whose snapshots were all evicted is left for its next query:
        rebuilding it here would evict, in turn, the tables read after it, and the
        cache's bound would hold only between rounds. The least recent go first, so
        that the lookups leave the cache's order of use as the recipients made it.
        """
        refreshed = set()
        for table in reversed(self.readers.recently_used(HOT_SECONDS)[:HOT_TABLES]):
            if self._stopped.is_set():
                return
            if self.readers.reader(table, used=False).holds_snapshot:
                self._warm(table, "refresh")
                refreshed.add(table.id)
        if self._quiet():
            self.renew_checks(skip=refreshed)

    def _quiet(self) -> bool:
        """Whether recipients have read nothing for a while: the time to renew checks.

        Checks are renewed ahead of the first query after a quiet spell. While
        recipients are reading, their queries renew them as they expire: a check
        run beside them (0.3 s of a 100,000-file table, mostly holding the GIL)
        would slow every one of them.
        """
        return self.readers.quiet_for() >= max(self.refresh_seconds, QUIET_SECONDS)

    def renew_checks(self, skip: set[str] | frozenset[str] = frozenset()) -> None:
        """Check again the files of the snapshots built here whose check is about to expire."""
        since = time.monotonic() - KEEP_READY_SECONDS
        for table_id, (table, built, touched) in list(self._kept.items()):
            if self._stopped.is_set():
                return
            snapshot = built()
            if snapshot is None or touched < since:
                # Evicted, or neither built nor read for long: the next query checks for itself.
                del self._kept[table_id]
            elif table_id not in skip:
                self._check_ahead(table, self.readers.reader(table, used=False), snapshot, budgeted=True)

    def warm_shared_tables(self) -> None:
        since = datetime.now(UTC) - timedelta(seconds=self.warm_window)
        try:
            tables = tables_to_warm(self.store.all_tables(), self.store.read_tables(since))
        except Exception as error:  # noqa: BLE001 - the store down at start: queries will say so
            logger.warning("snapshot warming skipped: the store could not be read (%s)", type(error).__name__)
            return
        # Every snapshot first, then their checks and lines: a query that comes meanwhile
        # more likely finds its table built, which saves it the most.
        built_here: list[tuple[SharedTable, TableSnapshot]] = []
        self._pending = []
        try:
            self._build_at_start(tables, built_here)
        finally:
            pending, self._pending = self._pending, None
            if pending:
                self._save_summaries(pending)
        for table, snapshot in built_here:
            if self._stopped.is_set():
                return
            with self._sharing_a_core():
                self._make_ready(table, snapshot, prepare=True, budgeted=False)

    def _build_at_start(
        self, tables: list[SharedTable], built_here: list[tuple[SharedTable, TableSnapshot]]
    ) -> None:
        cache = self.readers.snapshots
        for table in tables:
            if self._stopped.is_set() or cache.files >= cache.max_files * START_BUDGET:
                break
            before = cache.files
            with self._sharing_a_core():
                built = self._warm(table, "start", built_here)
            if built is not None and not built.streamed and before + built.num_files > cache.max_files:
                break  # it did not fit beside the others: warming more would only evict

    @contextmanager
    def _sharing_a_core(self) -> Iterator[None]:
        """Work, then wait so that the work is at most `START_SHARE` of the time."""
        started = time.monotonic()
        yield
        worked = time.monotonic() - started
        self._stopped.wait(worked * (1 / START_SHARE - 1))

    def _warm(
        self, table: SharedTable, why: str, later: list[tuple[SharedTable, TableSnapshot]] | None = None
    ) -> TableSnapshot | None:
        """Build `table`'s latest snapshot and make it ready, or leave that to `later` when given."""
        started = time.perf_counter()
        try:
            reader = self.readers.reader(table, used=False)
            # Held, as a query after the first finds it: its check and lines are made here.
            snapshot = reader.built(reader.snapshot())
        except Exception as error:  # noqa: BLE001 - the next query reports it to its recipient
            self.metrics.snapshot_warms.labels(why, "failed").inc()
            logger.debug("warming %s failed: %s", table.full_name, type(error).__name__)
            return None
        current = self._versions.get(table.id) == snapshot.version
        # A hot table the warmer had not seen: a query built this snapshot, checked its files
        # and made its lines as it went (maybe still is); doing so again here would only
        # slow that query down.
        first_sight = why == "refresh" and table.id not in self._versions
        if current:
            self.metrics.snapshot_warms.labels(why, "current").inc()  # no new commit: nothing built
        else:
            self._versions[table.id] = snapshot.version
            self.metrics.snapshot_warms.labels(why, "built").inc()
            self.metrics.snapshot_warm_seconds.observe(time.perf_counter() - started)
        if table.is_iceberg:
            # Iceberg snapshots are served through derived ones (deletes materialized for
            # parquet), checked when a query derives them: only Delta's are made ready here.
            return snapshot
        self._kept[table.id] = (table, weakref.ref(snapshot), time.monotonic())
        # A restricted snapshot is one audience's: the persisted summary is the whole table's
        # head, which a restricted reader never answers from (it builds its own).
        if not current and table.restriction is None:
            self._save_summary(table, reader, snapshot)
        if first_sight:
            return snapshot
        if later is not None:
            later.append((table, snapshot))
        elif not current or self._quiet():  # a new version is made ready at once, whatever the load
            self._make_ready(table, snapshot, prepare=not current, budgeted=True)
        return snapshot

    def _make_ready(self, table: SharedTable, snapshot: TableSnapshot, prepare: bool, budgeted: bool) -> None:
        """The check a first query of `snapshot` would make, and (`prepare`) its lines' templates."""
        reader = self.readers.reader(table, used=False)
        self._check_ahead(table, reader, snapshot, budgeted)
        if prepare:
            prepare_lines(reader, snapshot)

    def _save_summary(self, table: SharedTable, reader: TableReader, snapshot: TableSnapshot) -> None:
        """Persist what the head lines of `snapshot` say, for a restarted server's `/metadata`."""
        try:
            summary = SnapshotSummary.of(snapshot, table.bucket, table.path, reader.listing())
            if self._pending is not None:
                self._pending.append((table.id, summary))
            else:
                self.store.save_snapshot_summary(table.id, summary)
        except Exception as error:  # noqa: BLE001 - the store down: a restart replays the log, as before
            logger.debug("saving %s's summary failed: %s", table.full_name, type(error).__name__)

    def _save_summaries(self, pending: list[tuple[str, SnapshotSummary]]) -> None:
        try:
            self.store.save_snapshot_summaries(pending)
        except Exception as error:  # noqa: BLE001 - the store down: a restart replays the log, as before
            logger.debug("saving %d summaries failed: %s", len(pending), type(error).__name__)

    def _check_ahead(
        self, table: SharedTable, reader: TableReader, snapshot: TableSnapshot, budgeted: bool
    ) -> None:
        """The missing-file check of `snapshot`, unless one is trusted beyond the next rounds.

        With vectors: it covers both formats' queries. Ahead by two rounds and twice
        what the last check took, so that the new check is marked before the old expires.
        """
        if self.readers.files_check_seconds <= 0:
            return  # every query checks for itself: a check made here would be trusted by none
        ahead = 2 * (self.refresh_seconds + self._took.get(table.id, 0.0))
        if budgeted and not self._may_check():
            self.metrics.snapshot_warms.labels("check", "deferred").inc()
            return
        started = time.monotonic()
        try:
            looked = reader.check_files_exist(snapshot, with_dvs=True, ahead=ahead)
        except Exception as error:  # noqa: BLE001 - files missing: the next query checks and says so
            self.metrics.snapshot_warms.labels("check", "failed").inc()
            logger.debug("checking %s's files failed: %s", table.full_name, type(error).__name__)
            return
        finally:
            took = time.monotonic() - started
            self._checks.append((started, took))
        if looked:
            self._took[table.id] = took
            self.metrics.snapshot_warms.labels("check", "passed").inc()

    def _may_check(self) -> bool:
        """Whether the checks of the last `CHECK_WINDOW` seconds left room for another."""
        since = time.monotonic() - CHECK_WINDOW
        while self._checks and self._checks[0][0] < since:
            self._checks.popleft()
        return sum(took for _, took in self._checks) < CHECK_SHARE * CHECK_WINDOW


def tables_to_warm(tables: list[SharedTable], read: set[tuple[str, str, str]]) -> list[SharedTable]:
    """The tables recipients read (`read`: share, schema and table, lower-cased), one per storage
    location: several shares naming one path make one snapshot's worth of work at start."""
    chosen: list[SharedTable] = []
    locations: set[tuple[str, str, str]] = set()
    for table in tables:
        if (table.share.lower(), table.schema.lower(), table.name.lower()) not in read:
            continue
        location = (table.format, table.bucket, table.path.strip("/"))
        if location not in locations:
            locations.add(location)
            chosen.append(table)
    return chosen


def prepare_lines(reader: TableReader, snapshot: TableSnapshot) -> None:
    """Every file line's template, in the format a request without capabilities gets.

    That is parquet, unless parquet cannot carry the table, whose recipients then
    read delta. A client asking for the other format makes its own on first use.
    """
    try:
        actions.check_parquet_readable(snapshot)
        response_format = "parquet"
    except ShareStoreError:
        response_format = "delta"
    LineEncoder(response_format, reader, time.time()).prepare(snapshot)
