"""A restricted table's top-level columns and their types, and values read as those types.

A restriction's predicate and column list name top-level columns of the table's
Delta schema (`schemaString`; an Iceberg table's snapshot is mapped to one). The
same value arrives in three spellings: a SQL literal or recipient property, a
Delta partition value (always a string), and a statistic (JSON). Each is read
into one Python value per type here, so that comparisons agree wherever they run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

INTEGERS = {"byte", "short", "integer", "long"}
FLOATS = {"float", "double"}
DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


class UnreadableValue(ValueError):
    """A value that cannot be read as its column's type."""


@dataclass(frozen=True)
class ColumnType:
    """One top-level column: its name, its kind of value, and the name its files use."""

    name: str
    #: integer, float, decimal, string, boolean, date, timestamp, timestamp_ntz, binary or other
    kind: str
    #: The column's name in the data files (Delta column mapping's physical name).
    physical: str
    #: The Delta type as the schema spells it.
    delta_type: Any = None

    @property
    def comparable(self) -> bool:
        """Whether a predicate may compare the column with a literal."""
        return self.kind not in ("binary", "other")


def kind_of(delta_type: Any) -> str:
    if not isinstance(delta_type, str):
        return "other"  # struct, array, map
    if delta_type in INTEGERS:
        return "integer"
    if delta_type in FLOATS:
        return "float"
    if DECIMAL.fullmatch(delta_type):
        return "decimal"
    if delta_type in ("string", "boolean", "date", "timestamp", "timestamp_ntz", "binary"):
        return delta_type
    return "other"


def table_columns(schema_string: str) -> dict[str, ColumnType]:
    """The schema's top-level columns by lower-cased name (SQL names match case-insensitively)."""
    schema = json.loads(schema_string)
    found: dict[str, ColumnType] = {}
    for field in schema.get("fields", []):
        metadata = field.get("metadata") or {}
        physical = metadata.get("delta.columnMapping.physicalName") or field["name"]
        found[field["name"].lower()] = ColumnType(
            field["name"], kind_of(field["type"]), physical, field["type"]
        )
    return found


def read_value(column: ColumnType, value: Any) -> Any:
    """`value` (a literal, a property, a statistic) as the column's Python value; None stays None."""
    if value is None:
        return None
    try:
        return _READERS[column.kind](value)
    except (ValueError, TypeError, InvalidOperation, KeyError) as error:
        raise UnreadableValue(f"{value!r} is not a {column.delta_type} value") from error


def read_partition_value(column: ColumnType, value: str | None) -> Any:
    """A Delta partition value (a string; None or "" for null) as the column's value."""
    if value is None or (value == "" and column.kind != "string"):
        return None
    return read_value(column, value)


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError("a boolean is not an integer")
    if isinstance(value, float | Decimal):
        if value != int(value):
            raise ValueError("not a whole number")
        return int(value)
    return int(str(value).strip())


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    return float(value)


def _decimal(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    found = Decimal(str(value).strip())
    if not found.is_finite():
        raise ValueError("not a finite number")
    return found


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError("not true or false")


def _date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value).strip()[:10])


def _timestamp(value: Any) -> datetime:
    """A timestamp with a time zone, in UTC (a value written without one is read as UTC)."""
    moment = _naive_or_aware(value)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _timestamp_ntz(value: Any) -> datetime:
    moment = _naive_or_aware(value)
    return (
        moment.replace(tzinfo=None) if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
    )


def _naive_or_aware(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


_READERS = {
    "integer": _integer,
    "float": _float,
    "decimal": _decimal,
    "string": _string,
    "boolean": _boolean,
    "date": _date,
    "timestamp": _timestamp,
    "timestamp_ntz": _timestamp_ntz,
}
