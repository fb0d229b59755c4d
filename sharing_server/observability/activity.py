"""Recipients' requests copied from the audit record into the store, for the console's Activity page.

`Observe` hands each finished request's audit record to `ActivityRecorder.offer`,
which keeps only recipients' requests (under the protocol prefix and the
Iceberg REST catalog's) and queues them; a
background thread writes the queue in batches (one transaction a second at
most, never on the request's path) and prunes the table now and then, so it
stays within `[console] activity_retention_hours` and `activity_max_events`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from share_store.persistence import ShareStore
from share_store.persistence.activity import ActivityEvent
from share_store.persistence.admin_events import AdminEvent

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 1.0
PRUNE_SECONDS = 600.0
# Past this many waiting events (a store that is down), new ones are dropped, not held.
MAX_QUEUED = 10_000
SKIPPED_ROUTES = frozenset({"serve_file"})


def _text(value: Any, limit: int) -> str | None:
    return None if value is None else str(value)[:limit]


def event_of(record: dict[str, Any]) -> ActivityEvent:
    """The stored form of one audit record."""
    version = record.get("version")
    return ActivityEvent(
        time=datetime.fromisoformat(record["time"]),
        route=str(record.get("route", "unmatched"))[:64],
        status=int(record["status"]),
        token_id=_text(record.get("token_id"), 32),
        share_name=_text(record.get("share"), 128),
        schema_name=_text(record.get("schema"), 128),
        table_name=_text(record.get("table"), 128),
        error_code=_text(record.get("error_code"), 64),
        version=version if isinstance(version, int) else None,
        files=int(record.get("files") or 0),
        # What the recipient was handed: the data files' bytes, else the response's own.
        bytes=int(record.get("file_bytes") or record.get("bytes") or 0),
        duration_ms=float(record.get("duration_ms") or 0.0),
    )


#: The providers' side: the admin API and the console.
ADMIN_PREFIXES = ("/admin/", "/console/")
READS = frozenset({"GET", "HEAD"})


def admin_event_of(path: str, record: dict[str, Any]) -> AdminEvent | None:
    """A provider's change (anything but a read, under the admin API or the console) or a refused
    admin token, as kept for the console; None for anything else."""
    if not path.startswith(ADMIN_PREFIXES):
        return None
    refused = record.get("sign_in") in ("failed", "throttled")
    method = str(record.get("method", "GET"))
    if method in READS and not refused:
        return None
    return AdminEvent(
        time=datetime.fromisoformat(record["time"]),
        client=str(record.get("client") or "")[:64],
        method=method[:8],
        path=path[:512],
        status=int(record["status"]),
        sign_in=record.get("sign_in") if refused else None,
        detail=_text(record.get("change"), 16384),
    )


class ActivityRecorder:
    """Queues recipients' requests and writes them to the store from a thread of its own."""

    def __init__(
        self, store: ShareStore, prefixes: tuple[str, ...], retention: timedelta, max_events: int
    ) -> None:
        self.store = store
        self.prefixes = tuple(prefix.rstrip("/") + "/" for prefix in prefixes)
        self.retention = retention
        self.max_events = max_events
        self.enabled = retention > timedelta(0) and max_events > 0
        self._queue: queue.Queue[ActivityEvent | AdminEvent] = queue.Queue(MAX_QUEUED)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._pruned = 0.0

    def offer(self, path: str, record: dict[str, Any]) -> None:
        """Queue `record` if it is a recipient's request under one of the recipients' prefixes, or a
        provider's change or refused admin token (`admin_event_of`).

        Local storage's file downloads are left out: they carry no token (a
        signed URL is enough), and the query that handed them out counted them.
        """
        if not self.enabled:
            return
        admin = admin_event_of(path, record)
        if admin is None and (not path.startswith(self.prefixes) or record.get("route") in SKIPPED_ROUTES):
            return
        try:
            self._queue.put_nowait(admin or event_of(record))
        except queue.Full:
            return
        except (KeyError, ValueError, TypeError):
            logger.warning("an audit record could not be kept as activity")
            return
        if self._thread is None:
            with self._lock:
                if self._thread is None and not self._stopped.is_set():
                    self._thread = threading.Thread(target=self._run, name="activity", daemon=True)
                    self._thread.start()

    def warm(self) -> None:
        """Make the settled days' summaries the console's week and month views read (`activity_days`),
        so the first view after a start reads only its partial days."""
        if not self.enabled:
            return
        now = datetime.now(UTC)
        try:
            self.store.activity_summaries(now - self.retention, now)
        except Exception as error:  # noqa: BLE001 - the first view makes them instead
            logger.warning("activity summaries not prepared: %s", type(error).__name__)

    def flush(self) -> None:
        """Write what is queued now (the thread calls this; tests may too)."""
        events: list[ActivityEvent] = []
        changes: list[AdminEvent] = []
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, AdminEvent):
                changes.append(event)
            else:
                events.append(event)
        if events:
            self.store.record_activity(events)
        if changes:
            self.store.record_admin_events(changes)
        if time.monotonic() - self._pruned > PRUNE_SECONDS:
            self._pruned = time.monotonic()
            self.store.prune_activity(datetime.now(UTC) - self.retention, self.max_events)

    def close(self) -> None:
        """Stop the thread once it has written what is queued (the app's shutdown calls this)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            stopping = self._stopped.wait(FLUSH_SECONDS)
            try:
                self.flush()
            except Exception as error:  # noqa: BLE001 - a store outage must not end the thread
                # The type only: database messages may carry credentials.
                logger.warning("activity not recorded: %s", type(error).__name__)
            if stopping:
                return
