"""Pure mapping from a Delta snapshot to Delta Sharing protocol actions.

No I/O here: URLs come in already signed, so every function can be tested on
a snapshot alone.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from share_store.delta.predicates import ColumnRange, convert, evaluate
from share_store.delta.snapshot import DeltaSnapshot
from share_store.errors import UnsupportedOperation


@dataclass(frozen=True)
class FileEntry:
    """One active data file of a snapshot, as the log describes it."""

    path: str
    size: int
    modification_time: int
    partition_values: dict[str, str | None]
    num_records: int | None
    min_values: dict[str, Any] | None
    max_values: dict[str, Any] | None
    null_count: dict[str, Any] | None

    @property
    def stats(self) -> str | None:
        if self.num_records is None:
            return None
        stats: dict[str, Any] = {"numRecords": self.num_records}
        for name, values in (
            ("minValues", self.min_values),
            ("maxValues", self.max_values),
            ("nullCount", self.null_count),
        ):
            cleaned = _json_values(values)
            if cleaned:
                stats[name] = cleaned
        return json.dumps(stats, separators=(",", ":"))


def file_id(path: str, hash_kind: str = "parquet") -> str:
    """Stable file id: md5 of the log path (parquet) or sha256 (delta), as the reference."""
    digest = hashlib.md5 if hash_kind == "parquet" else hashlib.sha256
    return digest(path.encode()).hexdigest()


def partition_value_string(value: Any) -> str | None:
    """A partition value in the protocol's string form."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, dict):
        return _json_values(value)
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        text = value.isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z") if value.tzinfo else text
    if isinstance(value, date):
        return value.isoformat()
    return None


def _json_values(values: dict[str, Any] | None) -> dict[str, Any] | None:
    if not values:
        return None
    result = {}
    for key, value in values.items():
        converted = _json_value(value)
        if converted is not None:
            result[key] = converted
    return result or None


def iter_file_entries(snapshot: DeltaSnapshot, batch_size: int = 2048) -> Iterator[FileEntry]:
    files = snapshot.files
    names = set(files.column_names)
    for batch in files.to_batches(max_chunksize=batch_size):
        for row in batch.to_pylist():
            partition = row.get("partition") if "partition" in names else None
            yield FileEntry(
                path=row["path"],
                size=row["size_bytes"],
                modification_time=row["modification_time"],
                partition_values={
                    column: partition_value_string((partition or {}).get(column))
                    for column in snapshot.metadata["partitionColumns"]
                },
                num_records=row.get("num_records"),
                min_values=row.get("min"),
                max_values=row.get("max"),
                null_count=row.get("null_count"),
            )


# -- format rules ---------------------------------------------------------------


def check_parquet_readable(snapshot: DeltaSnapshot) -> None:
    """Refuse tables the parquet response format cannot describe faithfully."""
    reasons = []
    if snapshot.column_mapping_mode != "none":
        reasons.append(f"delta.columnMapping.mode={snapshot.column_mapping_mode}")
    if snapshot.has_deletion_vectors:
        reasons.append("deletion vectors")
    other = set(snapshot.protocol.reader_features) - {"deletionVectors", "columnMapping"}
    if snapshot.protocol.min_reader_version > 1 and other:
        reasons.append("reader features " + ", ".join(sorted(other)))
    if reasons:
        raise UnsupportedOperation(
            "Unsupported Delta Table Properties: "
            + "; ".join(reasons)
            + ". This table can only be read with responseformat=delta."
        )


def clean_schema_string(schema_string: str) -> str:
    """Drop field metadata other than comments, as the reference server does.

    Writer-side metadata (identity high-water marks, generation expressions)
    means nothing to recipients and changes with every write.
    """
    schema = json.loads(schema_string)
    for field in schema.get("fields", []):
        metadata = field.get("metadata") or {}
        field["metadata"] = {"comment": metadata["comment"]} if "comment" in metadata else {}
    return json.dumps(schema, separators=(",", ":"))


def parquet_protocol() -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": 1}}


def parquet_metadata(
    snapshot: DeltaSnapshot, history_shared: bool, version: int | None = None
) -> dict[str, Any]:
    meta = snapshot.metadata
    body: dict[str, Any] = {"id": meta["id"]}
    if meta.get("name"):
        body["name"] = meta["name"]
    if meta.get("description"):
        body["description"] = meta["description"]
    body["format"] = {"provider": "parquet"}
    body["schemaString"] = clean_schema_string(meta["schemaString"])
    body["partitionColumns"] = meta["partitionColumns"]
    body["configuration"] = (
        {"enableChangeDataFeed": "true"} if history_shared and snapshot.change_data_feed_enabled else {}
    )
    if version is not None:
        body["version"] = version
    # Legacy Spark runs a whole extra /query to size a table when these are absent.
    body["size"] = snapshot.size
    body["numFiles"] = snapshot.num_files
    return {"metaData": body}


def parquet_file(
    entry: FileEntry, url: str, expiration: int, hash_kind: str = "parquet", version: int | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "url": url,
        "id": file_id(entry.path, hash_kind),
        "partitionValues": entry.partition_values,
        "size": entry.size,
    }
    stats = entry.stats
    if stats is not None:
        body["stats"] = stats
    if version is not None:
        body["version"] = version
    body["expirationTimestamp"] = expiration
    return {"file": body}


# -- predicate hints ---------------------------------------------------------------


def matches_hint(tree: dict[str, Any] | None, entry: FileEntry) -> bool:
    """False only when the hint proves the file holds no matching row."""
    if tree is None:
        return True

    def lookup(name: str, value_type: str) -> ColumnRange | None:
        if name in entry.partition_values:
            value = convert(entry.partition_values[name], value_type)
            return ColumnRange(value, value, value is None, value is None)
        if entry.num_records is None or "." in name:
            return None
        low = (entry.min_values or {}).get(name)
        high = (entry.max_values or {}).get(name)
        nulls = (entry.null_count or {}).get(name)
        has_nulls = None if not isinstance(nulls, int) else nulls > 0
        all_null = None if not isinstance(nulls, int) else nulls == entry.num_records and nulls > 0
        if low is None or high is None or isinstance(low, dict):
            return ColumnRange(None, None, has_nulls, all_null)
        return ColumnRange(convert(low, value_type), convert(high, value_type), has_nulls, all_null)

    return evaluate(tree, lookup) is not False
