"""The Health page: whether the store, storage and each catalog answer, and how fast."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from share_store.errors import ShareStoreError
from share_store.readers.table_readers import TableReaders
from share_store.storage import LocalStorage
from share_store.storage.base import ObjectStorage
from sharing_server import __version__
from sharing_server.console.web import Call, Page

# Buckets probed at most: one listing each.
MAX_BUCKETS = 10


@dataclass(frozen=True)
class Probe:
    name: str
    kind: str
    ok: bool
    milliseconds: float
    detail: str


def probe(name: str, kind: str, check: Callable[[], Any]) -> Probe:
    """Run `check`, timing it; an error is reported by kind only (messages may hold credentials)."""
    started = time.perf_counter()
    try:
        check()
        ok, detail = True, "reachable"
    except ShareStoreError as error:
        ok, detail = False, error.message
    except Exception as error:  # noqa: BLE001 - any failure is the answer here
        ok, detail = False, f"unreachable ({type(error).__name__})"
    return Probe(name, kind, ok, round((time.perf_counter() - started) * 1000, 1), detail)


def _with_last_error(found: Probe, last: tuple[float, str] | None) -> Probe:
    """The probe, with why the catalog last failed to load for a recipient, if it did since it last loaded."""
    if last is None:
        return found
    when = datetime.fromtimestamp(last[0], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Probe(
        found.name, found.kind, found.ok, found.milliseconds, f"{found.detail}; last error {when}: {last[1]}"
    )


def _first_object(storage: ObjectStorage, bucket: str, prefix: str) -> None:
    next(iter(storage.list(bucket, prefix)), None)


def _namespaces(readers: TableReaders, catalog: str) -> None:
    readers.catalogs.catalog(catalog).list_namespaces()


def _storage_probes(readers: TableReaders, tables: list[tuple[str, str]]) -> list[Probe]:
    storage = readers.storage
    kind = "local" if isinstance(storage, LocalStorage) else "s3"
    buckets: dict[str, str] = {}
    for bucket, path in tables:
        buckets.setdefault(bucket, path)
    probes = []
    for bucket, path in list(buckets.items())[:MAX_BUCKETS]:
        prefix = f"{path.rstrip('/')}/_delta_log/"
        probes.append(probe(bucket, kind, partial(_first_object, storage, bucket, prefix)))
    if not probes:
        probes.append(probe("(no Delta table shared)", kind, lambda: None))
    return probes


def health_page(call: Call) -> Page:
    readers = call.console.readers
    admin = call.admin
    store_kind = ""

    def ping_store() -> None:
        nonlocal store_kind
        store_kind = admin.store.ping()

    store = probe("share store", "store", ping_store)
    delta_tables = [(table.bucket, table.path) for table in admin.store.all_tables() if not table.is_iceberg]
    storage = _storage_probes(readers, delta_tables)
    catalogs = [
        _with_last_error(
            probe(
                name,
                str(props.get("sharing.backend") or props.get("type", "rest")),
                partial(_namespaces, readers, name),
            ),
            readers.catalogs.last_errors.get(name),
        )
        for name, props in readers.catalogs.configs.items()
    ]
    until = datetime.now(UTC)
    last_hour = admin.activity("share", until - timedelta(hours=1), until)
    context = {
        "store": store,
        "store_kind": store_kind or "unknown",
        "storage": storage,
        "catalogs": catalogs,
        "version": __version__,
        "uptime": timedelta(seconds=int(time.monotonic() - call.console.started)),
        "requests": sum(row.requests for row in last_hour),
        "errors": sum(row.errors for row in last_hour),
        "bytes": sum(row.bytes for row in last_hour),
        "active": "health",
    }
    return Page("health.html", context)
