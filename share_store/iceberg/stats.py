"""Pure mapping of Iceberg data files to Delta `add` actions (partition values, stats)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    BinaryType,
    DateType,
    FixedType,
    IcebergType,
    PrimitiveType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
UNSTATTED = (BinaryType, FixedType, UUIDType, TimeType)


def identity_partition_columns(spec: PartitionSpec, schema: Schema) -> list[str]:
    """Source columns of identity partitions: the only ones Delta can call partition columns."""
    return [
        schema.find_field(field.source_id).name
        for field in spec.fields
        if isinstance(field.transform, IdentityTransform)
    ]


def partition_string(value: Any, field_type: IcebergType) -> str | None:
    """An identity partition value in the protocol's string form."""
    if value is None:
        return None
    if isinstance(field_type, DateType) and isinstance(value, int):
        return (date(1970, 1, 1) + timedelta(days=value)).isoformat()
    if isinstance(field_type, TimestampType | TimestamptzType) and isinstance(value, int):
        moment = EPOCH + timedelta(microseconds=value)
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def partition_values(data_file: DataFile, spec: PartitionSpec, schema: Schema) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for position, field in enumerate(spec.fields):
        if not isinstance(field.transform, IdentityTransform):
            continue
        source = schema.find_field(field.source_id)
        values[source.name] = partition_string(data_file.partition[position], source.field_type)
    return values


def _stat_json(value: Any, field_type: PrimitiveType) -> Any:
    if isinstance(field_type, DateType):
        return (date(1970, 1, 1) + timedelta(days=value)).isoformat()
    if isinstance(field_type, TimestampType | TimestamptzType):
        moment = EPOCH + timedelta(microseconds=value)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return text + ("Z" if isinstance(field_type, TimestamptzType) else "")
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, float) and value != value:  # NaN bounds say nothing
        return None
    return value


# One encoder for every file: json.dumps with options builds a new one per call.
_STATS_ENCODER = json.JSONEncoder(separators=(",", ":"))


def delta_stats(data_file: DataFile, schema: Schema) -> str:
    """Delta `stats` for a data file, from the manifest's bounds and counts (top-level columns)."""
    minimums: dict[str, Any] = {}
    maximums: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    lower = data_file.lower_bounds or {}
    upper = data_file.upper_bounds or {}
    null_counts = data_file.null_value_counts or {}
    for field in schema.fields:
        if not isinstance(field.field_type, PrimitiveType) or isinstance(field.field_type, UNSTATTED):
            continue
        if field.field_id in null_counts:
            nulls[field.name] = int(null_counts[field.field_id])
        for bounds, target in ((lower, minimums), (upper, maximums)):
            raw = bounds.get(field.field_id)
            if raw is not None:
                value = _stat_json(from_bytes(field.field_type, raw), field.field_type)
                if value is not None:
                    target[field.name] = value
    stats: dict[str, Any] = {"numRecords": int(data_file.record_count)}
    if minimums:
        stats["minValues"] = minimums
    if maximums:
        stats["maxValues"] = maximums
    if nulls:
        stats["nullCount"] = nulls
    return _STATS_ENCODER.encode(stats)
