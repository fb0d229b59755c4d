"""Which of a snapshot's equality deletes apply to a data file: `EqualityDelete`, `EqualityIndex`.

A delete applies to a data file (Iceberg spec, "Scan Planning") when its data
sequence number is strictly greater than the data file's, and it is global (its
partition spec is unpartitioned) or has the data file's spec and partition. Column
stats then rule out the pairs that cannot share a key (`may_match`), so that the
data files no delete can touch are never read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

#: Types whose bounds order as Python orders their decoded values (stats pruning).
RANGE_TYPES = (
    IntegerType,
    LongType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    StringType,
    DecimalType,
    BinaryType,
    FixedType,
)


@dataclass(frozen=True)
class EqualityDelete:
    """One equality delete file as planning found it."""

    file: DataFile
    sequence_number: int
    is_global: bool

    @property
    def path(self) -> str:
        return str(self.file.file_path)

    @property
    def equality_ids(self) -> tuple[int, ...]:
        return tuple(self.file.equality_ids or ())


class EqualityIndex:
    """A snapshot's equality deletes by partition, answering which apply to a data file."""

    def __init__(self, deletes: Iterable[EqualityDelete], schema: Schema) -> None:
        self.schema = schema
        self.global_deletes: list[EqualityDelete] = []
        self.by_partition: dict[tuple[int, Any], list[EqualityDelete]] = {}
        for delete in deletes:
            if delete.is_global:
                self.global_deletes.append(delete)
            else:
                key = (delete.file.spec_id, delete.file.partition)
                self.by_partition.setdefault(key, []).append(delete)

    def __bool__(self) -> bool:
        return bool(self.global_deletes or self.by_partition)

    def for_data_file(self, data_file: DataFile, sequence_number: int) -> list[EqualityDelete]:
        """The deletes that apply to `data_file`, whose data sequence number is `sequence_number`."""
        candidates = self.by_partition.get((data_file.spec_id, data_file.partition), [])
        return [
            delete
            for delete in (*candidates, *self.global_deletes)
            if delete.sequence_number > sequence_number and may_match(data_file, delete.file, self.schema)
        ]


def may_match(data_file: DataFile, delete_file: DataFile, schema: Schema) -> bool:
    """False when the files' column stats prove no row of `data_file` has a deleted key.

    Iceberg Java's `DeleteFileIndex.canContainEqDeletesForFile`: per equality column,
    nulls on one side only, or value ranges that do not overlap. Missing stats match.
    """
    for field_id in delete_file.equality_ids or ():
        try:
            field_type = schema.find_type(field_id)
        except ValueError:
            return True  # refused when resolving, with the reason
        data_nulls = _count(data_file.null_value_counts, field_id)
        delete_nulls = _count(delete_file.null_value_counts, field_id)
        if data_nulls != 0 and delete_nulls != 0:
            continue  # both may hold nulls (unknown counts included), and null matches null
        if _all_null(data_file, field_id) and delete_nulls == 0:
            return False  # only nulls in the data, no null deleted
        if _all_null(delete_file, field_id) and data_nulls == 0:
            return False  # only nulls deleted, none in the data
        # One side holds no null: only values can match, and the bounds are theirs.
        if isinstance(field_type, RANGE_TYPES) and not _ranges_overlap(
            data_file, delete_file, field_id, field_type
        ):
            return False
    return True


def _count(counts: dict[int, int] | None, field_id: int) -> int | None:
    value = (counts or {}).get(field_id)
    return None if value is None else int(value)


def _all_null(file: DataFile, field_id: int) -> bool:
    nulls = _count(file.null_value_counts, field_id)
    return nulls is not None and nulls == _count(file.value_counts, field_id)


def _ranges_overlap(data_file: DataFile, delete_file: DataFile, field_id: int, field_type: Any) -> bool:
    bounds: list[bytes | None] = [
        (stats or {}).get(field_id)
        for stats in (
            data_file.lower_bounds,
            data_file.upper_bounds,
            delete_file.lower_bounds,
            delete_file.upper_bounds,
        )
    ]
    known = [bound for bound in bounds if bound is not None]
    if len(known) < len(bounds):
        return True
    try:
        data_low, data_high, delete_low, delete_high = (from_bytes(field_type, bound) for bound in known)
        return bool(data_low <= delete_high and delete_low <= data_high)
    except Exception:  # noqa: BLE001 - bounds of another type (a promoted column): assume overlap
        return True
