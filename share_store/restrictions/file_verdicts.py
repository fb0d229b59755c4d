"""What a data file's partition values and statistics prove of its rows under a row filter.

For each file the filter is evaluated over what is known without reading it: a
partition column's one value, and for other columns the bounds, null count and
row count of the file's statistics. The answer is the set of truth values the
filter may take on the file's rows (SQL's three: true, false, null). A file is
served as it is only when that set is {true}, left out when true is not in it,
and otherwise derived (read, filtered, rewritten). The sets over-approximate:
where nothing is proven every value is possible, so a file is never served or
left out on a guess, only derived.

Statistics are read cautiously, since they are a writer's promise, not the
data: bounds of floating-point columns are ignored (NaN sorts outside them),
and so are decimal bounds (JSON carries them as binary floats); a long string
bound may have been truncated, so it bounds nothing from above; a timestamp's
upper bound is widened by the millisecond writers truncate it to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from share_store.restrictions.column_types import (
    ColumnType,
    UnreadableValue,
    read_partition_value,
    read_value,
)
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

TRUE, FALSE, NULL = "t", "f", "n"
Outcomes = frozenset[str]
ANY: Outcomes = frozenset((TRUE, FALSE, NULL))
#: A string bound this long may be a truncated prefix (Delta writes 32 characters, Iceberg 16).
TRUNCATED_STRING = 16


@dataclass(frozen=True)
class ColumnFacts:
    """What is known of one column's values in one file."""

    #: The one value every row has (a partition column), when `constant`.
    constant: bool = False
    value: Any = None
    low: Any = None  # None: unbounded
    high: Any = None
    #: "none", "some", "all" null, or "unknown"
    nulls: str = "unknown"


UNKNOWN = ColumnFacts()


def file_facts(
    columns: Mapping[str, ColumnType],
    partition_columns: list[str],
    partition_values: Mapping[str, str | None],
    stats: Mapping[str, Any],
    names: set[str],
) -> dict[str, ColumnFacts]:
    """The facts of the columns in `names` (as the schema names them) for one file."""
    by_name = {column.name: column for column in columns.values()}
    partitioned = {name.lower() for name in partition_columns}
    facts: dict[str, ColumnFacts] = {}
    records = stats.get("numRecords") if isinstance(stats.get("numRecords"), int) else None
    for name in names:
        column = by_name[name]
        if name.lower() in partitioned:
            raw = partition_values.get(column.physical, partition_values.get(column.name))
            try:
                facts[name] = ColumnFacts(constant=True, value=read_partition_value(column, raw))
            except UnreadableValue:
                facts[name] = UNKNOWN
            continue
        facts[name] = _from_stats(column, stats, records)
    return facts


def _from_stats(column: ColumnType, stats: Mapping[str, Any], records: int | None) -> ColumnFacts:
    nulls = "unknown"
    counts = stats.get("nullCount")
    count = counts.get(column.physical) if isinstance(counts, dict) else None
    if isinstance(count, int) and not isinstance(count, bool):
        if count == 0:
            nulls = "none"
        elif records is not None and count >= records:
            return ColumnFacts(nulls="all")
        else:
            nulls = "some"
    if column.kind in ("float", "decimal", "boolean", "binary", "other"):
        return ColumnFacts(nulls=nulls)
    low = _bound(column, stats.get("minValues"))
    high = _bound(column, stats.get("maxValues"))
    if column.kind == "string" and isinstance(high, str) and len(high) >= TRUNCATED_STRING:
        high = None
    if isinstance(high, datetime):
        high = high + timedelta(milliseconds=1)
    return ColumnFacts(low=low, high=high, nulls=nulls)


def _bound(column: ColumnType, values: Any) -> Any:
    if not isinstance(values, dict):
        return None
    raw = values.get(column.physical)
    if raw is None or isinstance(raw, dict | list):
        return None
    try:
        return read_value(column, raw)
    except UnreadableValue:
        return None


# -- evaluation -------------------------------------------------------------------------------


def outcomes(predicate: Predicate, facts: Mapping[str, ColumnFacts]) -> Outcomes:
    """The truth values `predicate` (bound: literals only) may take on the file's rows."""
    if isinstance(predicate, And):
        return _combine(outcomes(predicate.left, facts), outcomes(predicate.right, facts), _and)
    if isinstance(predicate, Or):
        return _combine(outcomes(predicate.left, facts), outcomes(predicate.right, facts), _or)
    if isinstance(predicate, Not):
        flip = {TRUE: FALSE, FALSE: TRUE, NULL: NULL}
        return frozenset(flip[value] for value in outcomes(predicate.operand, facts))
    fact = facts.get(predicate.column.name, UNKNOWN)
    if isinstance(predicate, IsNull):
        if fact.constant:
            return frozenset({TRUE if fact.value is None else FALSE})
        return {"none": frozenset({FALSE}), "all": frozenset({TRUE})}.get(
            fact.nulls, frozenset({TRUE, FALSE})
        )
    if fact.constant:
        if fact.value is None:
            return frozenset({NULL})
        return frozenset({TRUE if _holds(predicate, fact.value) else FALSE})
    if fact.nulls == "all":
        return frozenset({NULL})
    found = set(_non_null(predicate, fact))
    if fact.nulls != "none":
        found.add(NULL)
    return frozenset(found)


