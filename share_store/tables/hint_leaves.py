"""The tests a compiled hint's leaf makes of one file: of a partition value (exact), or of
the file's min/max stats (a range), by op, in `PARTITION_TESTS` and `STATS_TESTS`.

Partition tests take the file's value (converted; None for null) and the literal; stats
tests take the literal, the column's min and max (converted; None when unknown), whether
it has nulls and whether all its values are null (each None when unknown). Results are
three-valued as in `predicates`. A comparison holds for every row (True) only if no row
is null; NULL compared with anything never is.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from share_store.tables.hint_intervals import Intervals

#: A test of a partition value: (the value, the literal) -> result.
PartitionTest = Callable[[Any, Any], bool | None]
#: A test of a file's stats: (the literal, min, max, has nulls, all null) -> result.
StatsTest = Callable[[Any, Any, Any, bool | None, bool | None], bool | None]


def _partition_is_null(value: Any, literal: None) -> bool | None:
    return value is None


def _partition_in(value: Any, literal: tuple[frozenset[Any], list[Any]]) -> bool | None:
    return value is not None and value in literal[0]


def _partition_comparison(compare: Callable[[Any, Any], bool]) -> PartitionTest:
    def test(value: Any, literal: Any) -> bool | None:
        return False if value is None else compare(value, literal)

    return test


def _stats_is_null(
    literal: None, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    if all_null:
        return True
    return False if has_nulls is False else None


def _stats_equal(
    literal: Any, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    if all_null:
        return False
    if low is None or high is None:
        return None
    if literal < low or literal > high:
        return False
    return True if has_nulls is False and low == high == literal else None


def _stats_less_than(
    literal: Any, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    if all_null:
        return False
    if low is None or high is None:
        return None
    if low >= literal:
        return False
    return True if has_nulls is False and high < literal else None


def _stats_less_or_equal(
    literal: Any, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    if all_null:
        return False
    if low is None or high is None:
        return None
    if low > literal:
        return False
    return True if has_nulls is False and high <= literal else None


def _stats_greater_than(
    literal: Any, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    if all_null:
        return False
    if low is None or high is None:
        return None
    if high <= literal:
        return False
    return True if has_nulls is False and low > literal else None


def _stats_greater_or_equal(
    literal: Any, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    if all_null:
        return False
    if low is None or high is None:
        return None
    if high < literal:
        return False
    return True if has_nulls is False and low >= literal else None


def _stats_in(
    literal: tuple[frozenset[Any], list[Any]],
    low: Any,
    high: Any,
    has_nulls: bool | None,
    all_null: bool | None,
) -> bool | None:
    """Any of `column = literal` for a set of literals, by bisecting them rather than testing each."""
    if all_null:
        return False
    if low is None or high is None:
        return None
    members, ordered = literal
    first = bisect_left(ordered, low)
    if first == len(ordered) or ordered[first] > high:
        return False  # no literal falls within the file's range
    return True if has_nulls is False and low == high and low in members else None


def _partition_in_ranges(value: Any, literal: Intervals) -> bool | None:
    return value is not None and literal.overlap(value, value)


def _stats_in_ranges(
    literal: Intervals, low: Any, high: Any, has_nulls: bool | None, all_null: bool | None
) -> bool | None:
    """Any of `lower AND upper` for a set of ranges: False if none reaches into the file's [min, max],
    True if one holds it all and no row is null, else unknown, as the OR of the ANDs would answer."""
    if all_null:
        return False
    if low is None or high is None:
        return None
    if not literal.overlap(low, high):
        return False
    return True if has_nulls is False and literal.cover(low, high) else None


PARTITION_TESTS: dict[str, PartitionTest] = {
    "equal": _partition_comparison(operator.eq),
    "lessThan": _partition_comparison(operator.lt),
    "lessThanOrEqual": _partition_comparison(operator.le),
    "greaterThan": _partition_comparison(operator.gt),
    "greaterThanOrEqual": _partition_comparison(operator.ge),
    "in": _partition_in,
    "inRanges": _partition_in_ranges,
    "isNull": _partition_is_null,
}
STATS_TESTS: dict[str, StatsTest] = {
    "equal": _stats_equal,
    "lessThan": _stats_less_than,
    "lessThanOrEqual": _stats_less_or_equal,
    "greaterThan": _stats_greater_than,
    "greaterThanOrEqual": _stats_greater_or_equal,
    "in": _stats_in,
    "inRanges": _stats_in_ranges,
    "isNull": _stats_is_null,
}
