"""Iceberg equality deletes resolved to row positions, so that they are served as deletion vectors.

An equality delete file holds values of some columns (its `equality_ids`). A row of a
data file the delete applies to (`equality.index`) is deleted when its values equal all
of them for any row of the file, null equal to null (Iceberg spec, "Equality Delete
Files").

Delta readers only know deletion vectors, so each data file a delete applies to is
read (`equality.files`): only its equality columns (projected by field id), one record
batch at a time, matched against the deleted keys with Arrow's hash kernels
(`equality.keys`). Memory is the key set plus one batch. This is the expensive part of
serving a snapshot, so `EqualityResolver` runs against a `Deadline`
(`equality.deadline`): past it, the snapshot is refused with the reason, never served
with rows that should be gone. I/O goes through callables (`read(path) -> bytes` for the
delete files, `open(path) -> file` for the data files), so all of it is tested on bytes alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, BinaryIO

import pyarrow as pa
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.types import NestedField

from share_store.errors import UnsupportedOperation
from share_store.iceberg.deletes import CorruptDeleteFile, file_name
from share_store.iceberg.equality.deadline import Deadline, OverBudget
from share_store.iceberg.equality.files import matching_positions, read_keys
from share_store.iceberg.equality.index import EqualityDelete, EqualityIndex
from share_store.iceberg.equality.keys import KeyMatcher
from share_store.tables.options import Resolution

Read = Callable[[str], bytes]
Open = Callable[[str], BinaryIO]


class EqualityResolver:
    """Resolves the equality deletes of one snapshot, data file by data file, within a deadline."""

    def __init__(
        self,
        index: EqualityIndex,
        sequence_numbers: dict[str, int],
        read: Read,
        open_file: Open,
        deadline: Deadline,
    ) -> None:
        self.index = index
        self.sequence_numbers = sequence_numbers
        self.read = read
        self.open_file = open_file
        self.deadline = deadline
        self.resolution = Resolution()
        self._keys: dict[str, list[pa.Array]] = {}
        self._matchers: dict[tuple[tuple[int, ...], tuple[str, ...]], KeyMatcher] = {}

    def applies(self, data_file: DataFile) -> bool:
        """Whether any of the snapshot's equality deletes may delete rows of `data_file`."""
        sequence_number = self.sequence_numbers.get(data_file.file_path)
        return bool(self.index) and (
            sequence_number is None or bool(self.index.for_data_file(data_file, sequence_number))
        )

    def positions(self, data_file: DataFile) -> list[int]:
        """The positions of `data_file`'s rows that its equality deletes delete (maybe none)."""
        if not self.index:
            return []
        sequence_number = self.sequence_numbers.get(data_file.file_path)
        if sequence_number is None:  # planning records every data file's: never guess
            raise UnsupportedOperation(
                f"the data sequence number of {file_name(data_file.file_path)} is unknown"
            )
        deletes = self.index.for_data_file(data_file, sequence_number)
        if not deletes:
            return []
        started = time.perf_counter()
        try:
            self.deadline.check()
            if data_file.file_format != FileFormat.PARQUET:
                raise UnsupportedOperation(
                    f"equality deletes on {data_file.file_format.name} data files are not served"
                )
            fields, matchers = self._matchers_for(deletes)
            with self.open_file(data_file.file_path) as source:
                found, rows = matching_positions(
                    source, data_file.file_path, fields, matchers, self.deadline, int(data_file.record_count)
                )
            self.resolution.data_files += 1
            self.resolution.bytes_scanned += int(data_file.file_size_in_bytes)
            self.resolution.rows_scanned += rows
            self.resolution.rows_deleted += len(found)
            return found.tolist()
        except OverBudget:
            self.resolution.outcome = "over_budget"
            raise
        except UnsupportedOperation:
            self.resolution.outcome = "refused"
            raise
        except Exception:
            self.resolution.outcome = "failed"
            raise
        finally:
            self.resolution.seconds += time.perf_counter() - started

    def _matchers_for(
        self, deletes: list[EqualityDelete]
    ) -> tuple[list[NestedField], list[tuple[list[int], KeyMatcher]]]:
        by_ids: dict[tuple[int, ...], list[EqualityDelete]] = {}
        for delete in deletes:
            by_ids.setdefault(delete.equality_ids, []).append(delete)
        field_ids = sorted({field_id for ids in by_ids for field_id in ids})
        fields = [self._field(field_id) for field_id in field_ids]
        matchers = []
        for ids, group in sorted(by_ids.items()):
            key = (ids, tuple(sorted(delete.path for delete in group)))
            matcher = self._matchers.get(key)
            if matcher is None:
                keys = [self._delete_keys(delete) for delete in group]
                matcher = KeyMatcher([pa.concat_arrays([k[i] for k in keys]) for i in range(len(ids))])
                self._matchers[key] = matcher
            matchers.append(([field_ids.index(field_id) for field_id in ids], matcher))
        return fields, matchers

    def _delete_keys(self, delete: EqualityDelete) -> list[pa.Array]:
        keys = self._keys.get(delete.path)
        if keys is None:
            if not delete.equality_ids:
                raise CorruptDeleteFile(f"equality delete file {file_name(delete.path)} names no columns")
            if delete.file.file_format != FileFormat.PARQUET:
                raise UnsupportedOperation(
                    f"equality delete files in {delete.file.file_format.name} are not served"
                )
            fields = [self._field(field_id) for field_id in delete.equality_ids]
            keys = read_keys(self.read(delete.path), delete.path, fields)
            self._keys[delete.path] = keys
            self.resolution.delete_files += 1
        return keys

    def _field(self, field_id: int) -> NestedField:
        schema = self.index.schema
        if field_id not in {f.field_id for f in schema.fields}:
            raise UnsupportedOperation(
                f"an equality delete is on field id {field_id}, which is not a top-level column of the "
                "snapshot's schema"
            )
        return schema.find_field(field_id)


def resolver_of(
    plan: Any, schema: Any, read: Read, open_file: Open, budget_seconds: float
) -> EqualityResolver | None:
    """The resolver of a scan plan's equality deletes (`planning.Plan`), None when it has none."""
    if not plan.equality_deletes:
        return None
    index = EqualityIndex(plan.equality_deletes, schema)
    return EqualityResolver(index, plan.sequence_numbers, read, open_file, Deadline(budget_seconds))
