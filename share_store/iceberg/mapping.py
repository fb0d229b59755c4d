"""Iceberg snapshots and their changes as Delta actions (pure, given pyiceberg objects)."""

from __future__ import annotations

from typing import Any

from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
from pyiceberg.schema import Schema

from share_store.delta.snapshot import DeltaSnapshot
from share_store.iceberg.schema import names_changed, schema_string, uses_timestamp_ntz
from share_store.iceberg.stats import delta_stats, identity_partition_columns, partition_values


def protocol_for(schema: Schema) -> dict[str, Any]:
    features = ["columnMapping"] + (["timestampNtz"] if uses_timestamp_ntz(schema) else [])
    return {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": features,
    }


def metadata_for(table: Any, schema: Schema, partition_columns: list[str]) -> dict[str, Any]:
    properties = table.metadata.properties or {}
    metadata: dict[str, Any] = {
        "id": str(table.metadata.table_uuid),
        "name": table.name()[-1],
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema_string(schema, column_mapping=True),
        "partitionColumns": partition_columns,
        "configuration": {
            "delta.columnMapping.mode": "id",
            "delta.columnMapping.maxColumnId": str(table.metadata.last_column_id),
            # Changes are derived from snapshots, so every version has them.
            "delta.enableChangeDataFeed": "true",
        },
        "createdTime": int(table.metadata.last_updated_ms),
    }
    if properties.get("comment"):
        metadata["description"] = properties["comment"]
    return metadata


def _spec_columns(table: Any, schema: Schema, spec_ids: set[int]) -> list[str]:
    """Identity partition columns shared by every spec the files use."""
    specs = table.specs()
    current = identity_partition_columns(table.spec(), schema)
    columns = [c for c in current if all(c in identity_partition_columns(specs[i], schema) for i in spec_ids)]
    return [c for c in columns if schema.find_field(c, case_sensitive=True)]


def file_action(
    data_file: Any, table: Any, schema: Schema, columns: list[str], timestamp: int
) -> dict[str, Any]:
    spec = table.specs()[data_file.spec_id]
    values = partition_values(data_file, spec, schema)
    return {
        "path": data_file.file_path,
        "partitionValues": {column: values.get(column) for column in columns},
        "size": int(data_file.file_size_in_bytes),
        "modificationTime": timestamp,
        "dataChange": True,
        "stats": delta_stats(data_file, schema),
    }


def snapshot_from_tasks(
    table: Any, version: int, snapshot_id: int, schema: Schema, tasks: list[Any]
) -> DeltaSnapshot:
    snap = table.metadata.snapshot_by_id(snapshot_id)
    timestamp = snap.timestamp_ms if snap else int(table.metadata.last_updated_ms)
    columns = _spec_columns(table, schema, {task.file.spec_id for task in tasks})
    adds = [file_action(task.file, table, schema, columns, timestamp) for task in tasks]
    refusals: dict[str, str] = {}
    deletes = sum(len(task.delete_files) for task in tasks)
    if deletes:
        reason = (
            f"this Iceberg snapshot has row-level deletes ({deletes} delete file(s) apply); "
            "serving its data files alone would return deleted rows"
        )
        refusals = {"parquet": reason, "delta": reason}
    renamed = names_changed(table.metadata.schemas, schema)
    if renamed:
        refusals.setdefault(
            "parquet",
            "columns were renamed or re-added since files were written (" + ", ".join(renamed) + "); "
            "readers matching columns by name would read them wrong. Use responseformat=delta, which "
            "matches by field id.",
        )
    return DeltaSnapshot(
        version=version,
        protocol=protocol_for(schema),
        metadata=metadata_for(table, schema, columns),
        adds=adds,
        refusals=refusals,
        native_column_names=True,
    )


def changes_of_snapshot(table: Any, snapshot_id: int, previous_schema: Schema | None) -> list[dict[str, Any]]:
    """The Delta actions of one snapshot: the data files it added and removed."""
    from share_store.errors import UnsupportedOperation

    snap = table.metadata.snapshot_by_id(snapshot_id)
    if snap is None:
        return [{"commitInfo": {"timestamp": int(table.metadata.last_updated_ms), "operation": "CREATE"}}]
    schema = (
        table.schemas().get(snap.schema_id, table.schema()) if snap.schema_id is not None else table.schema()
    )
    operation = snap.summary.operation.value if snap.summary else "unknown"
    actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": snap.timestamp_ms, "operation": operation}}]
    if previous_schema is None or previous_schema.schema_id != schema.schema_id:
        actions.append(
            {"metaData": metadata_for(table, schema, identity_partition_columns(table.spec(), schema))}
        )
    columns = identity_partition_columns(table.spec(), schema)
    for manifest in snap.manifests(table.io):
        if manifest.added_snapshot_id != snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.snapshot_id != snapshot_id or entry.status == ManifestEntryStatus.EXISTING:
                continue
            if entry.data_file.content != DataFileContent.DATA:
                raise UnsupportedOperation(
                    f"Iceberg snapshot {snapshot_id} changes rows through delete files, which the change "
                    "data feed cannot express yet"
                )
            action = file_action(entry.data_file, table, schema, columns, snap.timestamp_ms)
            if entry.status == ManifestEntryStatus.ADDED:
                actions.append({"add": action})
            else:
                action.pop("stats")
                action.pop("modificationTime")
                actions.append({"remove": action | {"deletionTimestamp": snap.timestamp_ms}})
    return actions
