"""A Delta table's schema, partitioning and partition values in Iceberg's terms (pure functions).

The Iceberg REST facade serves Delta tables as Iceberg tables: their data
files stay where they are, and Iceberg metadata that names them is generated
(`share_store/iceberg/delta_metadata.py`). Field ids are the column mapping
ids where the table has them (Delta then writes them into the Parquet files
too); otherwise they are assigned, and a name mapping
(`schema.name-mapping.default`) tells Iceberg readers which Parquet column
each id is, by its physical name. Partition columns become identity
partitions: Delta leaves them out of the data files, and Iceberg readers take
identity partition values from the manifests.
"""

from __future__ import annotations

import datetime
import decimal
import re
from dataclasses import dataclass, field
from typing import Any

from share_store.errors import UnsupportedOperation

MAPPING_ID = "delta.columnMapping.id"
PHYSICAL_NAME = "delta.columnMapping.physicalName"
PARTITION_FIELD_BASE = 1000
PRIMITIVES = {
    "string": "string",
    "long": "long",
    "integer": "int",
    "short": "int",
    "byte": "int",
    "double": "double",
    "float": "float",
    "boolean": "boolean",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamptz",
    "timestamp_ntz": "timestamp",
}
DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
EPOCH = datetime.date(1970, 1, 1)


@dataclass
class FieldIds:
    """Ids by column path, stable across the versions of one table: assigned once, in order."""

    by_path: dict[tuple[str, ...], int] = field(default_factory=dict)
    last: int = 0

    def id_for(self, path: tuple[str, ...], mapped: int | None) -> int:
        if mapped is not None:
            self.last = max(self.last, mapped)
            return mapped
        if path not in self.by_path:
            self.last += 1
            self.by_path[path] = self.last
        return self.by_path[path]


def source_field_ids(schema: Any) -> FieldIds:
    """The ids of a pyiceberg `Schema`'s fields by path, as `iceberg_schema` looks them up:
    generated metadata then names each column by the id its data files carry."""
    from pyiceberg.types import ListType, MapType, StructType

    ids = FieldIds()

    def walk(kind: Any, path: tuple[str, ...]) -> None:
        if isinstance(kind, StructType):
            for child in kind.fields:
                ids.by_path[(*path, child.name)] = child.field_id
                walk(child.field_type, (*path, child.name))
        elif isinstance(kind, ListType):
            ids.by_path[(*path, "element")] = kind.element_id
            walk(kind.element_type, (*path, "element"))
        elif isinstance(kind, MapType):
            ids.by_path[(*path, "key")] = kind.key_id
            ids.by_path[(*path, "value")] = kind.value_id
            walk(kind.key_type, (*path, "key"))
            walk(kind.value_type, (*path, "value"))

    walk(schema.as_struct(), ())
    ids.last = max(ids.by_path.values(), default=0)
    return ids


def reserve_mapped_ids(delta_type: Any, ids: FieldIds) -> None:
    """Note every column mapping id first, so assigned ids never collide with them."""
    if isinstance(delta_type, dict):
        for child in delta_type.get("fields", []):
            mapped = child.get("metadata", {}).get(MAPPING_ID)
            if mapped is not None:
                ids.last = max(ids.last, int(mapped))
            reserve_mapped_ids(child["type"], ids)
        for key in ("elementType", "keyType", "valueType"):
            if key in delta_type:
                reserve_mapped_ids(delta_type[key], ids)


def _type(delta_type: Any, path: tuple[str, ...], ids: FieldIds, mapping: list[dict[str, Any]]) -> Any:
    """The Iceberg type of `delta_type`; `mapping` gets the name mapping of its children."""
    if isinstance(delta_type, str):
        if delta_type in PRIMITIVES:
            return PRIMITIVES[delta_type]
        found = DECIMAL.fullmatch(delta_type)
        if found:
            return f"decimal({found.group(1)}, {found.group(2)})"
        raise UnsupportedOperation(f"Delta type '{delta_type}' has no Iceberg equivalent here")
    kind = delta_type.get("type")
    if kind == "struct":
        return {"type": "struct", "fields": [_field(f, path, ids, mapping) for f in delta_type["fields"]]}
    if kind == "array":
        element_id = ids.id_for((*path, "element"), None)
        children: list[dict[str, Any]] = []
        element = _type(delta_type["elementType"], (*path, "element"), ids, children)
        mapping.append(_mapping(element_id, "element", children))
        return {
            "type": "list",
            "element-id": element_id,
            "element": element,
            "element-required": not delta_type.get("containsNull", True),
        }
    if kind == "map":
        key_id = ids.id_for((*path, "key"), None)
        value_id = ids.id_for((*path, "value"), None)
        key_children: list[dict[str, Any]] = []
        value_children: list[dict[str, Any]] = []
        key = _type(delta_type["keyType"], (*path, "key"), ids, key_children)
        value = _type(delta_type["valueType"], (*path, "value"), ids, value_children)
        mapping.append(_mapping(key_id, "key", key_children))
        mapping.append(_mapping(value_id, "value", value_children))
        return {
            "type": "map",
            "key-id": key_id,
            "key": key,
            "value-id": value_id,
            "value": value,
            "value-required": not delta_type.get("valueContainsNull", True),
        }
    raise UnsupportedOperation(f"Delta type '{kind}' has no Iceberg equivalent here")


