"""Pure mapping of Iceberg schemas to Delta `schemaString`s."""

from __future__ import annotations

import json
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from share_store.errors import UnsupportedOperation

PRIMITIVES: dict[type, str] = {
    BooleanType: "boolean",
    IntegerType: "integer",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    DateType: "date",
    # Delta has no time-of-day type; Iceberg stores it as microseconds since midnight.
    TimeType: "long",
    TimestampType: "timestamp_ntz",
    TimestamptzType: "timestamp",
    StringType: "string",
    # Delta has no UUID type; the 16 bytes are shared as binary.
    UUIDType: "binary",
    FixedType: "binary",
    BinaryType: "binary",
}


def delta_type(field_type: IcebergType, column_mapping: bool) -> Any:
    if isinstance(field_type, DecimalType):
        return f"decimal({field_type.precision},{field_type.scale})"
    if isinstance(field_type, StructType):
        return {"type": "struct", "fields": [delta_field(f, column_mapping) for f in field_type.fields]}
    if isinstance(field_type, ListType):
        return {
            "type": "array",
            "elementType": delta_type(field_type.element_type, column_mapping),
            "containsNull": not field_type.element_required,
        }
    if isinstance(field_type, MapType):
        return {
            "type": "map",
            "keyType": delta_type(field_type.key_type, column_mapping),
            "valueType": delta_type(field_type.value_type, column_mapping),
            "valueContainsNull": not field_type.value_required,
        }
    for kind, name in PRIMITIVES.items():
        if isinstance(field_type, kind):
            return name
    raise UnsupportedOperation(f"Iceberg type {field_type} has no Delta equivalent")


def delta_field(field: NestedField, column_mapping: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if field.doc:
        metadata["comment"] = field.doc
    if column_mapping:
        # Files are matched by Iceberg field id, so renamed and dropped columns read right.
        metadata["delta.columnMapping.id"] = field.field_id
        metadata["delta.columnMapping.physicalName"] = field.name
    return {
        "name": field.name,
        "type": delta_type(field.field_type, column_mapping),
        "nullable": not field.required,
        "metadata": metadata,
    }


def schema_string(schema: Schema, column_mapping: bool) -> str:
    fields = [delta_field(field, column_mapping) for field in schema.fields]
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


def kernel_unreadable_columns(schema: Schema) -> list[str]:
    """Columns whose Parquet type Delta readers refuse for the Delta type we map them to.

    Delta has no fixed-length binary, UUID or time-of-day type; delta-kernel
    readers check Parquet types strictly (FixedSizeBinary is not binary, Time64
    is not long), while the parquet response format reads them as they are.
    """
    return [
        field.name
        for field in _all_fields(schema.as_struct())
        if isinstance(field.field_type, FixedType | UUIDType | TimeType)
    ]


def uses_timestamp_ntz(schema: Schema) -> bool:
    return any(isinstance(field.field_type, TimestampType) for field in _all_fields(schema.as_struct()))


def _all_fields(struct: StructType) -> list[NestedField]:
    found: list[NestedField] = []
    for field in struct.fields:
        found.append(field)
        kind = field.field_type
        if isinstance(kind, StructType):
            found += _all_fields(kind)
        elif isinstance(kind, ListType):
            found.append(kind.element_field)
            if isinstance(kind.element_type, StructType):
                found += _all_fields(kind.element_type)
        elif isinstance(kind, MapType):
            found += [kind.key_field, kind.value_field]
            if isinstance(kind.value_type, StructType):
                found += _all_fields(kind.value_type)
    return found


def names_changed(schemas: list[Schema], current: Schema) -> list[str]:
    """Columns whose files a reader matching by name would read wrong.

    A field id that had another name in an earlier schema (a rename), or a
    current name that belonged to another field id before (dropped and re-added).
    """
    current_fields = {field.field_id: field.name for field in _all_fields(current.as_struct())}
    current_names = {name: field_id for field_id, name in current_fields.items()}
    problems: set[str] = set()
    for schema in schemas:
        for field in _all_fields(schema.as_struct()):
            if field.field_id in current_fields and current_fields[field.field_id] != field.name:
                problems.add(current_fields[field.field_id])
            if field.name in current_names and current_names[field.name] != field.field_id:
                problems.add(field.name)
    return sorted(problems)
