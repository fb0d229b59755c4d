"""The server keeping its tables by itself: rounds of maintenance in a thread of their own.

Every `[maintenance] interval_seconds` a round takes the store's lease (so one
replica of a deployment runs maintenance at a time, whichever replica's round
comes first; a replica that stops or dies leaves it to expire), purges the
tables dropped without purge whose retention has passed, forgets the
maintenance rows of dropped tables, and runs on each table the kinds the schedule finds due
(`schedule.due_tables`), through the same `Maintainer` as the API and the CLI,
so what a background run may do is what an asked-for run may. The lease is
renewed before each table, so that it outlives the round's longest run.

It keeps to `cpu_share` of a core by waiting, after each table, as long again
as its share requires (a quarter of a core: three times as long as it worked),
so recipients' queries keep the rest. Each table takes its turn in the process's
`RunQueue` with the runs callers ask for, and yields to them: it waits while one
waits, and passes over a table one is asked for. A round stops between two
tables when the server stops; a run under way finishes first (a compaction's
commit is one compare-and-swap, never half made).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from share_store.catalog import idempotency_keys
from share_store.catalog.maintenance import rows
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.maintenance.queue import RunQueue
from share_store.catalog.maintenance.schedule import Background, due_tables
from share_store.persistence.mappers import utc_now

log = logging.getLogger(__name__)

LEASE = "background-maintenance"
#: The lease lasts this long past its last renewal, at least: more than one run of a big table.
LEASE_SECONDS = 900.0


class BackgroundMaintenance:
    def __init__(
        self,
        maintainer: Maintainer,
        background: Background,
        clock: Callable[[], datetime] = utc_now,
        holder: str | None = None,
        queue: RunQueue | None = None,
    ) -> None:
        self.maintainer = maintainer
        #: Where runs take their turn: the one the API's asked-for runs take theirs in.
        self.queue = queue or RunQueue(maintainer.limits)
        self.transactions = maintainer.transactions
        self.background = background
        self.clock = clock
        #: Who holds the lease: this process, told apart from another replica on the same host.
        self.holder = holder or f"{socket.gethostname()[:32]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.background.enabled:
            return
        self._thread = threading.Thread(target=self._loop, name="maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            try:  # given back, so that another replica need not wait for it to expire
                with self.transactions.change() as conn:
                    rows.release_lease(conn, LEASE, self.holder)
            except Exception:  # the store gone first: the lease expires by itself
                log.warning("the maintenance lease was not given back; it expires by itself", exc_info=True)

    def _loop(self) -> None:
        while not self._stopped.wait(self.background.interval_seconds):
            try:
                self.run_round()
            except Exception:  # the store unreachable, say: the next round tries again
                log.exception("a round of background maintenance failed")

    def _lease(self) -> bool:
        seconds = max(LEASE_SECONDS, 3 * self.background.interval_seconds)
        with self.transactions.change() as conn:
            return rows.take_lease(conn, LEASE, self.holder, self.clock(), seconds)

    def run_round(self) -> list[tuple[str, tuple[str, ...]]]:
        """One round: the tables kept (as `warehouse.namespace.table`) and the kinds run on each."""
        if not self._lease():
            return []
        # Tables dropped without purge whose warehouse's retention has passed go first (the catalog's
        # own rule: `WarehouseCatalog.purge_expired`), so that the rows forgotten next include theirs.
        purged = self.maintainer.catalog.purge_expired(self.clock())
        if purged:
            log.info("maintenance purged %d dropped table(s) past their retention", len(purged))
        with self.transactions.change() as conn:
            forgotten = rows.forget_dropped(conn)
            states = rows.table_states(conn)
            # Idempotency keys past their lifetime (`/_iceberg`'s mutations) go with them.
            swept = idempotency_keys.sweep(conn, self.clock())
        if forgotten:
            log.info("maintenance forgot %d row(s) of dropped tables", forgotten)
        if swept:
            log.info("maintenance removed %d expired idempotency key(s)", swept)
        done: list[tuple[str, tuple[str, ...]]] = []
        for state, kinds in due_tables(states, self.clock(), self.background):
            if self._stopped.is_set():
                break
            with self.queue.background_turn(state.name, self._stopped) as turn:
                if not turn:
                    continue  # asked for meanwhile (that run keeps it), or the server stops
                if not self._lease():
                    break
                started = time.monotonic()
                try:
                    ran = self.maintainer.run(state.name, kinds)
                except Exception:  # dropped meanwhile, say: the other tables are still kept
                    log.warning("background maintenance of %s.%s skipped", state.name.warehouse, state.name,
                                exc_info=True)  # fmt: skip
                    continue
                worked = time.monotonic() - started
            done.append((f"{state.name.warehouse}.{state.name}", tuple(ran)))
            # Paused after its turn is given back: asked-for runs need not wait out the pause.
            self._stopped.wait(self.background.pause_after(worked))
        return done
