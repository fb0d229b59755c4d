"""`jsonPredicateHints` parsed and validated, and the values they compare converted.

Evaluation (`compiled_hints`) is three-valued: True (every row of the file
matches), False (no row can match) and None (unknown). A file is skipped only
on False, so a hint can never drop matching rows; NOT is sound because it
flips only certainties. Any hint that fails to parse or validate filters
nothing, as the protocol asks of best-effort hints; one of more nodes than the
server evaluates is refused instead, so that its sender learns why.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, date, datetime
from typing import Any

from share_store.errors import InvalidParameter

MAX_HINT_BYTES = 1024 * 1024
MAX_DEPTH = 100
MAX_NODES = 10_000
COMPARISONS = {"equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"}
#: Each comparison with its sides swapped (`literal < column` is `column > literal`).
MIRRORED = {
    "lessThan": "greaterThan",
    "greaterThan": "lessThan",
    "lessThanOrEqual": "greaterThanOrEqual",
    "greaterThanOrEqual": "lessThanOrEqual",
    "equal": "equal",
}
VALUE_TYPES = {"bool", "int", "long", "string", "date", "float", "double", "timestamp"}


class PredicateError(ValueError):
    pass


class HintTooLarge(InvalidParameter):
    """A hint of more nodes than the server evaluates: refused (400), unlike a malformed one."""


def parse_hint(text: str, max_nodes: int = MAX_NODES) -> dict[str, Any] | None:
    """The validated predicate tree, or None when the hint must be ignored.

    Raises HintTooLarge for a tree of more than `max_nodes` nodes.
    """
    if not text or len(text.encode()) > MAX_HINT_BYTES:
        return None
    try:
        tree = json.loads(text)
        _Validator(max_nodes).node(tree, 1)
    except (ValueError, TypeError, RecursionError):
        return None
    return tree


class _Validator:
    """Checks each node's shape, the tree's depth and its number of nodes."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.nodes = 0

    def node(self, node: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise PredicateError("predicate tree is too deep")
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise HintTooLarge(
                f"jsonPredicateHints has more than {self.max_nodes:,} nodes, the most this server "
                "evaluates: send a smaller hint, or none (hints only spare reading files)"
            )
        _check_shape(node)
        for child in node.get("children") or []:
            self.node(child, depth + 1)


def _check_shape(node: Any) -> None:
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
        if len(children) != 2 or any(
            not isinstance(c, dict) or c.get("op") not in ("column", "literal") for c in children
        ):
            raise PredicateError(f"{op} needs two leaf children")
        if children[0].get("valueType") != children[1].get("valueType"):
            raise PredicateError(f"{op} compares values of different types")
    elif op == "isNull":
        if len(children) != 1 or not isinstance(children[0], dict) or children[0].get("op") != "column":
            raise PredicateError("isNull needs one column child")
    elif op in ("and", "or"):
        if len(children) < 2:
            raise PredicateError(f"{op} needs at least two children")
    elif op == "not":
        if len(children) != 1:
            raise PredicateError("not needs one child")
    else:
        raise PredicateError(f"unknown op {op!r}")


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
