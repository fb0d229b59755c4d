"""`jsonPredicateHints` evaluated against one file's partition values and stats.

Evaluation is three-valued: True (every row of the file matches), False (no
row can match) and None (unknown). A file is skipped only on False, so a hint
can never drop matching rows; NOT is sound because it flips only certainties.
Any hint that fails to parse or validate filters nothing, as the protocol asks
of best-effort hints.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

MAX_HINT_BYTES = 1024 * 1024
MAX_DEPTH = 100
COMPARISONS = {"equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"}
VALUE_TYPES = {"bool", "int", "long", "string", "date", "float", "double", "timestamp"}


class PredicateError(ValueError):
    pass


@dataclass(frozen=True)
class ColumnRange:
    """What a file says about a column: its min/max and whether it has nulls.

    `has_nulls`/`all_null` are None when unknown.
    """

    low: Any
    high: Any
    has_nulls: bool | None
    all_null: bool | None


#: (column name, value type) -> what the file knows about that column, or None.
ColumnLookup = Callable[[str, str], ColumnRange | None]


def parse_hint(text: str) -> dict[str, Any] | None:
    """The validated predicate tree, or None when the hint must be ignored."""
    if not text or len(text.encode()) > MAX_HINT_BYTES:
        return None
    try:
        tree = json.loads(text)
        _validate(tree, 1)
    except (ValueError, TypeError, RecursionError):
        return None
    return tree


def _validate(node: Any, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise PredicateError("predicate tree is too deep")
    if not isinstance(node, dict) or not isinstance(node.get("op"), str):
        raise PredicateError("each node needs an 'op'")
    op = node["op"]
    children = node.get("children") or []
    if not isinstance(children, list):
        raise PredicateError("'children' must be a list")
    if op == "column":
        if not isinstance(node.get("name"), str) or node.get("valueType") not in VALUE_TYPES:
            raise PredicateError("column needs a name and a valueType")
    elif op == "literal":
        if not isinstance(node.get("value"), str) or node.get("valueType") not in VALUE_TYPES:
            raise PredicateError("literal needs a string value and a valueType")
        convert(node["value"], node["valueType"])
    elif op in COMPARISONS:
        if len(children) != 2 or any(c.get("op") not in ("column", "literal") for c in children):
            raise PredicateError(f"{op} needs two leaf children")
        if children[0].get("valueType") != children[1].get("valueType"):
            raise PredicateError(f"{op} compares values of different types")
    elif op == "isNull":
        if len(children) != 1 or children[0].get("op") != "column":
            raise PredicateError("isNull needs one column child")
    elif op in ("and", "or"):
        if len(children) < 2:
            raise PredicateError(f"{op} needs at least two children")
    elif op == "not":
        if len(children) != 1:
            raise PredicateError("not needs one child")
    else:
        raise PredicateError(f"unknown op {op!r}")
    for child in children:
        _validate(child, depth + 1)


def convert(value: Any, value_type: str) -> Any:
    """A literal, partition value or stat converted for comparison."""
    if value is None:
        return None
    if value_type == "bool":
        if isinstance(value, bool):
            return value
        lowered = str(value).lower()
        if lowered not in ("true", "false"):
            raise PredicateError(f"not a boolean: {value!r}")
        return lowered == "true"
    if value_type in ("int", "long"):
        return int(value)
    if value_type in ("float", "double"):
        number = float(value)
        if math.isnan(number):
            raise PredicateError("NaN is not comparable")
        return number
    if value_type == "string":
        return str(value)
    if value_type == "date":
        if isinstance(value, datetime):
            return value.date()
        if isinstance(value, date):
            return value
        return date.fromisoformat(str(value)[:10])
    if value_type == "timestamp":
        if isinstance(value, datetime):
            moment = value
        else:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    raise PredicateError(f"unknown value type {value_type!r}")


def evaluate(node: Mapping[str, Any], lookup: ColumnLookup) -> bool | None:
    try:
        return _evaluate(node, lookup)
    except (PredicateError, ValueError, TypeError):
        return None


def _evaluate(node: Mapping[str, Any], lookup: ColumnLookup) -> bool | None:
    op = node["op"]
    children = node.get("children") or []
    if op == "and":
        results = [_evaluate(child, lookup) for child in children]
        if any(result is False for result in results):
            return False
        return True if all(result is True for result in results) else None
    if op == "or":
        results = [_evaluate(child, lookup) for child in children]
        if any(result is True for result in results):
            return True
        return False if all(result is False for result in results) else None
    if op == "not":
        result = _evaluate(children[0], lookup)
        return None if result is None else not result
    if op == "isNull":
        column = lookup(children[0]["name"], children[0]["valueType"])
        if column is None:
            return None
        if column.all_null:
            return True
        return False if column.has_nulls is False else None
    if op in COMPARISONS:
        return _compare(op, children[0], children[1], lookup)
    raise PredicateError(f"{op} cannot stand alone")


def _compare(op: str, left: Mapping[str, Any], right: Mapping[str, Any], lookup: ColumnLookup) -> bool | None:
    # Normalise to `column OP literal`; a literal on the left mirrors the op.
    mirrored = {
        "lessThan": "greaterThan",
        "greaterThan": "lessThan",
        "lessThanOrEqual": "greaterThanOrEqual",
        "greaterThanOrEqual": "lessThanOrEqual",
    }
    if left["op"] == "literal" and right["op"] == "column":
        left, right = right, left
        op = mirrored.get(op, op)
    if left["op"] != "column" or right["op"] != "literal":
        return None
    value_type = left["valueType"]
    literal = convert(right["value"], value_type)
    column = lookup(left["name"], value_type)
    if column is None:
        return None
    if column.all_null:
        return False  # NULL compared with anything is never true
    low, high = column.low, column.high
    if low is None or high is None:
        return None
    # A comparison holds for every row only if no row is null.
    certain = column.has_nulls is False
    if op == "equal":
        if literal < low or literal > high:
            return False
        return True if certain and low == high == literal else None
    if op == "lessThan":
        if low >= literal:
            return False
        return True if certain and high < literal else None
    if op == "lessThanOrEqual":
        if low > literal:
            return False
        return True if certain and high <= literal else None
    if op == "greaterThan":
        if high <= literal:
            return False
        return True if certain and low > literal else None
    if high < literal:  # greaterThanOrEqual
        return False
    return True if certain and low >= literal else None