def _literal(value: Any) -> Any:
    assert isinstance(value, Literal), "a bound filter holds only literals"
    return value.value


def _holds(predicate: Predicate, value: Any) -> bool:
    """Whether the comparison holds for one non-null value."""
    try:
        if isinstance(predicate, Compare):
            return _compare(predicate.op, value, _literal(predicate.value))
        if isinstance(predicate, InList):
            return any(value == _literal(v) for v in predicate.values)
        if isinstance(predicate, Between):
            return _literal(predicate.low) <= value <= _literal(predicate.high)
        if isinstance(predicate, Like):
            return _like(str(_literal(predicate.pattern)), value)
    except TypeError:  # values of different types: cannot be decided here
        raise _Undecided from None
    raise AssertionError(f"not a comparison: {predicate!r}")


class _Undecided(Exception):
    pass


def _compare(op: str, value: Any, literal: Any) -> bool:
    return {
        "=": value == literal,
        "<>": value != literal,
        "<": value < literal,
        "<=": value <= literal,
        ">": value > literal,
        ">=": value >= literal,
    }[op]


def _like(pattern: str, value: Any) -> bool:
    import re

    regex, index = "", 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            regex += re.escape(pattern[index + 1])
            index += 2
            continue
        regex += ".*" if char == "%" else "." if char == "_" else re.escape(char)
        index += 1
    return re.fullmatch(regex, str(value), re.DOTALL) is not None


def _non_null(predicate: Predicate, fact: ColumnFacts) -> set[str]:
    """The truth values the comparison may take on the file's non-null values."""
    try:
        if isinstance(predicate, Compare):
            return _range_compare(predicate.op, fact.low, fact.high, _literal(predicate.value))
        if isinstance(predicate, InList):
            found: set[str] = set()
            any_false_impossible = False
            for value in predicate.values:
                each = _range_compare("=", fact.low, fact.high, _literal(value))
                if TRUE in each:
                    found.add(TRUE)
                if FALSE not in each:
                    any_false_impossible = True
            if not any_false_impossible:
                found.add(FALSE)
            return found
        if isinstance(predicate, Between):
            low = _range_compare(">=", fact.low, fact.high, _literal(predicate.low))
            high = _range_compare("<=", fact.low, fact.high, _literal(predicate.high))
            return set(_combine(frozenset(low), frozenset(high), _and))
    except TypeError:
        return {TRUE, FALSE}
    return {TRUE, FALSE}  # LIKE: not decided from bounds


def _range_compare(op: str, low: Any, high: Any, literal: Any) -> set[str]:
    """The truth values of `value op literal` for values within [low, high] (None: unbounded)."""
    true_possible, false_possible = True, True
    lo = low is not None
    hi = high is not None
    if op == "=":
        true_possible = not ((lo and literal < low) or (hi and literal > high))
        false_possible = not (lo and hi and low == high == literal)
    elif op == "<>":
        true_possible = not (lo and hi and low == high == literal)
        false_possible = not ((lo and literal < low) or (hi and literal > high))
    elif op == "<":
        true_possible = not (lo and low >= literal)
        false_possible = not (hi and high < literal)
    elif op == "<=":
        true_possible = not (lo and low > literal)
        false_possible = not (hi and high <= literal)
    elif op == ">":
        true_possible = not (hi and high <= literal)
        false_possible = not (lo and low > literal)
    elif op == ">=":
        true_possible = not (hi and high < literal)
        false_possible = not (lo and low >= literal)
    return {value for value, possible in ((TRUE, true_possible), (FALSE, false_possible)) if possible}


def _and(a: str, b: str) -> str:
    if FALSE in (a, b):
        return FALSE
    return TRUE if a == b == TRUE else NULL


def _or(a: str, b: str) -> str:
    if TRUE in (a, b):
        return TRUE
    return FALSE if a == b == FALSE else NULL


def _combine(left: Outcomes, right: Outcomes, join: Any) -> Outcomes:
    return frozenset(join(a, b) for a in left for b in right)


def verdict(predicate: Predicate | None, facts: Mapping[str, ColumnFacts]) -> str:
    """ "all" (every row passes), "none" (no row does) or "some" (read the file to know)."""
    if predicate is None:
        return "all"
    try:
        found = outcomes(predicate, facts)
    except _Undecided:
        return "some"
    if found == {TRUE}:
        return "all"
    if TRUE not in found:
        return "none"
    return "some"


def on_partitions(names: set[str], partition_columns: list[str]) -> bool:
    """Whether a filter names partition columns only (schema names match case-insensitively)."""
    partitioned = {name.lower() for name in partition_columns}
    return all(name.lower() in partitioned for name in names)


def parsed_stats(action: Mapping[str, Any]) -> dict[str, Any]:
    raw = action.get("stats")
    if not raw:
        return {}
    try:
        found = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
