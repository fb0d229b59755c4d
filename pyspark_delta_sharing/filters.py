"""Spark filters → Delta Sharing `jsonPredicateHints` (pure).

Hints are best effort on the server, so Spark keeps evaluating every filter;
a filter we cannot express is simply left out of the hint.
"""

from __future__ import annotations

import json
from typing import Any

VALUE_TYPES = {
    "boolean": "bool",
    "integer": "int",
    "short": "int",
    "byte": "int",
    "long": "long",
    "string": "string",
    "date": "date",
    "float": "float",
    "double": "double",
    "timestamp": "timestamp",
}
MAX_IN_VALUES = 20


def _leaf(name: str, value: Any, value_type: str) -> list[dict[str, Any]]:
    if value_type == "bool":
        text = "true" if value else "false"
    elif value_type == "timestamp":
        text = value.isoformat().replace("+00:00", "Z") if hasattr(value, "isoformat") else str(value)
    elif value_type == "date":
        text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    else:
        text = str(value)
    return [
        {"op": "column", "name": name, "valueType": value_type},
        {"op": "literal", "value": text, "valueType": value_type},
    ]


def _convert(spark_filter: Any, types: dict[str, str]) -> dict[str, Any] | None:
    kind = type(spark_filter).__name__
    attribute = getattr(spark_filter, "attribute", None)
    if attribute is not None:
        if len(attribute) != 1 or attribute[0] not in types:
            return None
        name = attribute[0]
        value_type = types[name]
    comparisons = {
        "EqualTo": "equal",
        "LessThan": "lessThan",
        "LessThanOrEqual": "lessThanOrEqual",
        "GreaterThan": "greaterThan",
        "GreaterThanOrEqual": "greaterThanOrEqual",
    }
    if kind in comparisons:
        if spark_filter.value is None:
            return None
        return {"op": comparisons[kind], "children": _leaf(name, spark_filter.value, value_type)}
    if kind == "In":
        values = [v for v in spark_filter.value if v is not None]
        if not values or len(values) > MAX_IN_VALUES:
            return None
        equals = [{"op": "equal", "children": _leaf(name, v, value_type)} for v in values]
        return equals[0] if len(equals) == 1 else {"op": "or", "children": equals}
    if kind == "IsNull":
        return {"op": "isNull", "children": [{"op": "column", "name": name, "valueType": value_type}]}
    if kind == "IsNotNull":
        return {
            "op": "not",
            "children": [
                {"op": "isNull", "children": [{"op": "column", "name": name, "valueType": value_type}]}
            ],
        }
    if kind == "Not":
        inner = _convert(spark_filter.child, types)
        return None if inner is None else {"op": "not", "children": [inner]}
    return None


def json_predicate_hints(filters: list[Any], column_types: dict[str, str]) -> str | None:
    """The AND of the filters we can express, as a `jsonPredicateHints` string."""
    types = {name: VALUE_TYPES[t] for name, t in column_types.items() if t in VALUE_TYPES}
    nodes = [node for node in (_convert(f, types) for f in filters) if node is not None]
    if not nodes:
        return None
    tree = nodes[0] if len(nodes) == 1 else {"op": "and", "children": nodes}
    return json.dumps(tree, separators=(",", ":"))
