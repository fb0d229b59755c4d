"""`jsonPredicateHints` → pyiceberg row filters, so manifests and files are pruned while planning.

Only what converts exactly is converted; anything else becomes `AlwaysTrue`
(no pruning), since hints are best effort and must never drop matching rows.

pyiceberg evaluates a filter for every manifest and data file, in Python, and
recursively (a chain of thousands of ORs overflows the stack). So equalities on
one column under an OR become one `In`, and a hint of more than PLANNED_LEAVES
leaves after that is not planned with at all: the server's own per-file check,
which runs within the request's CPU budget, is left to apply it.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, cast

from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    Or,
)

from share_store.tables.predicates import MIRRORED, convert

COMPARISONS = {
    "equal": EqualTo,
    "lessThan": LessThan,
    "lessThanOrEqual": LessThanOrEqual,
    "greaterThan": GreaterThan,
    "greaterThanOrEqual": GreaterThanOrEqual,
}


def _in(name: str, values: set[Any]) -> BooleanExpression:
    # pyiceberg's In takes (term, literals) positionally; its pydantic fields misname them for mypy.
    return cast(Any, In)(name, values)


def _literal(value: str, value_type: str) -> Any:
    converted = convert(value, value_type)
    # pyiceberg takes dates and timestamps as ISO strings and converts them per column type.
    if isinstance(converted, datetime | date):
        return converted.isoformat()
    return converted


PLANNED_LEAVES = 16


def plannable(tree: dict[str, Any]) -> bool:
    """Whether `tree` is small enough for pyiceberg to plan with (see the module's doc)."""
    return _leaves(tree) <= PLANNED_LEAVES


def _leaves(node: dict[str, Any]) -> int:
    # Trees are at most MAX_DEPTH deep (predicates validates them), so recursion is safe here.
    children = node.get("children") or []
    if node["op"] in ("and", "not"):
        return sum(_leaves(child) for child in children)
    if node["op"] == "or":
        grouped = [_equality_column(child) for child in children]
        others = sum(
            _leaves(child) for child, column in zip(children, grouped, strict=True) if column is None
        )
        return others + len({column for column in grouped if column is not None})
    return 1


def _equality_column(node: dict[str, Any]) -> str | None:
    """The column of `column = literal` (either way round); None for any other node."""
    if node["op"] != "equal":
        return None
    kinds = [child["op"] for child in node["children"]]
    if sorted(kinds) != ["column", "literal"]:
        return None
    return node["children"][kinds.index("column")]["name"]


def row_filter(tree: dict[str, Any] | None, columns: set[str]) -> BooleanExpression:
    if tree is None or not plannable(tree):
        return AlwaysTrue()
    try:
        return _convert(tree, columns)
    except (KeyError, ValueError, TypeError):
        return AlwaysTrue()


def _convert(node: dict[str, Any], columns: set[str]) -> BooleanExpression:
    op = node["op"]
    children = node.get("children") or []
    if op == "and":
        parts = [_convert(child, columns) for child in children]
        result = parts[0]
        for part in parts[1:]:
            result = And(result, part)
        return result
    if op == "or":
        parts = [_convert(child, columns) for child in children if _equality_column(child) is None]
        equal: dict[str, set[Any]] = {}
        for child in children:
            name = _equality_column(child)
            if name is not None:
                column, literal = sorted(child["children"], key=lambda leaf: leaf["op"])
                equal.setdefault(name, set()).add(_literal(literal["value"], column["valueType"]))
        # One In per column (an In of one literal is an EqualTo); a column not in the table prunes nothing.
        parts += [_in(name, values) if name in columns else AlwaysTrue() for name, values in equal.items()]
        if any(isinstance(part, AlwaysTrue) for part in parts):
            return AlwaysTrue()
        result = parts[0]
        for part in parts[1:]:
            result = Or(result, part)
        return result
    if op == "not":
        inner = _convert(children[0], columns)
        # NOT of "no pruning" cannot prune either.
        return AlwaysTrue() if isinstance(inner, AlwaysTrue) else Not(inner)
    if op == "isNull":
        name = children[0]["name"]
        return IsNull(term=name) if name in columns else AlwaysTrue()
    if op in COMPARISONS:
        left, right = children
        if left["op"] == "literal" and right["op"] == "column":
            left, right, op = right, left, MIRRORED[op]
        if left["op"] != "column" or right["op"] != "literal" or left["name"] not in columns:
            return AlwaysTrue()
        return COMPARISONS[op](left["name"], _literal(right["value"], left["valueType"]))
    return AlwaysTrue()
