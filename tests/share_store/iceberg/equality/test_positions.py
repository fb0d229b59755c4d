"""`share_store.iceberg.equality.positions` on bytes: which equality deletes apply, the rows they delete."""

from __future__ import annotations

import datetime
import io
import itertools
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import DateType, DoubleType, IntegerType, LongType, NestedField, StringType

from share_store.errors import UnsupportedOperation
from share_store.iceberg.deletes import CorruptDeleteFile
from share_store.iceberg.equality.deadline import Deadline, OverBudget
from share_store.iceberg.equality.files import matching_positions
from share_store.iceberg.equality.index import EqualityDelete, EqualityIndex, may_match
from share_store.iceberg.equality.keys import KeyMatcher, comparable
from share_store.iceberg.equality.positions import EqualityResolver

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "day", DateType(), required=False),
    NestedField(4, "score", DoubleType(), required=False),
    NestedField(5, "added", IntegerType(), required=False),  # absent from the data files below
)
ID, NAME, DAY, SCORE, ADDED = (SCHEMA.find_field(i) for i in range(1, 6))
D1, D2 = datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)


def parquet(columns: dict[str, tuple[int, pa.Array]], row_group_size: int | None = None) -> bytes:
    """A Parquet file whose columns carry Iceberg field ids, as Iceberg writers make them."""
    fields = [
        pa.field(name, array.type, metadata={b"PARQUET:field_id": str(field_id).encode()})
        for name, (field_id, array) in columns.items()
    ]
    table = pa.Table.from_arrays([array for _, array in columns.values()], schema=pa.schema(fields))
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def data_file(
    path: str,
    content: DataFileContent = DataFileContent.DATA,
    partition: tuple[Any, ...] = ("a",),
    spec_id: int = 0,
    equality_ids: list[int] | None = None,
    record_count: int = 0,
    **stats: Any,
) -> DataFile:
    file = DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*partition),
        record_count=record_count,
        file_size_in_bytes=100,
        equality_ids=equality_ids,
        **stats,
    )
    file.spec_id = spec_id
    return file


def delete(
    path: str, ids: list[int], sequence_number: int, partition: tuple[Any, ...] = ("a",), **kwargs: Any
) -> EqualityDelete:
    file = data_file(path, DataFileContent.EQUALITY_DELETES, partition, equality_ids=ids, **kwargs)
    return EqualityDelete(file, sequence_number, is_global=not partition)


# -- matching keys ------------------------------------------------------------------------


def matched(keys: list[pa.Array], rows: list[pa.Array]) -> list[int]:
    mask = KeyMatcher(keys).matches(rows)
    return [int(i) for i in mask.nonzero()[0]]


def test_one_column_matches_null_safely() -> None:
    keys = [pa.array([3, None, 7], pa.int64())]
    rows = [pa.array([1, 3, None, 7, 8, None], pa.int64())]
    assert matched(keys, rows) == [1, 2, 3, 5]
    assert matched([pa.array([3], pa.int64())], rows) == [1]  # no null deleted: null rows stay


def test_several_columns_match_only_whole_keys() -> None:
    keys = [pa.array(["a", "b", None, "a"]), pa.array([D1, D2, D2, None])]
    rows = [
        pa.array(["a", "a", "b", "b", None, None, "a", "c", "a"]),
        pa.array([D1, D2, D2, D1, D2, D1, None, D1, D1]),
    ]
    # ("a", D2) and ("b", D1) mix columns of different keys: not deleted.
    assert matched(keys, rows) == [0, 2, 4, 6, 8]


def test_three_columns_with_many_keys_agree_with_a_set_of_tuples() -> None:
    values = [0, 1, 2, None]
    every = list(itertools.product(values, ["x", "y", None], [D1, None]))
    keys = every[::3]
    columns = [pa.array([key[i] for key in keys]) for i in range(3)]
    for i, kind in enumerate([pa.int64(), pa.string(), pa.date32()]):
        columns[i] = columns[i].cast(kind)
    rows = [pa.array([row[i] for row in every]) for i in range(3)]
    expected = [i for i, row in enumerate(every) if row in set(keys)]
    assert matched(columns, rows) == expected


def test_values_compare_as_iceberg_compares_them() -> None:
    # An int column promoted to long, strings of either Arrow width, dates.
    assert comparable(pa.array([1, None], pa.int32()), ID).equals(pa.array([1, None], pa.int64()))
    wide = comparable(pa.array(["a"], pa.large_string()), NAME)
    assert comparable(pa.array(["a"], pa.string()), NAME).equals(wide)
    assert comparable(pa.array([D1]), DAY).type == pa.date32()
    # Doubles as Java compares them: NaN equals NaN, -0.0 is not 0.0.
    keys = [comparable(pa.array([float("nan"), 0.0]), SCORE)]
    rows = [comparable(pa.array([float("nan"), -0.0, 0.0, 1.5, None]), SCORE)]
    assert matched(keys, rows) == [0, 2]


