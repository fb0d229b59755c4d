"""A validated `jsonPredicateHints` tree compiled once into a check of one file.

Walking the tree for every file cost a wide OR seconds per 10,000 files; the
compiled check is a tree of small functions with every literal converted beforehand.
Partition values are looked at first: a child of AND or OR that needs no stats
runs before one that does, and a file's stats are parsed only when a check
reaches them. Equalities on one column under one OR become a single set (for
partition values) or a bisection of sorted literals (for min/max stats); ranges
(`lower AND upper` bounds) on one column under one OR become one set of
intervals, searched by bisection as well (`hint_intervals`). What a leaf tests of a
partition value or of min/max stats is in `hint_leaves`.

Results are three-valued as in `predicates`: True (every row matches), False
(no row can) and None (unknown); a file is skipped only on False. AND and OR
stop at the first child that decides them. A value that cannot be converted
makes its own leaf unknown, which can never prune more than the tree without
that leaf would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from share_store.tables.actions import FileEntry
from share_store.tables.hint_intervals import Interval, Intervals
from share_store.tables.hint_leaves import PARTITION_TESTS, STATS_TESTS, PartitionTest, StatsTest
from share_store.tables.predicates import COMPARISONS, MIRRORED, PredicateError, convert

#: A compiled node: (the file's partition values, the file) -> True, False or None.
Check = Callable[[Mapping[str, Any], FileEntry], bool | None]
#: What the caller asks of each file: True/None keep it, False skips it.
FileCheck = Callable[[FileEntry], bool | None]

#: Errors a value of the log may raise when converted or compared: the leaf is then unknown.
VALUE_ERRORS = (PredicateError, ValueError, TypeError)


@dataclass(frozen=True, slots=True)
class _Compiled:
    """A compiled node and whether it may read stats (those run after partition-only siblings)."""

    check: Check
    reads_stats: bool


def _unknown(partition: Mapping[str, Any], entry: FileEntry) -> bool | None:
    return None


UNKNOWN = _Compiled(_unknown, False)


def compile_hint(
    tree: Mapping[str, Any], partition_columns: Sequence[str], names: Mapping[str, str] | None = None
) -> FileCheck:
    """The check of one file against `tree`, a tree `parse_hint` validated.

    `partition_columns` are the table's (logical names); `names` maps logical
    to physical column names under column mapping.
    """
    compiled = _Compiler(frozenset(partition_columns), dict(names or {})).node(tree)
    check = compiled.check

    def file_check(entry: FileEntry) -> bool | None:
        return check(entry.action.get("partitionValues") or {}, entry)

    return file_check


def matches_hint(
    tree: Mapping[str, Any] | None, entry: FileEntry, names: Mapping[str, str] | None = None
) -> bool:
    """False only when the hint proves the file holds no matching row (one file: listings compile once)."""
    if tree is None:
        return True
    return compile_hint(tree, entry.partition_columns, names)(entry) is not False


class _Compiler:
    def __init__(self, partition_columns: frozenset[str], names: dict[str, str]) -> None:
        self.partition_columns = partition_columns
        self.names = names

    def node(self, node: Mapping[str, Any]) -> _Compiled:
        op = node["op"]
        children = node.get("children") or []
        if op == "and":
            return _all_of([self.node(child) for child in children])
        if op == "or":
            return _any_of(self._or_children(children))
        if op == "not":
            return _negation(self.node(children[0]))
        if op == "isNull":
            column = children[0]
            return self._column(column["name"], column["valueType"], "isNull", None)
        if op in COMPARISONS:
            return self._comparison(op, children[0], children[1])
        return UNKNOWN  # a bare column or literal where a condition belongs says nothing of a file

    def _or_children(self, children: Sequence[Mapping[str, Any]]) -> list[_Compiled]:
        """OR's children compiled, equalities on one column merged into one membership test,
        and ranges on one column into one set of intervals."""
        compiled: list[_Compiled] = []
        equalities: dict[tuple[str, str], list[Any]] = {}
        ranges: dict[tuple[str, str], list[tuple[Mapping[str, Any], Interval]]] = {}
        for child in children:
            ranged = _interval(child)
            if ranged is not None:
                ranges.setdefault(ranged[0], []).append((child, ranged[1]))
                continue
            shape = _column_literal(child)
            if shape is None or shape[0] != "equal":
                compiled.append(self.node(child))
                continue
            _, column, literal = shape
            try:
                value = convert(literal["value"], column["valueType"])
            except VALUE_ERRORS:
                compiled.append(UNKNOWN)
                continue
            equalities.setdefault((column["name"], column["valueType"]), []).append(value)
        for (name, value_type), values in equalities.items():
            if len(values) == 1:
                compiled.append(self._column(name, value_type, "equal", values[0]))
            else:
                ordered = sorted(set(values))
                compiled.append(self._column(name, value_type, "in", (frozenset(ordered), ordered)))
        for (name, value_type), bounded in ranges.items():
            if len(bounded) == 1:
                compiled.append(self.node(bounded[0][0]))
                continue
            try:
                intervals = Intervals.of([interval for _, interval in bounded])
            except TypeError:  # bounds that do not order against each other: each on its own
                compiled.extend(self.node(child) for child, _ in bounded)
                continue
            compiled.append(self._column(name, value_type, "inRanges", intervals))
        return compiled

    def _comparison(self, op: str, left: Mapping[str, Any], right: Mapping[str, Any]) -> _Compiled:
        shape = _column_literal({"op": op, "children": [left, right]})
        if shape is None:
            return UNKNOWN  # two columns, or two literals: nothing a file's stats can say
        op, column, literal = shape
        try:
            value = convert(literal["value"], column["valueType"])
        except VALUE_ERRORS:
            return UNKNOWN
        return self._column(column["name"], column["valueType"], op, value)

    def _column(self, name: str, value_type: str, test: str, literal: Any) -> _Compiled:
        """A leaf on one column: `test` (an op, "in" or "isNull") against `literal`.

        Leaves are partials of module-level functions rather than closures: a
        hint of thousands of them then makes a fraction of the objects, which
        the garbage collector would otherwise walk again and again.
        """
        physical = self.names.get(name, name)
        tests = (PARTITION_TESTS[test], STATS_TESTS[test])
        if name in self.partition_columns:
            return _Compiled(partial(_partition_leaf, physical, value_type, tests[0], literal), False)
        if "." in name:  # stats of nested columns are not looked up
            return _Compiled(partial(_partition_or_unknown, physical, value_type, tests[0], literal), False)
        return _Compiled(partial(_any_leaf, physical, value_type, tests, literal), True)


def _partition_leaf(
    physical: str,
    value_type: str,
    test: PartitionTest,
    literal: Any,
    partition: Mapping[str, Any],
    entry: FileEntry,
) -> bool | None:
    try:
        return test(convert(partition.get(physical), value_type), literal)
    except VALUE_ERRORS:
        return None


def _partition_or_unknown(
    physical: str,
    value_type: str,
    test: PartitionTest,
    literal: Any,
    partition: Mapping[str, Any],
    entry: FileEntry,
) -> bool | None:
    if physical not in partition:
        return None
    try:
        return test(convert(partition[physical], value_type), literal)
    except VALUE_ERRORS:
        return None


def _any_leaf(
    physical: str,
    value_type: str,
    tests: tuple[PartitionTest, StatsTest],
    literal: Any,
    partition: Mapping[str, Any],
    entry: FileEntry,
) -> bool | None:
    """A column not known as a partition column: the file's partition value if it has one, else its stats."""
    try:
        if physical in partition:
            return tests[0](convert(partition[physical], value_type), literal)
        stats = entry.parsed_stats
        records = stats.get("numRecords")
        if not isinstance(records, int):
            return None
        nulls = (stats.get("nullCount") or {}).get(physical)
        if isinstance(nulls, int):
            has_nulls: bool | None = nulls > 0
            all_null: bool | None = nulls == records and nulls > 0
        else:
            has_nulls = all_null = None
        low = (stats.get("minValues") or {}).get(physical)
        high = (stats.get("maxValues") or {}).get(physical)
        if low is None or high is None or isinstance(low, dict):
            return tests[1](literal, None, None, has_nulls, all_null)
        return tests[1](literal, convert(low, value_type), convert(high, value_type), has_nulls, all_null)
    except VALUE_ERRORS:
        return None