def _mapping(field_id: int, name: str, children: list[dict[str, Any]]) -> dict[str, Any]:
    entry: dict[str, Any] = {"field-id": field_id, "names": [name]}
    if children:
        entry["fields"] = children
    return entry


def _field(
    delta_field: dict[str, Any], parent: tuple[str, ...], ids: FieldIds, mapping: list[dict[str, Any]]
) -> dict[str, Any]:
    metadata = delta_field.get("metadata", {})
    physical = metadata.get(PHYSICAL_NAME, delta_field["name"])
    path = (*parent, physical)
    mapped = metadata.get(MAPPING_ID)
    field_id = ids.id_for(path, int(mapped) if mapped is not None else None)
    children: list[dict[str, Any]] = []
    iceberg_type = _type(delta_field["type"], path, ids, children)
    mapping.append(_mapping(field_id, physical, children))
    return {
        "id": field_id,
        "name": delta_field["name"],
        "required": not delta_field.get("nullable", True),
        "type": iceberg_type,
    }


@dataclass(frozen=True)
class IcebergSchema:
    schema: dict[str, Any]  # Iceberg schema JSON (without schema-id)
    name_mapping: list[dict[str, Any]]
    top_level: dict[str, tuple[int, Any]]  # column name → (field id, Iceberg type)
    physical: dict[str, str]  # column name → physical name


def iceberg_schema(delta_schema: dict[str, Any], ids: FieldIds) -> IcebergSchema:
    """The Iceberg schema of a Delta `schemaString` (parsed), with its name mapping."""
    reserve_mapped_ids(delta_schema, ids)
    mapping: list[dict[str, Any]] = []
    fields = [_field(f, (), ids, mapping) for f in delta_schema["fields"]]
    top_level = {f["name"]: (f["id"], f["type"]) for f in fields}
    physical = {
        f["name"]: f.get("metadata", {}).get(PHYSICAL_NAME, f["name"]) for f in delta_schema["fields"]
    }
    return IcebergSchema({"type": "struct", "fields": fields}, mapping, top_level, physical)


def partition_spec(partition_columns: list[str], schema: IcebergSchema) -> dict[str, Any]:
    """Identity partitions on the Delta partition columns (spec id 0)."""
    fields = []
    for index, column in enumerate(partition_columns):
        if column not in schema.top_level:
            raise UnsupportedOperation(f"partition column '{column}' is not in the table's schema")
        fields.append(
            {
                "source-id": schema.top_level[column][0],
                "field-id": PARTITION_FIELD_BASE + index,
                "name": column,
                "transform": "identity",
            }
        )
    return {"spec-id": 0, "fields": fields}


def partition_value(text: str | None, iceberg_type: Any) -> Any:
    """A Delta partition value (always text, None for null) as Iceberg's manifests hold it."""
    if text is None:
        return None
    if iceberg_type in ("int", "long"):
        return int(text)
    if iceberg_type in ("double", "float"):
        return float(text)
    if iceberg_type == "boolean":
        return text.lower() == "true"
    if iceberg_type == "date":
        return (datetime.date.fromisoformat(text) - EPOCH).days
    if iceberg_type in ("timestamp", "timestamptz"):
        moment = datetime.datetime.fromisoformat(text.replace(" ", "T"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return int(moment.timestamp() * 1_000_000)
    if isinstance(iceberg_type, str) and iceberg_type.startswith("decimal"):
        return decimal.Decimal(text)
    if iceberg_type == "string":
        return text
    if iceberg_type == "binary":
        return text.encode()
    raise UnsupportedOperation(f"partition values of type {iceberg_type} are not supported")
