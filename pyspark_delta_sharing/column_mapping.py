"""Delta column mapping (`name` and `id` modes): which Parquet field holds each logical column.

Under column mapping a Delta schema gives each field, nested ones included, a
`delta.columnMapping.physicalName` (the name in Parquet files and in
`partitionValues`) and a `delta.columnMapping.id` (the Parquet field id). In
`name` mode readers match by physical name, in `id` mode by field id; users
only ever see the logical names. Pure functions over the schema's JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PHYSICAL_NAME = "delta.columnMapping.physicalName"
FIELD_ID = "delta.columnMapping.id"
MODES = ("none", "name", "id")


@dataclass(frozen=True)
class Column:
    """One field of the table schema: its logical name, how files name it, and its children.

    Arrays have one child (`element`), maps two (`key`, `value`), matched by
    position; struct children are matched by physical name or field id.
    """

    name: str
    physical: str
    field_id: int | None = None
    kind: str = "leaf"  # leaf, struct, array or map
    children: tuple[Column, ...] = ()

    @property
    def renamed(self) -> bool:
        """Whether files name this field, or anything inside it, otherwise than users do."""
        return self.physical != self.name or any(child.renamed for child in self.children)

    def child(self, name: str) -> Column | None:
        for child in self.children:
            if child.name == name:
                return child
        lowered = name.lower()
        return next((child for child in self.children if child.name.lower() == lowered), None)


def mode(configuration: dict[str, str] | None) -> str:
    """The table's column mapping mode, `none` when unset."""
    value = (configuration or {}).get("delta.columnMapping.mode", "none").lower()
    if value not in MODES:
        raise ValueError(f"unsupported delta.columnMapping.mode {value!r}")
    return value


def _column(name: str, data_type: Any, metadata: dict[str, Any], mapped: bool) -> Column:
    physical = str(metadata.get(PHYSICAL_NAME, name)) if mapped else name
    raw_id = metadata.get(FIELD_ID) if mapped else None
    field_id = int(raw_id) if raw_id is not None else None
    if isinstance(data_type, dict):
        kind = data_type.get("type")
        if kind == "struct":
            children = tuple(
                _column(f["name"], f["type"], f.get("metadata") or {}, mapped) for f in data_type["fields"]
            )
            return Column(name, physical, field_id, "struct", children)
        if kind == "array":
            element = _column("element", data_type["elementType"], {}, mapped)
            return Column(name, physical, field_id, "array", (element,))
        if kind == "map":
            key = _column("key", data_type["keyType"], {}, mapped)
            value = _column("value", data_type["valueType"], {}, mapped)
            return Column(name, physical, field_id, "map", (key, value))
    return Column(name, physical, field_id)


def table_columns(schema_string: str, column_mapping_mode: str) -> Column:
    """The table's schema as a `struct` Column, with physical names and ids when mapped."""
    schema = json.loads(schema_string)
    return _column("", schema, {}, column_mapping_mode != "none")


def logical_schema(schema_string: str) -> dict[str, Any]:
    """The schema users see: Delta's own field metadata (mapping, identity, type changes) dropped."""

    def clean(data_type: Any) -> Any:
        if not isinstance(data_type, dict):
            return data_type
        kind = data_type.get("type")
        if kind == "struct":
            fields = []
            for field in data_type["fields"]:
                metadata = {
                    k: v for k, v in (field.get("metadata") or {}).items() if not k.startswith("delta.")
                }
                fields.append(field | {"type": clean(field["type"]), "metadata": metadata})
            return data_type | {"fields": fields}
        if kind == "array":
            return data_type | {"elementType": clean(data_type["elementType"])}
        if kind == "map":
            return data_type | {
                "keyType": clean(data_type["keyType"]),
                "valueType": clean(data_type["valueType"]),
            }
        return data_type

    cleaned: dict[str, Any] = clean(json.loads(schema_string))
    return cleaned


def partition_keys(table: Column, partition_columns: list[str]) -> dict[str, str]:
    """Logical partition column → the key its values have in `partitionValues`."""
    keys = {}
    for name in partition_columns:
        column = table.child(name)
        keys[name] = column.physical if column else name
    return keys