def _column_literal(node: Mapping[str, Any]) -> tuple[str, Mapping[str, Any], Mapping[str, Any]] | None:
    """A comparison as (op, column, literal), mirrored when the literal is on the left; else None."""
    op = node.get("op")
    if op not in COMPARISONS:
        return None
    left, right = node["children"]
    if left["op"] == "literal" and right["op"] == "column":
        return MIRRORED[op], right, left
    if left["op"] == "column" and right["op"] == "literal":
        return op, left, right
    return None


LOWER_BOUNDS = {"greaterThanOrEqual": 0, "greaterThan": 1}
UPPER_BOUNDS = {"lessThanOrEqual": 1, "lessThan": 0}


def _interval(node: Mapping[str, Any]) -> tuple[tuple[str, str], Interval] | None:
    """An AND of a lower and an upper bound on one column, as ((name, type), interval); else None."""
    if node.get("op") != "and" or len(node.get("children") or []) != 2:
        return None
    first, second = (_column_literal(child) for child in node["children"])
    if first is None or second is None:
        return None
    if first[0] in UPPER_BOUNDS:
        first, second = second, first
    (lower_op, lower_column, lower), (upper_op, upper_column, upper) = first, second
    column = (lower_column["name"], lower_column["valueType"])
    if lower_op not in LOWER_BOUNDS or upper_op not in UPPER_BOUNDS:
        return None
    if (upper_column["name"], upper_column["valueType"]) != column:
        return None
    try:
        low, high = convert(lower["value"], column[1]), convert(upper["value"], column[1])
    except VALUE_ERRORS:
        return None  # compiled as it stands: its leaf is unknown
    return column, ((low, LOWER_BOUNDS[lower_op]), (high, UPPER_BOUNDS[upper_op]))


