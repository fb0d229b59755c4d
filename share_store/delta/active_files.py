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

import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

Action = dict[str, Any]
Identity = tuple[str, str]

BATCH_ROWS = 8_192


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


class StreamedFileSet(FileSet):
    """A checkpoint's `add` rows, less the files changed after it, plus those changes' adds.

    `parts` are the checkpoint's Parquet files on local disk (temporary copies
    for remote storage, deleted with this object); `tail` holds the adds of the
    commits after the checkpoint and `removed` the identities they removed.
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
        if temporary:
            weakref.finalize(self, _delete, list(parts))
        self.count, self.total_size, self.has_deletion_vectors = self._totals()

    @property
    def resident_files(self) -> int:
        return len(self._tail) + len(self._removed)

    def _superseded(self, identity: Identity) -> bool:
        return identity in self._removed or identity in self._tail

    def _totals(self) -> tuple[int, int, bool]:
        """Count, bytes and deletion vectors in one pass over the few columns they need."""
        count = len(self._tail)
        size = sum(int(add.get("size") or 0) for add in self._tail.values())
        dvs = any(add.get("deletionVector") for add in self._tail.values())
        for part in self._parts:
            parquet = pq.ParquetFile(part)
            names = set(_add_fields(parquet))
            columns = [f"add.{name}" for name in ("path", "size", "deletionVector") if name in names]
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                for add in batch.column("add").to_pylist():
                    if add is None:
                        continue
                    if (self._removed or self._tail) and self._superseded(self._identity(add)):
                        continue
                    count += 1
                    size += int(add.get("size") or 0)
                    dvs = dvs or bool(add.get("deletionVector"))
        return count, size, dvs

    def __iter__(self) -> Iterator[Action]:
        for part in self._parts:
            parquet = pq.ParquetFile(part)
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=["add"]):
                for row in batch.column("add").to_pylist():
                    if row is None:
                        continue
                    add = self._normalize(row)
                    if self._superseded(self._identity(add)):
                        continue
                    yield add
        yield from self._tail.values()


def _add_fields(parquet: pq.ParquetFile) -> list[str]:
    schema = parquet.schema_arrow
    if "add" not in schema.names:
        return []
    return [field.name for field in schema.field("add").type]


def _delete(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)