# -- which deletes apply ---------------------------------------------------------------------


def test_a_delete_applies_to_older_data_of_its_spec_and_partition_only() -> None:
    index = EqualityIndex(
        [
            delete("same.parquet", [1], 5),
            delete("other-partition.parquet", [1], 5, partition=("b",)),
            delete("other-spec.parquet", [1], 5, spec_id=1),
            delete("global.parquet", [1], 5, partition=()),
        ],
        SCHEMA,
    )
    older = data_file("d.parquet")
    assert sorted(d.path for d in index.for_data_file(older, 4)) == ["global.parquet", "same.parquet"]
    # Strictly lower sequence numbers only: data committed with or after the delete stays.
    assert index.for_data_file(older, 5) == [] and index.for_data_file(older, 6) == []


def test_stats_skip_data_files_no_deleted_key_can_be_in() -> None:
    def bounds(low: int, high: int) -> dict[str, Any]:
        return {
            "lower_bounds": {1: to_bytes(LongType(), low)},
            "upper_bounds": {1: to_bytes(LongType(), high)},
            "null_value_counts": {1: 0},
            "value_counts": {1: 10},
        }

    keys = delete("k.parquet", [1], 5, **bounds(10, 20)).file
    assert may_match(data_file("d", **bounds(15, 30)), keys, SCHEMA)
    assert not may_match(data_file("d", **bounds(21, 30)), keys, SCHEMA)
    assert may_match(data_file("d"), keys, SCHEMA)  # no stats: it may
    # A null key matches null rows whatever the bounds of the values.
    null_key = delete("n.parquet", [1], 5, **(bounds(10, 20) | {"null_value_counts": {1: 1}})).file
    with_nulls = data_file("d", **(bounds(21, 30) | {"null_value_counts": {1: 2}}))
    assert may_match(with_nulls, null_key, SCHEMA)
    assert not may_match(data_file("d", **bounds(21, 30)), null_key, SCHEMA)
    only_nulls = data_file("d", null_value_counts={1: 10}, value_counts={1: 10})
    assert not may_match(only_nulls, keys, SCHEMA) and may_match(only_nulls, null_key, SCHEMA)


# -- reading data files -----------------------------------------------------------------------

DATA = parquet(
    {
        "id": (1, pa.array(range(10), pa.int64())),
        "name": (2, pa.array(["a", "b", None, "a", "b", None, "a", "b", None, "a"])),
        "day": (3, pa.array([D1, D2] * 5)),
        "v": (9, pa.array([f"v{i}" for i in range(10)])),
    },
    row_group_size=4,
)


def test_positions_are_found_batch_by_batch_across_row_groups() -> None:
    matchers = [([0], KeyMatcher([comparable(pa.array([1, 5, 8, 42]), ID)]))]
    found, rows = matching_positions(pa.BufferReader(DATA), "d", [ID], matchers, batch_rows=3)
    assert found.tolist() == [1, 5, 8] and rows == 10


def test_several_deletes_on_different_columns_unite() -> None:
    by_id = KeyMatcher([comparable(pa.array([0]), ID)])
    by_name_day = KeyMatcher([comparable(pa.array([None, "b"]), NAME), comparable(pa.array([D1, D1]), DAY)])
    fields = [ID, NAME, DAY]
    matchers = [([0], by_id), ([1, 2], by_name_day)]
    found, _ = matching_positions(pa.BufferReader(DATA), "d", fields, matchers, batch_rows=4)
    # Row 0 by id; rows 2 and 8 are (null, D1), row 4 is ("b", D1).
    assert found.tolist() == [0, 2, 4, 8]


def test_a_column_added_after_the_file_was_written_reads_as_null() -> None:
    nulls = KeyMatcher([comparable(pa.array([None], pa.int32()), ADDED)])
    found, _ = matching_positions(pa.BufferReader(DATA), "d", [ADDED], [([0], nulls)], record_count=10)
    assert found.tolist() == list(range(10))
    seven = KeyMatcher([comparable(pa.array([7], pa.int32()), ADDED)])
    found, _ = matching_positions(pa.BufferReader(DATA), "d", [ADDED], [([0], seven)], record_count=10)
    assert found.tolist() == []


