"""Deleted keys matched against rows as Iceberg compares values, null equal to null: `KeyMatcher`.

Both sides are cast to one comparable form per column (`comparable`); a set of
deleted keys is indexed once (`ValueIndex`), and several columns are folded into one
integer code, so that a record batch is matched with Arrow's and pandas' hash kernels,
without a Python loop per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from share_store.errors import UnsupportedOperation

#: Double's canonical NaN: Java compares doubles as their bits, all NaNs as one.
CANONICAL_NAN = 0x7FF8000000000000


def comparable_type(field: NestedField) -> pa.DataType:
    """The Arrow type both sides of a comparison on `field` are cast to."""
    kind: IcebergType = field.field_type
    if isinstance(kind, (IntegerType, LongType, FloatType, DoubleType)):
        return pa.int64()  # doubles as their bits, see `comparable`
    if isinstance(kind, StringType):
        return pa.string()  # as Parquet files read; a batch never holds 2 GB of text
    if isinstance(kind, BinaryType):
        return pa.binary()
    if isinstance(kind, UUIDType):
        return pa.binary(16)
    if isinstance(kind, FixedType):
        return pa.binary(len(kind))
    if isinstance(kind, BooleanType):
        return pa.bool_()
    if isinstance(kind, DateType):
        return pa.date32()
    if isinstance(kind, TimeType):
        return pa.time64("us")
    if isinstance(kind, (TimestampType, TimestamptzType)):
        return pa.timestamp("us")  # both sides are UTC (or zone-less) micros: the zone is dropped
    if isinstance(kind, (TimestampNanoType, TimestamptzNanoType)):
        return pa.timestamp("ns")
    if isinstance(kind, DecimalType):
        return pa.decimal128(kind.precision, kind.scale)
    raise UnsupportedOperation(
        f"equality deletes on column {field.name} of type {kind} are not served (only primitive columns)"
    )


def comparable(values: pa.Array | pa.ChunkedArray, field: NestedField) -> pa.Array:
    """`values` in the form compared: Iceberg's equality, null equal to null.

    Floating point values become their 64-bit patterns, NaN made canonical: Java
    compares doubles so (NaN equals NaN, -0.0 does not equal 0.0), and Arrow's hash
    kernels would not say the same of -0.0.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.ExtensionArray):  # uuid
        values = values.storage
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if isinstance(field.field_type, (FloatType, DoubleType)):
        doubles = values.cast(pa.float64())
        bits = doubles.view(pa.int64())
        return pc.if_else(pc.is_nan(doubles), pa.scalar(CANONICAL_NAN, pa.int64()), bits)
    target = comparable_type(field)
    if values.type == target:
        return values
    if pa.types.is_timestamp(values.type):
        # INT96 files read as nanoseconds; Iceberg reads them as micros, truncated.
        values = values.cast(pa.timestamp(values.type.unit))
        return values.cast(target, safe=False)
    return values.cast(target)


class ValueIndex:
    """Where each value lies among a fixed set of distinct values (null one of them), built once.

    Integer-like values (ints, dates, times, timestamps, doubles as bits) are looked up in
    a pandas hash index, made once per set; Arrow's `index_in` would rebuild its hash
    table on every record batch, which for 100,000 keys costs more than the lookups.
    Other types (strings, binary, decimals) go through `index_in`.
    """

    def __init__(self, values: pa.Array) -> None:
        self.values = values
        self.size = len(values)
        nulls = np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))
        self.null_position = int(nulls[0]) if len(nulls) else -1
        ints = _as_int64(values)
        self.engine: pd.Index | None = None
        if ints is not None:
            valid = np.flatnonzero(values.is_valid().to_numpy(zero_copy_only=False))
            self.engine = pd.Index(ints.filter(values.is_valid()).to_numpy())
            self.positions = valid.astype(np.int64)

    def index(self, column: pa.Array) -> np.ndarray:
        """The position of each of `column`'s values in the set, -1 where absent (null matches null)."""
        ints = _as_int64(column) if self.engine is not None else None
        if ints is None or self.engine is None:
            found = pc.index_in(column, value_set=self.values, skip_nulls=False)
            return np.asarray(pc.fill_null(found.cast(pa.int64()), -1).to_numpy())
        filled = pc.fill_null(ints, 0) if ints.null_count else ints
        at = self.engine.get_indexer(filled.to_numpy())
        result = np.full(len(at), -1, dtype=np.int64)
        hit = at >= 0
        result[hit] = self.positions[at[hit]]
        if ints.null_count:
            result[column.is_null().to_numpy(zero_copy_only=False)] = self.null_position
        return result


def _as_int64(values: pa.Array) -> pa.Array | None:
    """Integer-like values as int64 (same order, same equality); None for other types."""
    kind = values.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return values.cast(pa.int64())
    if pa.types.is_date32(kind):
        return values.view(pa.int32()).cast(pa.int64())
    if pa.types.is_timestamp(kind) or pa.types.is_time64(kind) or pa.types.is_date64(kind):
        return values.view(pa.int64())
    return None


class KeyMatcher:
    """The deleted keys of some columns, matching rows null-safely without a Python loop per row.

    One column is a set lookup. Several are folded left to right into one integer code:
    each column's values are indexed in that column's distinct deleted values, the code
    so far is combined with the index, and the combination is indexed again in the
    combinations that occur among the deleted keys. So codes stay below the number of
    keys, and a row whose code survives every step equals some deleted key in every column.
    """

    def __init__(self, keys: Sequence[pa.Array]) -> None:
        if not keys:
            raise ValueError("an equality delete has at least one column")
        self.columns: list[ValueIndex] = []
        self.combinations: list[ValueIndex] = []
        code: np.ndarray | None = None
        for column in keys:
            values = ValueIndex(pc.unique(column))
            index = values.index(column)
            if code is not None:
                combined = code * values.size + index
                known = ValueIndex(pc.unique(pa.array(combined)))
                self.combinations.append(known)
                index = known.index(pa.array(combined))
            code = index
            self.columns.append(values)
        self.size = len(keys[0])

    def matches(self, columns: Sequence[pa.Array]) -> np.ndarray:
        """Per row of `columns` (comparable, in the keys' order): whether it equals a deleted key."""
        code = self.columns[0].index(columns[0])
        for values, known, column in zip(self.columns[1:], self.combinations, columns[1:], strict=True):
            hit = code >= 0
            if not hit.any():
                break  # no row matches the columns so far
            index = values.index(column)
            combined = np.where(hit & (index >= 0), code * values.size + index, -1)
            code = known.index(pa.array(combined))  # -1 stays absent: codes are never negative
        return np.asarray(code >= 0)