# -- combinators ---------------------------------------------------------------------------


def _ordered(children: list[_Compiled]) -> tuple[list[Check], bool]:
    # Partition-only children first: they are cheap and often decide alone.
    ordered = sorted(children, key=lambda child: child.reads_stats)
    return [child.check for child in ordered], any(child.reads_stats for child in ordered)


def _all_of(children: list[_Compiled]) -> _Compiled:
    return _decided_by(children, False)


def _any_of(children: list[_Compiled]) -> _Compiled:
    return _decided_by(children, True)


def _decided_by(children: list[_Compiled], decisive: bool) -> _Compiled:
    """AND (`decisive` False) or OR (True): the first child that answers `decisive` decides.

    Otherwise the answer is unknown (None) if any child's was, else `not decisive`.
    """
    checks, reads_stats = _ordered(children)
    if len(checks) == 1:
        return _Compiled(checks[0], reads_stats)
    otherwise = not decisive

    def check(partition: Mapping[str, Any], entry: FileEntry) -> bool | None:
        unknown = False
        for child in checks:
            result = child(partition, entry)
            if result is decisive:
                return decisive
            if result is None:
                unknown = True
        return None if unknown else otherwise

    return _Compiled(check, reads_stats)


def _negation(child: _Compiled) -> _Compiled:
    inner = child.check

    def check(partition: Mapping[str, Any], entry: FileEntry) -> bool | None:
        result = inner(partition, entry)
        return None if result is None else not result

    return _Compiled(check, child.reads_stats)
