"""A bound row filter over the rows of one data file, as a pyarrow compute expression.

The rows of a derived file are the source's rows where this expression is true:
pyarrow's Kleene logic and its filter (which drops null) give SQL's semantics,
the same the file verdicts reason in. Columns are the file's physical names; a
partition column a Delta file does not hold is its partition value, and a column
the file lacks (added to the schema after it was written) is null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from share_store.restrictions.column_types import DECIMAL, ColumnType
from share_store.restrictions.row_filters import (
    And,
    Between,
    Compare,
    InList,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    Predicate,
)


def _arrow_type(column: ColumnType) -> pa.DataType:
    """The Arrow type of a column the file does not hold (a partition value, or null)."""
    kinds: dict[str, pa.DataType] = {
        "integer": pa.int64(), "float": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
        "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
    }  # fmt: skip
    if column.kind == "decimal":
        match = DECIMAL.fullmatch(str(column.delta_type))
        assert match is not None
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    return kinds.get(column.kind, pa.null())


def row_expression(
    predicate: Predicate,
    columns: Mapping[str, ColumnType],
    file_schema: pa.Schema,
    constants: Mapping[str, Any],
) -> pc.Expression:
    """`predicate` over a file whose columns are `file_schema`; `constants`: the values of the
    columns (by schema name) the file does not hold, its partition values."""
    by_name = {column.name: column for column in columns.values()}

    def operand(name: str) -> tuple[Any, pa.DataType | None]:
        column = by_name[name]
        index = file_schema.get_field_index(column.physical)
        if index >= 0:
            field = file_schema.field(index)
            if not pa.types.is_null(field.type):
                return pc.field(column.physical), field.type
            # A column a writer typed null holds only nulls: the kernels need its own type.
            return pa.scalar(None, type=_arrow_type(column)), _arrow_type(column)
        kind = _arrow_type(column)
        return pa.scalar(constants.get(name), type=kind), kind

    def scalar(value: Any, kind: pa.DataType | None) -> Any:
        literal = value.value if isinstance(value, Literal) else value
        if kind is None:
            return pa.scalar(literal)
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        try:
            return pa.scalar(literal, type=kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            # A literal outside the column's type (300 for a byte column): compared as itself.
            return pa.scalar(literal)

    def build(node: Predicate) -> pc.Expression:
        if isinstance(node, And):
            return build(node.left) & build(node.right)
        if isinstance(node, Or):
            return build(node.left) | build(node.right)
        if isinstance(node, Not):
            return ~build(node.operand)
        left, kind = operand(node.column.name)
        if not isinstance(left, pc.Expression):
            left = pc.scalar(left)
        if isinstance(node, IsNull):
            return left.is_null()
        if isinstance(node, Compare):
            right = pc.scalar(scalar(node.value, kind))
            return {
                "=": left == right,
                "<>": left != right,
                "<": left < right,
                "<=": left <= right,
                ">": left > right,
                ">=": left >= right,
            }[node.op]
        if isinstance(node, InList):
            values = [scalar(v, kind) for v in node.values]
            result = None
            for value in values:
                each = left == pc.scalar(value)
                result = each if result is None else result | each
            assert result is not None
            return result
        if isinstance(node, Between):
            low, high = pc.scalar(scalar(node.low, kind)), pc.scalar(scalar(node.high, kind))
            return (left >= low) & (left <= high)
        if isinstance(node, Like):
            pattern = node.pattern.value if isinstance(node.pattern, Literal) else node.pattern
            return pc.match_like(left, pattern=str(pattern))
        raise AssertionError(f"not a row filter node: {node!r}")

    return build(predicate)
