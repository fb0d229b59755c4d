"""The active files of a snapshot: held in memory, or streamed from a large checkpoint.

A table of a million files has a checkpoint of a million `add` rows, and
holding them as dictionaries costs well over a gigabyte. So when its
checkpoint is large (`replay.STREAM_THRESHOLD_BYTES`) a snapshot keeps only what
changed after the checkpoint, and reads the checkpoint again, one record batch at a time,
each time its files are listed: a response of a million files streams in
bounded memory. Smaller snapshots keep their files in memory, where repeated
queries are fastest.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

Action = dict[str, Any]
Identity = tuple[str, str]

BATCH_ROWS = 8_192
#: Rows of a record batch when listing files: each batch's lines are made at once
#: (see `sharing_server.delta_sharing.streamed_lines`), in memory about 1 KB a row all told.
#: Smaller than `BATCH_ROWS`: a million-file listing in 8,192-row batches took 40 MB more.
LISTING_BATCH_ROWS = 2_048


class FileSet:
    """The `add` actions of a snapshot, in memory; iterable any number of times."""

    def __init__(self, adds: Iterable[Action]) -> None:
        self._adds = list(adds)
        self.count = len(self._adds)
        self.total_size = sum(int(add.get("size") or 0) for add in self._adds)
        self.has_deletion_vectors = any(add.get("deletionVector") for add in self._adds)

    #: How many files a snapshot cache should charge for holding this set.
    @property
    def resident_files(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Action]:
        return iter(self._adds)

    def __len__(self) -> int:
        return self.count


class UnheldFileSet(FileSet):
    """Files not held in memory but made again each time they are listed (a streamed snapshot's).

    Too many to look each one up or to keep lines for: the held snapshot of the
    same version, when one is built behind its first reader, does that.
    """

    def __init__(self) -> None:
        #: Set once a listing of the files has ended (finished, or left by its reader).
        self.listed = threading.Event()


class StreamedFileSet(UnheldFileSet):
    """A checkpoint's `add` rows, less the files changed after it, plus those changes' adds.

    `parts` are the checkpoint's Parquet files on local disk (temporary copies
    for remote storage, deleted with this object); `tail` holds the adds of the
    commits after the checkpoint and `removed` the identities they removed.

    Files come in the order a held replay keeps them (a dictionary by identity
    filled from the checkpoint, then each commit): the checkpoint's rows, a file
    added again after it without being removed in its checkpoint place, then the
    tail's new files. The two must agree: a paged answer may be read part from
    this set, part from the held snapshot built from the same version later.
    """

    def __init__(
        self,
        parts: list[Path],
        temporary: bool,
        tail: dict[Identity, Action],
        removed: set[Identity],
        normalize: Any,
        identity: Any,
    ) -> None:
        self._parts = parts
        self._tail = tail
        self._removed = removed
        self._normalize = normalize
        self._identity = identity
        super().__init__()
        if temporary:
            weakref.finalize(self, _delete, list(parts))
        #: Tail files that replace a checkpoint row of the same identity in its place
        #: (added again, never removed): found by `_totals`, listed where the row was.
        self._in_place: set[Identity] = set()
        self.count, self.total_size, self.has_deletion_vectors = self._totals()

    @property
    def resident_files(self) -> int:
        return len(self._tail) + len(self._removed)

    def _superseded(self, identity: Identity) -> bool:
        return identity in self._removed or identity in self._tail

    def _suspects(self, paths: pa.Array) -> list[bool] | None:
        """Per row, whether its path was changed after the checkpoint (None: no row was).

        Vectorized, so the exact check by identity runs only on the few rows it names.
        """
        if self._superseded_paths is None:
            return None
        hits = pc.is_in(paths, value_set=self._superseded_paths)
        if not pc.any(hits).as_py():
            return None
        return hits.to_pylist()

    @cached_property
    def _superseded_paths(self) -> pa.Array | None:
        paths = {path for path, _ in self._removed} | {path for path, _ in self._tail}
        return pa.array(sorted(paths), pa.string()) if paths else None

    def _totals(self) -> tuple[int, int, bool]:
        """Count, bytes and deletion vectors, computed on columns without making rows."""
        count = len(self._tail)
        size = sum(int(add.get("size") or 0) for add in self._tail.values())
        dvs = any(add.get("deletionVector") for add in self._tail.values())
        for part in self._parts:
            parquet = pq.ParquetFile(part)
            names = set(_add_fields(parquet))
            columns = [f"add.{name}" for name in ("path", "size", "deletionVector") if name in names]
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                adds = batch.column("add")
                fields = dict(zip([f.name for f in adds.type], adds.flatten(), strict=True))
                count += len(adds) - adds.null_count
                size += pc.sum(fields["size"]).as_py() or 0
                if "deletionVector" in fields:
                    dvs = dvs or fields["deletionVector"].null_count < len(adds)
                suspects = self._suspects(fields["path"])
                if suspects is None:
                    continue
                # Only the suspect rows become dictionaries: a whole batch's would cost more than
                # the rest of the totals (a commit after the checkpoint names files of any batch).
                rows = adds.take(pa.array([index for index, suspect in enumerate(suspects) if suspect]))
                for add in rows.to_pylist():
                    if add is None:
                        continue
                    identity = self._identity(add)
                    if self._superseded(identity):  # counted with the tail, or removed
                        count -= 1
                        size -= int(add.get("size") or 0)
                    if identity in self._tail and identity not in self._removed:
                        self._in_place.add(identity)
        return count, size, dvs

    def batches(self) -> Iterator[tuple[pa.StructArray, list[bool] | None]]:
        """The checkpoint's `add` column a record batch at a time, with its suspects (see `_suspects`).

        Rows include the batch's other actions (null) and files superseded
        later: `rows` and `kept` leave them out.
        """
        try:
            for part in self._parts:
                parquet = pq.ParquetFile(part)
                for batch in parquet.iter_batches(batch_size=LISTING_BATCH_ROWS, columns=["add"]):
                    adds = batch.column("add")
                    yield adds, self._suspects(adds.field("path"))
        finally:
            self.listed.set()

    def rows(self, adds: pa.StructArray, suspects: list[bool] | None) -> Iterator[Action]:
        """One batch's active files as actions (dictionaries)."""
        for index, row in struct_rows(adds):
            add = self._normalize(row)
            if suspects is not None and suspects[index]:
                identity = self._identity(add)
                if identity in self._in_place:
                    yield self._tail[identity]
                    continue
                if self._superseded(identity):
                    continue
            yield add

    def kept(self, adds: pa.StructArray, suspects: list[bool] | None) -> pa.StructArray | None:
        """One batch's active files as rows, for a batch without deletion vectors; None when
        a file of it was added again after the checkpoint (its row is not what is listed:
        `rows` lists the batch).

        Without vectors a file's identity is its path alone, which the rows give
        without making an action of each.
        """
        if suspects is None and adds.null_count == 0:
            return adds  # the rule: every row an active file, nothing to copy
        keep = adds.is_valid()
        if suspects is not None:
            paths = adds.field("path").to_pylist()
            if self._in_place and any(
                s and (path, "") in self._in_place for s, path in zip(suspects, paths, strict=True)
            ):
                return None
            gone = [s and self._superseded((path, "")) for s, path in zip(suspects, paths, strict=True)]
            keep = pc.and_(keep, pc.invert(pa.array(gone, pa.bool_())))
        return adds.filter(keep)

    @property
    def tail(self) -> Iterable[Action]:
        """The files added after the checkpoint, but those listed in their checkpoint place."""
        if not self._in_place:
            return self._tail.values()
        return [add for identity, add in self._tail.items() if identity not in self._in_place]

    def __iter__(self) -> Iterator[Action]:
        for adds, suspects in self.batches():
            yield from self.rows(adds, suspects)
        yield from self.tail


