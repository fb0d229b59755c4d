"""A row filter printed back as SQL, and the key a bound filter's derived files are kept under."""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from share_store.restrictions.row_filters import (
    And,
    Between,
    Compare,
    InList,
    Like,
    Not,
    Or,
    Predicate,
    RecipientProperty,
    Value,
)


def to_sql(predicate: Predicate) -> str:
    """The filter as SQL again (how `share info` and the audit show a bound filter)."""
    if isinstance(predicate, And):
        return f"({to_sql(predicate.left)} AND {to_sql(predicate.right)})"
    if isinstance(predicate, Or):
        return f"({to_sql(predicate.left)} OR {to_sql(predicate.right)})"
    if isinstance(predicate, Not):
        return f"(NOT {to_sql(predicate.operand)})"
    column = _quoted(predicate.column.name)
    if isinstance(predicate, Compare):
        return f"{column} {predicate.op} {_value_sql(predicate.value)}"
    if isinstance(predicate, InList):
        return f"{column} IN ({', '.join(_value_sql(v) for v in predicate.values)})"
    if isinstance(predicate, Between):
        return f"{column} BETWEEN {_value_sql(predicate.low)} AND {_value_sql(predicate.high)}"
    if isinstance(predicate, Like):
        return f"{column} LIKE {_value_sql(predicate.pattern)}"
    return f"{column} IS NULL"


def key(predicate: Predicate | None, columns: tuple[str, ...] | None, physical: tuple[Any, ...] = ()) -> str:
    """What a bound restriction's derived files are kept under: the same rows and columns, the
    same key, whoever the recipient (two recipients with one nation share their files).
    `physical`: the columns' names in the files, which a rename changes."""
    text = json.dumps([to_sql(predicate) if predicate is not None else None, columns, physical], default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _value_sql(value: Value) -> str:
    if isinstance(value, RecipientProperty):
        return f"CURRENT_RECIPIENT({literal_sql(value.key)})"
    return literal_sql(value.value)


def literal_sql(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, datetime):
        return f"TIMESTAMP '{value.isoformat()}'"
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"
