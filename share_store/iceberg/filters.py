"""`jsonPredicateHints` → pyiceberg row filters, so manifests and files are pruned while planning.

Only what converts exactly is converted; anything else becomes `AlwaysTrue`
(no pruning), since hints are best effort and must never drop matching rows.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    BooleanExpression,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    Or,
)

from share_store.delta.predicates import convert

COMPARISONS = {
    "equal": EqualTo,
    "lessThan": LessThan,
    "lessThanOrEqual": LessThanOrEqual,
    "greaterThan": GreaterThan,
    "greaterThanOrEqual": GreaterThanOrEqual,
}
MIRRORED = {
    "lessThan": "greaterThan",
    "greaterThan": "lessThan",
    "lessThanOrEqual": "greaterThanOrEqual",
    "greaterThanOrEqual": "lessThanOrEqual",
    "equal": "equal",
}


def _literal(value: str, value_type: str) -> Any:
    converted = convert(value, value_type)
    # pyiceberg takes dates and timestamps as ISO strings and converts them per column type.
    if isinstance(converted, datetime | date):
        return converted.isoformat()
    return converted


def row_filter(tree: dict[str, Any] | None, columns: set[str]) -> BooleanExpression:
    if tree is None:
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
        parts = [_convert(child, columns) for child in children]
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