def struct_rows(column: pa.StructArray) -> Iterator[tuple[int, dict[str, Any]]]:
    """The non-null rows of a struct column, with their indexes, as dictionaries.

    Built a column at a time (see `values_of`): for checkpoint `add` rows this is
    several times faster than `to_pylist()`, which dominates a cold replay.
    Fields that are null in every row are left out of every dictionary.
    """
    names = [field.name for field in column.type]
    columns = [
        (name, values_of(field))
        for name, field in zip(names, column.flatten(), strict=True)
        if field.null_count < len(field)
    ]
    for index, valid in enumerate(column.is_valid().to_pylist()):
        if valid:
            yield index, {name: values[index] for name, values in columns}


def values_of(column: pa.Array) -> list[Any]:
    """A column as Python values, maps as dicts: several times faster than `to_pylist()`.

    Flat columns go through NumPy (strings keep None for null; numbers and
    booleans only when they have no nulls, which NumPy would turn into NaN);
    maps are built from their offsets, where `to_pylist()` is ten times slower.
    """
    if isinstance(column, pa.MapArray):
        return map_values(column)
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return column.to_numpy(zero_copy_only=False).tolist()
    if column.null_count == 0 and (pa.types.is_integer(kind) or pa.types.is_boolean(kind)):
        return column.to_numpy(zero_copy_only=False).tolist()
    return column.to_pylist()


def map_values(column: pa.MapArray) -> list[dict[Any, Any] | None]:
    offsets = values_of(column.offsets)
    keys, items = values_of(column.keys), values_of(column.items)
    valid = column.is_valid().to_pylist()
    return [
        dict(zip(keys[offsets[i] : offsets[i + 1]], items[offsets[i] : offsets[i + 1]], strict=True))
        if valid[i]
        else None
        for i in range(len(column))
    ]


def _add_fields(parquet: pq.ParquetFile) -> list[str]:
    schema = parquet.schema_arrow
    if "add" not in schema.names:
        return []
    return [field.name for field in schema.field("add").type]


def _delete(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
