"""Unreferenced file removal (S3 Tables' `icebergUnreferencedFileRemoval`) for one own-warehouse table.

A file under the table's folder that nothing live reaches (no metadata file of
its log, no statistics file, no manifest list, manifest, data or delete file of
any snapshot) and that is older than `unreferenced_days` is marked noncurrent;
it is deleted `non_current_days` after it was marked, unless it became live (or
was written again) in between, which unmarks it. Marks are kept in the store
(`maintenance_noncurrent`), so one run's marks are the next run's clock.

What is live is read strictly: a manifest list or manifest of a snapshot that
cannot be read (gone, outside the table, corrupt) makes the run raise
`UnreadableTable` before anything is marked or deleted, since then any file
could be live. Only keys inside the table's folder (`prefix + "/"`, so never a
sibling folder that extends the prefix) are listed, marked and deleted. A
writer committing during the run is caught before anything is deleted: the
table's pointer is read again and the files its new metadata reaches are kept
too. The window left (between that read and the delete) is only a danger to a
commit that names a file old enough to have been marked long ago, which
engines do not do for new writes; files younger than `unreferenced_days` (writes
in flight) are never touched.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pyiceberg.table.metadata import TableMetadata
from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from share_store.catalog import table_pointers
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance.configuration import UnreferencedFileRemoval
from share_store.catalog.names import TableName
from share_store.catalog.purge import reachable_files
from share_store.catalog.table_pointers import TablePointer
from share_store.errors import UnsupportedOperation
from share_store.persistence.mappers import utc
from share_store.persistence.sql_schema import maintenance_noncurrent_table, warehouse_tables_table
from share_store.storage.base import ObjectInfo, ObjectStorage
from share_store.storage.file_uris import file_location
from share_store.storage.table_location import OutsideTable, TableLocation

DAY = timedelta(days=1)
#: Keys per statement: well under SQLite's 999 bound parameters.
CHUNK = 500
#: The longest key a mark can hold (`maintenance_noncurrent.key`); a longer one is never marked.
MAX_KEY = 1024
#: How often the table may change under a run before the run deletes nothing this round.
SETTLE_ATTEMPTS = 3


class Listed(Protocol):  # an object as storage lists it (`ObjectInfo`)
    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def modified_ms(self) -> int: ...


@dataclass(frozen=True)
class Decision:
    #: Keys marked noncurrent as of now (a key marked before and written since is marked anew).
    mark: list[str] = field(default_factory=list)
    #: Keys whose marks go: live again, young again, or no longer listed.
    unmark: list[str] = field(default_factory=list)
    #: Keys whose marks are due: deleted (their marks go once they are).
    delete: list[str] = field(default_factory=list)
    bytes_deleted: int = 0


@dataclass(frozen=True)
class Removal:
    """What one run did to a table."""

    marked: int = 0
    unmarked: int = 0
    deleted: int = 0
    bytes_deleted: int = 0


def decide(
    objects: Iterable[Listed],
    live: set[str],
    marks: dict[str, datetime],
    settings: UnreferencedFileRemoval,
    now: datetime,
) -> Decision:
    """What to mark, unmark and delete among the listed `objects`, given the `live` keys and the
    `marks` (key → when marked). Pure: the caller lists, reads and writes."""
    if not settings.enabled:
        return Decision()
    old_before = now - settings.unreferenced_days * DAY
    due_before = now - settings.non_current_days * DAY
    mark: list[str] = []
    unmark: list[str] = []
    doomed: list[str] = []
    size = 0
    listed: set[str] = set()
    for info in objects:
        if info.key in listed:
            continue
        listed.add(info.key)
        modified = datetime.fromtimestamp(info.modified_ms / 1000, UTC)
        since = marks.get(info.key)
        if info.key in live or modified > old_before:
            # Live, or too young to tell from a write in flight: never marked, and a mark goes.
            if since is not None:
                unmark.append(info.key)
        elif since is None or modified > since:
            # Written again after its mark (same key, new content): its period starts anew.
            mark.append(info.key)
        elif since <= due_before:
            doomed.append(info.key)
            size += info.size
    # A marked key no longer listed is gone (deleted by someone else, or by a run that failed after).
    unmark.extend(key for key in marks if key not in listed)
    return Decision(sorted(mark), sorted(unmark), sorted(doomed), size)


def live_keys(
    storage: ObjectStorage, location: TableLocation, metadata_location: str, metadata: TableMetadata
) -> set[str]:
    """The keys of every file the metadata reaches (`purge.reachable_files`), read strictly: unlike a
    purge, which skips what it cannot read, a manifest list or manifest that cannot be read raises
    `UnreadableTable`, since a removal that skipped it would delete what it names."""
    # Imported here: see `purge.purge`.
    from share_store.catalog.file_io import ConfinedFileIO

    io = ConfinedFileIO(storage, location)
    paths = reachable_files(metadata_location, metadata, io, strict=True)
    return {key for path in paths for key in _keys(storage, location, path)}


def _keys(storage: ObjectStorage, location: TableLocation, path: str) -> set[str]:
    """The keys in the table's bucket that `path` may name. Besides the key `confine` gives, the
    key as storage decodes it and as written (undecoded), each also normalised: an engine reading
    the file straight from storage may open any of them, and keeping a file too long costs little."""
    keys: set[str] = set()
    try:
        keys.add(location.confine(storage, path)[1])
    except OutsideTable:
        pass
    if not isinstance(path, str):
        return keys
    for spelling in {path, path.replace("%", "%25")}:  # `file_location` decodes: `%25` keeps `%`
        try:
            bucket, key = file_location(storage, spelling)
        except UnsupportedOperation:
            continue
        if bucket == location.bucket:
            keys.update((key, posixpath.normpath(key)))
    return keys


def remove_unreferenced(
    catalog: WarehouseCatalog, table: TableName, settings: UnreferencedFileRemoval, now: datetime
) -> Removal:
    """One run of unreferenced file removal on `table` as of `now` (timezone-aware)."""
    if not settings.enabled:
        return Removal()
    if now.tzinfo is None:
        raise ValueError("`now` must be timezone-aware")
    with catalog.transactions.read() as conn:
        pointer = table_pointers.table_pointer(conn, table.warehouse, table.namespace, table.name)
    location = catalog.locations.of(pointer)
    storage = catalog.table_storage(location)  # bounded to the table by the store, where it has STS
    # Strict first: an unreadable manifest raises here, before anything is marked or deleted.
    metadata = catalog.files.read(pointer.metadata_location)
    live = live_keys(storage, location, pointer.metadata_location, metadata)
    folder = location.folder
    with catalog.transactions.read() as conn:
        nested = _nested_folders(conn, pointer, folder)
        marks = _marks(conn, pointer.id)
    objects = [info for info in _listing(storage, location.bucket, folder)
               if _ours(location, info.key) and not info.key.startswith(nested)]  # fmt: skip
    decision = decide(objects, live, marks, settings, now)
    if decision.delete:
        settled = _settled_live(catalog, pointer, location, live)
        if settled is None:  # the table kept changing, moved or went: mark now, delete another round
            decision = replace(decision, delete=[], bytes_deleted=0)
        else:  # decided again: a file a commit since then names is kept, and unmarked
            live = settled
            decision = decide(objects, live, marks, settings, now)
    with catalog.transactions.change() as conn:
        _write_marks(conn, pointer.id, decision, now)
    # Checked again where it matters: a key deleted is one of the table's own, and not live.
    doomed = [key for key in decision.delete
              if key.startswith(folder) and _ours(location, key) and key not in live]  # fmt: skip
    if doomed:
        storage.delete(location.bucket, doomed)
        with catalog.transactions.change() as conn:
            _drop_marks(conn, pointer.id, doomed)
    return Removal(len(decision.mark), len(decision.unmark), len(doomed), decision.bytes_deleted)


def _ours(location: TableLocation, key: str) -> bool:
    """A key inside the table's folder that a mark can hold (`holds` refuses folder markers and
    keys with empty or dot segments, which a store could take for another object)."""
    return len(key) <= MAX_KEY and location.holds(location.bucket, key)


def _listing(storage: ObjectStorage, bucket: str, folder: str) -> Iterator[ObjectInfo]:
    """Every object under `folder` (ending in '/'): storages list one folder level at a time."""
    pending = [folder]
    while pending:
        current = pending.pop()
        yield from storage.list(bucket, current)
        below = storage.folders(bucket, current)
        pending.extend(sub for sub in below if sub.startswith(current) and sub != current)


def _nested_folders(conn: Connection, pointer: TablePointer, folder: str) -> tuple[str, ...]:
    """Folders of other tables or views inside this table's. The catalog lets no two locations
    overlap when it records them; this keeps their files safe should one ever have been let in."""
    t = warehouse_tables_table
    inside = t.c.location.startswith(folder, autoescape=True)
    query = select(t.c.location).where(t.c.warehouse == pointer.warehouse, t.c.id != pointer.id, inside)
    return tuple(f"{location}/" for location in conn.execute(query).scalars())


def _settled_live(
    catalog: WarehouseCatalog, pointer: TablePointer, location: TableLocation, live: set[str]
) -> set[str] | None:
    """`live`, grown by what every commit since `pointer` was read reaches, once the pointer is seen
    unchanged; None if the table went or moved, or keeps changing. Files the old metadata reached are
    kept too: a reader may still be on it."""
    seen = pointer.metadata_location
    t = warehouse_tables_table
    for _ in range(SETTLE_ATTEMPTS):
        with catalog.transactions.read() as conn:
            query = select(t.c.metadata_location, t.c.location).where(t.c.id == pointer.id)
            row = conn.execute(query).first()
        if row is None or row.location != location.prefix:
            return None
        if row.metadata_location == seen:
            return live
        seen = row.metadata_location
        live = live | live_keys(catalog.storage, location, seen, catalog.files.read(seen))
    return None


def _marks(conn: Connection, table_id: str) -> dict[str, datetime]:
    m = maintenance_noncurrent_table
    found = conn.execute(select(m.c.key, m.c.since).where(m.c.table_id == table_id))
    return {key: utc(since) for key, since in found}


def _write_marks(conn: Connection, table_id: str, decision: Decision, now: datetime) -> None:
    """Unmark, and (re)mark as of `now`: a re-marked key's old row goes first."""
    _drop_marks(conn, table_id, [*decision.unmark, *decision.mark])
    m = maintenance_noncurrent_table
    values: list[dict[str, Any]] = [{"table_id": table_id, "key": key, "since": now} for key in decision.mark]
    for start in range(0, len(values), CHUNK):
        conn.execute(insert(m), values[start : start + CHUNK])


def _drop_marks(conn: Connection, table_id: str, keys: list[str]) -> None:
    m = maintenance_noncurrent_table
    for start in range(0, len(keys), CHUNK):
        conn.execute(delete(m).where(m.c.table_id == table_id, m.c.key.in_(keys[start : start + CHUNK])))
