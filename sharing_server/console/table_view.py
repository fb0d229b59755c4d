"""What the console's table page shows, read through the server's own table readers.

The same `TableReader` that answers recipients gives the version, files,
schema, history and the preview rows, so the page shows what a recipient
would get: the files of the snapshot as the parquet format serves them, with
partition values put back and columns named as the schema names them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from share_store.errors import ShareStoreError
from share_store.model import SharedTable
from share_store.tables.reader import TableReader
from share_store.tables.snapshot import TableSnapshot

HISTORY_VERSIONS = 20
PREVIEW_ROWS = 100
INTEGERS = {"byte", "short", "integer", "long"}
FLOATS = {"float", "double"}


@dataclass
class Column:
    """One field of the schema, its nested fields under it."""

    name: str
    type: str
    nullable: bool
    children: list[Column] = field(default_factory=list)


@dataclass
class Version:
    version: int
    timestamp: int
    operation: str
    rows_added: int | None
    rows_removed: int | None


@dataclass
class Preview:
    columns: list[str]
    rows: list[list[Any]]
    #: Why no rows are shown (a format the preview cannot read), if so.
    unavailable: str | None = None


@dataclass
class TableDetails:
    version: int
    size: int
    files: int
    schema: list[Column]
    partition_columns: list[str]
    change_data_feed: bool
    history: list[Version]
    preview: Preview


def columns_of(schema: dict[str, Any]) -> list[Column]:
    """A Delta schema (struct) as nested columns; arrays and maps show their element's fields."""
    return [
        _column(item["name"], item["type"], bool(item.get("nullable", True))) for item in schema["fields"]
    ]


def _column(name: str, kind: Any, nullable: bool) -> Column:
    if isinstance(kind, str):
        return Column(name, kind, nullable)
    if kind["type"] == "struct":
        return Column(name, "struct", nullable, columns_of(kind))
    if kind["type"] == "array":
        element = _column("element", kind["elementType"], bool(kind.get("containsNull", True)))
        return Column(name, f"array<{element.type}>", nullable, element.children)
    if kind["type"] == "map":
        key = _column("key", kind["keyType"], False)
        value = _column("value", kind["valueType"], bool(kind.get("valueContainsNull", True)))
        return Column(name, f"map<{key.type}, {value.type}>", nullable, value.children)
    return Column(name, str(kind.get("type")), nullable)


def _rows_of(actions: list[dict[str, Any]], kind: str) -> int | None:
    """Rows the `kind` actions ("add" or "remove") of a commit carry, None if any lacks stats."""
    total = 0
    for action in actions:
        if kind not in action:
            continue
        stats = action[kind].get("stats")
        if not stats:
            return None
        try:
            total += int(json.loads(stats)["numRecords"])
        except (ValueError, KeyError, TypeError):
            return None
    return total


def history(reader: TableReader, listing: Any, snapshot: TableSnapshot) -> list[Version]:
    """The newest versions, newest first: time, operation, rows added and removed."""
    versions = []
    for commit in reversed(reader.commits(listing, snapshot)[-HISTORY_VERSIONS:]):
        actions = reader.commit(listing, commit.version)
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        versions.append(
            Version(
                commit.version,
                commit.timestamp,
                str(info.get("operation", "—")),
                _rows_of(actions, "add"),
                _rows_of(actions, "remove"),
            )
        )
    return versions


def _typed(value: str | None, kind: Any) -> Any:
    """A partition value, kept as text in the log, as its column's type."""
    if value is None or not isinstance(kind, str):
        return value
    if kind in INTEGERS:
        return int(value)
    if kind in FLOATS:
        return float(value)
    if kind == "boolean":
        return value.lower() == "true"
    if kind == "date":
        return date.fromisoformat(value)
    if kind.startswith("timestamp"):
        return datetime.fromisoformat(value)
    return value


def _physical(item: dict[str, Any], snapshot: TableSnapshot) -> str:
    if snapshot.column_mapping_mode == "none" or snapshot.native_column_names:
        return item["name"]
    return (item.get("metadata") or {}).get("delta.columnMapping.physicalName", item["name"])


def _first_rows(reader: TableReader, path: str, count: int) -> pa.Table:
    """The first `count` rows of one data file, reading no more row groups than they need."""
    with reader.storage.open(*reader.locate(path)) as handle:
        parquet = pq.ParquetFile(handle)
        batch = next(parquet.iter_batches(batch_size=count), None)
        return parquet.schema_arrow.empty_table() if batch is None else pa.Table.from_batches([batch])


def preview(reader: TableReader, snapshot: TableSnapshot, limit: int = PREVIEW_ROWS) -> Preview:
    """The first `limit` rows of the snapshot, from its files as the parquet format serves them."""
    fields = json.loads(snapshot.metadata["schemaString"])["fields"]
    names = [item["name"] for item in fields]
    refusal = snapshot.refusals.get("parquet")
    if refusal:
        return Preview(names, [], f"Not previewed: {refusal}")
    served = reader.for_parquet(snapshot)
    partitions = set(snapshot.partition_columns)
    rows: list[list[Any]] = []
    for add in served.adds:
        if len(rows) >= limit:
            break
        if add.get("deletionVector"):
            return Preview(names, [], "Not previewed: the table's files have deletion vectors.")
        data = _first_rows(reader, add["path"], limit - len(rows))
        values = add.get("partitionValues") or {}
        columns: list[list[Any]] = []
        for item in fields:
            physical = _physical(item, snapshot)
            if item["name"] in partitions:
                raw = values.get(physical, values.get(item["name"]))
                columns.append([_typed(raw, item["type"])] * data.num_rows)
            elif physical in data.column_names:
                columns.append(data.column(physical).to_pylist())
            else:  # a column added after this file was written
                columns.append([None] * data.num_rows)
        rows.extend(list(row) for row in zip(*columns, strict=True))
    return Preview(names, rows)


def details(reader: TableReader, table: SharedTable) -> TableDetails:
    listing = reader.listing()
    snapshot = reader.snapshot(None, listing)
    schema = json.loads(snapshot.metadata["schemaString"])
    cdf = snapshot.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"
    return TableDetails(
        version=snapshot.version,
        size=snapshot.size,
        files=snapshot.num_files,
        schema=columns_of(schema),
        partition_columns=snapshot.partition_columns,
        change_data_feed=cdf or table.is_iceberg,
        history=history(reader, listing, snapshot),
        preview=_safe_preview(reader, snapshot),
    )


def _safe_preview(reader: TableReader, snapshot: TableSnapshot) -> Preview:
    """The preview, or why there is none: the rest of the page stands without it."""
    try:
        return preview(reader, snapshot)
    except ShareStoreError as error:
        return Preview([], [], f"Not previewed: {error.message}")
    except Exception as error:  # noqa: BLE001 - a file the preview cannot read is no reason for a 500
        return Preview([], [], f"Not previewed: the data files could not be read ({type(error).__name__}).")


def cell(value: Any) -> str:
    """A preview cell as text: None as 'null', nested values as JSON."""
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    if isinstance(value, pa.Scalar):
        return str(value.as_py())
    return str(value)