def test_files_without_field_ids_or_unreadable_are_refused() -> None:
    sink = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2]}), sink)
    matchers = [([0], KeyMatcher([comparable(pa.array([1]), ID)]))]
    with pytest.raises(UnsupportedOperation, match="no Iceberg field ids"):
        matching_positions(pa.BufferReader(sink.getvalue()), "s3://b/t/plain.parquet", [ID], matchers)
    with pytest.raises(CorruptDeleteFile, match=r"data file junk\.parquet cannot be read"):
        matching_positions(pa.BufferReader(b"PAR1 not really"), "s3://b/t/junk.parquet", [ID], matchers)


# -- one snapshot's resolution ------------------------------------------------------------------

KEYS = parquet({"id": (1, pa.array([1, 5, 8], pa.int64()))})
NAME_KEYS = parquet({"name": (2, pa.array([None])), "day": (3, pa.array([D1]))})


def resolver(
    deletes: list[EqualityDelete],
    files: dict[str, bytes],
    sequence_numbers: dict[str, int] | None = None,
    deadline: Deadline | None = None,
) -> EqualityResolver:
    def read(path: str) -> bytes:
        if path not in files:
            raise FileNotFoundError(path)  # as storages say it
        return files[path]

    return EqualityResolver(
        EqualityIndex(deletes, SCHEMA),
        sequence_numbers or {"d.parquet": 1},
        read,
        lambda path: io.BytesIO(read(path)),
        deadline or Deadline(30),
    )


def test_a_snapshot_resolves_each_data_file_with_the_deletes_that_apply() -> None:
    deletes = [delete("k.parquet", [1], 2), delete("n.parquet", [2, 3], 3, partition=())]
    files = {"k.parquet": KEYS, "n.parquet": NAME_KEYS, "d.parquet": DATA, "new.parquet": DATA}
    run = resolver(deletes, files, {"d.parquet": 1, "new.parquet": 2})
    assert run.positions(data_file("d.parquet", record_count=10)) == [1, 2, 5, 8]
    # Written with the first delete: only the later global one applies.
    assert run.positions(data_file("new.parquet", record_count=10)) == [2, 8]
    assert run.positions(data_file("d.parquet", partition=("b",), record_count=10)) == [2, 8]
    report = run.resolution
    assert (report.delete_files, report.data_files, report.rows_scanned) == (2, 3, 30)
    assert report.rows_deleted == 8 and report.outcome == "resolved"


def test_past_the_budget_the_snapshot_is_refused_with_the_reason() -> None:
    now = [0.0]
    deadline = Deadline(30, clock=lambda: now[0])
    run = resolver([delete("k.parquet", [1], 2)], {"k.parquet": KEYS, "d.parquet": DATA}, deadline=deadline)
    assert run.positions(data_file("d.parquet", record_count=10)) == [1, 5, 8]
    now[0] = 31.0
    with pytest.raises(OverBudget, match="longer than the configured 30 s budget") as refused:
        run.positions(data_file("d.parquet", record_count=10))
    assert isinstance(refused.value, UnsupportedOperation)  # served as UNSUPPORTED_OPERATION
    assert run.resolution.outcome == "over_budget"


def test_damaged_or_vanished_delete_files_never_resolve_to_fewer_deletes() -> None:
    target = data_file("d.parquet", record_count=10)
    junk = resolver([delete("k.parquet", [1], 2)], {"k.parquet": b"garbage", "d.parquet": DATA})
    with pytest.raises(CorruptDeleteFile, match=r"equality delete file k\.parquet cannot be read"):
        junk.positions(target)
    assert junk.resolution.outcome == "failed"
    wrong_columns = resolver([delete("k.parquet", [2], 2)], {"k.parquet": KEYS, "d.parquet": DATA})
    with pytest.raises(CorruptDeleteFile, match="lacks its equality column"):
        wrong_columns.positions(target)
    # Files gone stay FileNotFoundError, which the table reader answers as "table files missing".
    gone = resolver([delete("k.parquet", [1], 2)], {"d.parquet": DATA})
    with pytest.raises(FileNotFoundError):
        gone.positions(target)
    vanished_data = resolver([delete("k.parquet", [1], 2)], {"k.parquet": KEYS})
    with pytest.raises(FileNotFoundError):
        vanished_data.positions(target)


def test_deletes_on_a_column_the_schema_lacks_are_refused() -> None:
    run = resolver([delete("k.parquet", [77], 2)], {"k.parquet": KEYS, "d.parquet": DATA})
    with pytest.raises(UnsupportedOperation, match="field id 77"):
        run.positions(data_file("d.parquet", record_count=10))
