"""Snapshots made before a recipient asks: the shared tables at start, and hot tables' new commits.

Without it, the first query of a table after a start waits for the whole log
replay (0.6 to 0.9 s for 100,000 files), and the first query after each commit
waits for the commit to be applied. A thread of its own:

- at start, builds the latest snapshot of every shared table while the
  snapshot cache has room for them (it stops at 80% of the cache's bound, so
  it does not evict the tables recipients read to warm ones nobody asked for);
- then, every `[cache] refresh_seconds`, brings the tables recipients read in
  the last minute (the 16 most recent, while the cache still holds one of their
  snapshots) up to their latest version, so a new
  commit is applied (incrementally, from the held snapshot) before the next
  query comes. Each round costs a tail listing of each such table's log.

It only ever calls what a query would (`reader.snapshot()`), so what it builds
is exactly what a query would have built; a failure is counted and left for
the next query to report to its recipient.
"""

from __future__ import annotations

import logging
import threading
import time

from share_store.delta.snapshot import DeltaSnapshot
from share_store.model import SharedTable
from share_store.persistence import ShareStore
from share_store.readers import TableReaders
from sharing_server.metrics import Metrics

logger = logging.getLogger(__name__)

#: Tables read within this many seconds count as hot; at most this many are refreshed a round.
HOT_SECONDS = 60.0
HOT_TABLES = 16
#: Warming at start stops once the snapshot cache is this full.
START_BUDGET = 0.8


class SnapshotWarmer:
    def __init__(
        self,
        store: ShareStore,
        readers: TableReaders,
        metrics: Metrics,
        warm_on_start: bool = True,
        refresh_seconds: float = 1.0,
    ) -> None:
        self.store = store
        self.readers = readers
        self.metrics = metrics
        self.warm_on_start = warm_on_start
        self.refresh_seconds = refresh_seconds
        self._stopped = threading.Event()
        #: The version each table was last brought to (only the warmer's thread touches it).
        self._versions: dict[str, int] = {}
        self._thread: threading.Thread | None = None

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
        for table in reversed(self.readers.recently_used(HOT_SECONDS)[:HOT_TABLES]):
            if self._stopped.is_set():
                return
            if self.readers.reader(table, used=False).holds_snapshot:
                self._warm(table, "refresh")

    def warm_shared_tables(self) -> None:
        cache = self.readers.snapshots
        try:
            tables = self.store.all_tables()
        except Exception as error:  # noqa: BLE001 - the store down at start: queries will say so
            logger.warning("snapshot warming skipped: the store could not be read (%s)", type(error).__name__)
            return
        for table in tables:
            if self._stopped.is_set() or cache.files >= cache.max_files * START_BUDGET:
                return
            before = cache.files
            built = self._warm(table, "start")
            if built is not None and not built.streamed and before + built.num_files > cache.max_files:
                return  # it did not fit beside the others: warming more would only evict

    def _warm(self, table: SharedTable, why: str) -> DeltaSnapshot | None:
        started = time.perf_counter()
        try:
            snapshot = self.readers.reader(table, used=False).snapshot()
        except Exception as error:  # noqa: BLE001 - the next query reports it to its recipient
            self.metrics.snapshot_warms.labels(why, "failed").inc()
            logger.debug("warming %s failed: %s", table.full_name, type(error).__name__)
            return None
        if self._versions.get(table.id) == snapshot.version:
            self.metrics.snapshot_warms.labels(why, "current").inc()  # no new commit: nothing built
            return snapshot
        self._versions[table.id] = snapshot.version
        self.metrics.snapshot_warms.labels(why, "built").inc()
        self.metrics.snapshot_warm_seconds.observe(time.perf_counter() - started)
        return snapshot
