"""The `table` commands' spellings of what the catalog takes: dotted namespaces, partition fields.

Checked before anything is written, so that bad input changes nothing.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.exceptions import ValidationError
from pyiceberg.partitioning import PARTITION_FIELD_ID_START, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    IdentityTransform,
    Transform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
    parse_transform,
)

from share_store.catalog.names import check_namespace
from share_store.errors import InvalidParameter


def dotted_namespace(text: str) -> tuple[str, ...]:
    """`sales.eu` → ("sales", "eu"): the CLI's spelling of a nested namespace."""
    return check_namespace(tuple(text.split(".")))


def partition_spec(schema: Schema, fields: list[str]) -> PartitionSpec:
    """`FIELD[:TRANSFORM]` each, in order, with fresh field ids from 1000 as Iceberg numbers them."""
    made: list[PartitionField] = []
    for position, text in enumerate(fields):
        source, colon, transform_text = text.rpartition(":")
        if not colon:
            source, transform_text = text, "identity"
        try:
            field = schema.find_field(source)
        except ValueError:
            raise InvalidParameter(
                f"invalid partition {text!r}: the schema has no field {source!r}"
            ) from None
        try:
            transform = parse_transform(transform_text.strip().lower())
        except (ValueError, ValidationError):
            transform = UnknownTransform(transform=transform_text)
        # pyiceberg parses `bucket[0]` and `truncate[0]`, which no engine can write.
        if isinstance(transform, UnknownTransform) or str(transform).endswith("[0]"):
            raise InvalidParameter(
                f"invalid partition {text!r}: unknown transform {transform_text!r} (use "
                "identity, year, month, day, hour, bucket[N], truncate[W] or void)"
            )
        if not transform.can_transform(field.field_type):
            raise InvalidParameter(
                f"invalid partition {text!r}: {transform} cannot partition {source!r} ({field.field_type})"
            )
        name = _partition_name(source, transform)
        if any(existing.name == name for existing in made):
            raise InvalidParameter(f"invalid partition {text!r}: partition field {name!r} is given twice")
        made.append(PartitionField(field.field_id, PARTITION_FIELD_ID_START + position, transform, name))
    return PartitionSpec(*made, spec_id=0)


def _partition_name(source: str, transform: Transform[Any, Any]) -> str:
    """The partition field's name as pyiceberg names those it adds (`ts_day`, `id_bucket_16`)."""
    if isinstance(transform, IdentityTransform):
        return source
    if isinstance(transform, BucketTransform):
        return f"{source}_bucket_{transform.num_buckets}"
    if isinstance(transform, TruncateTransform):
        return f"{source}_trunc_{transform.width}"
    return f"{source}_null" if isinstance(transform, VoidTransform) else f"{source}_{transform}"
