"""Iceberg snapshots and their changes as Delta actions (pure, given pyiceberg objects)."""

from __future__ import annotations

from functools import partial
from typing import Any

from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation

from share_store.errors import UnsupportedOperation
from share_store.iceberg.deletes import CorruptDeleteFile, VectorSource
from share_store.iceberg.equality.positions import EqualityResolver
from share_store.iceberg.schema import (
    kernel_unreadable_columns,
    names_changed,
    schema_string,
    uses_timestamp_ntz,
)
from share_store.iceberg.stats import delta_stats, identity_partition_columns, partition_values
from share_store.tables.active_files import FileSet
from share_store.tables.snapshot import TableSnapshot


def renamed_columns(table: Any) -> list[str]:
    """Columns whose name ever meant another field: only then is column mapping needed."""
    return names_changed(table.metadata.schemas, table.schema())


def protocol_for(schema: Schema, column_mapping: bool, deletion_vectors: bool = False) -> dict[str, Any]:
    features = ["columnMapping"] if column_mapping else []
    if deletion_vectors:
        features.append("deletionVectors")
    if uses_timestamp_ntz(schema):
        features.append("timestampNtz")
    # Writer version 4 (or the changeDataFeed feature) is what makes
    # delta.enableChangeDataFeed meaningful; readers check it before reading changes.
    if not features:
        return {"minReaderVersion": 1, "minWriterVersion": 4}
    writer = [*features, "changeDataFeed"]
    return {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": writer,
    }


def without_deletion_vectors(protocol: dict[str, Any]) -> dict[str, Any]:
    """A protocol that no longer needs deletion vectors (the files' deletes are materialized)."""
    features = [f for f in protocol.get("readerFeatures", []) if f != "deletionVectors"]
    if not features:
        return {"minReaderVersion": 1, "minWriterVersion": 4}
    writer = [f for f in protocol.get("writerFeatures", []) if f != "deletionVectors"]
    return protocol | {"readerFeatures": features, "writerFeatures": writer}


def metadata_for(table: Any, schema: Schema, partition_columns: list[str]) -> dict[str, Any]:
    # Column mapping by field id only when a rename makes names ambiguous: readers
    # (delta-kernel-rs's change data feed among them) support plain tables best.
    column_mapping = bool(renamed_columns(table))
    properties = table.metadata.properties or {}
    configuration = {"delta.enableChangeDataFeed": "true"}  # changes come from snapshots, always
    if column_mapping:
        configuration["delta.columnMapping.mode"] = "id"
        configuration["delta.columnMapping.maxColumnId"] = str(table.metadata.last_column_id)
    metadata: dict[str, Any] = {
        "id": str(table.metadata.table_uuid),
        "name": table.name()[-1],
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema_string(schema, column_mapping=column_mapping),
        "partitionColumns": partition_columns,
        "configuration": configuration,
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
    table: Any,
    version: int,
    snapshot_id: int,
    schema: Schema,
    tasks: list[Any],
    deletes: VectorSource | None = None,
    equality: EqualityResolver | None = None,
) -> TableSnapshot:
    """The snapshot's data files as `add`s; row-level deletes become their deletion vectors.

    `deletes` reads the delete files, `equality` resolves the equality deletes planning
    took out; without `deletes`, a snapshot with deletes is refused.
    """
    snap = table.metadata.snapshot_by_id(snapshot_id)
    timestamp = snap.timestamp_ms if snap else int(table.metadata.last_updated_ms)
    columns = _spec_columns(table, schema, {task.file.spec_id for task in tasks})
    adds = [file_action(task.file, table, schema, columns, timestamp) for task in tasks]
    refusals: dict[str, str] = {}
    try:
        vectors = _deletion_vectors(tasks, adds, deletes, equality)
    except UnsupportedOperation as error:
        reason = (
            f"Iceberg snapshot {snapshot_id} has row-level deletes that cannot be served: {error.message}"
        )
        refusals = {"parquet": reason, "delta": reason}
        vectors = 0
    except CorruptDeleteFile as error:
        # Said for the provider's sake; "table files missing" and outages keep their own words.
        error.message = f"Iceberg snapshot {snapshot_id}: {error.message}"
        raise
    # With deletion vectors, the parquet format is refused by the generic check
    # (`check_parquet_readable`), which names the delta format as the way to read.
    unreadable = kernel_unreadable_columns(schema)
    if unreadable:
        refusals.setdefault(
            "delta",
            "columns of Iceberg type fixed, uuid or time (" + ", ".join(unreadable) + ") have no Delta type "
            "that delta-format readers accept; read this table with responseformat=parquet",
        )
    renamed = renamed_columns(table)
    if renamed:
        refusals.setdefault(
            "parquet",
            "columns were renamed or re-added since files were written (" + ", ".join(renamed) + "); "
            "readers matching columns by name would read them wrong. Use responseformat=delta, which "
            "matches by field id.",
        )
    return TableSnapshot(
        version=version,
        protocol=protocol_for(schema, column_mapping=bool(renamed), deletion_vectors=bool(vectors)),
        metadata=metadata_for(table, schema, columns),
        adds=FileSet(adds),
        refusals=refusals,
        native_column_names=True,
    )


def _deletion_vectors(
    tasks: list[Any],
    adds: list[dict[str, Any]],
    deletes: VectorSource | None,
    equality: EqualityResolver | None,
) -> int:
    """Attach each data file's deletion vector to its add; how many files have one."""
    if equality is not None and deletes is None:
        raise UnsupportedOperation("its delete files cannot be read here")
    vectors = 0
    for task, add in zip(tasks, adds, strict=True):
        # Resolved only when the vector is not known already (the snapshot's index).
        resolve = partial(equality.positions, task.file) if equality and equality.applies(task.file) else None
        if (
            not task.delete_files
            and resolve is None
            and not (deletes and deletes.may_delete(task.file.file_path))
        ):
            continue
        if deletes is None:
            raise UnsupportedOperation("its delete files cannot be read here")
        descriptor = deletes.descriptor(task.file.file_path, task.delete_files, resolve)
        if descriptor is not None:
            add["deletionVector"] = descriptor
            vectors += 1
    return vectors


class ChangesThroughDeletes(Exception):
    """A snapshot that adds or drops delete files: its changes come from `changes_between`."""


def snapshot_changes(
    before: TableSnapshot | None, after: TableSnapshot, snapshot: Any, timestamp: int
) -> list[dict[str, Any]]:
    """One snapshot's commit as actions: its commit info, its metadata where the schema changed,
    and `changes_between` the snapshot before it and this one."""
    operation = snapshot.summary.operation.value if snapshot is not None and snapshot.summary else "unknown"
    actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": timestamp, "operation": operation}}]
    if before is None or before.metadata.get("schemaString") != after.metadata.get("schemaString"):
        actions.append({"metaData": after.metadata})
    return actions + as_data_change(changes_between(before, after, timestamp), operation)


def as_data_change(actions: list[dict[str, Any]], operation: str) -> list[dict[str, Any]]:
    """The file actions of a snapshot, marked `dataChange: false` when its operation is `replace`.

    Iceberg's `replace` (compaction, a rewrite of delete files, a change of file format) adds and
    removes files "without changing table data": as Delta's OPTIMIZE, its files are no change, so
    the change data feed and streaming readers skip them instead of reading every row deleted and
    inserted again.
    """
    if operation != Operation.REPLACE.value:
        return actions
    return [
        {kind: body | {"dataChange": False} for kind, body in action.items()}
        if "add" in action or "remove" in action
        else action
        for action in actions
    ]


def changes_between(
    before: TableSnapshot | None, after: TableSnapshot, timestamp: int
) -> list[dict[str, Any]]:
    """The `add`s and `remove`s that turn one snapshot's files into the next's.

    A data file whose deletion vector changed is removed with its old vector and
    added with its new one, as Delta records a DELETE: readers of the change data
    feed take the deleted rows from the difference of the two vectors.
    """
    earlier = {add["path"]: add for add in (before.adds if before else ())}
    actions: list[dict[str, Any]] = []
    for add in after.adds:
        prior = earlier.pop(add["path"], None)
        if prior is not None and prior.get("deletionVector") == add.get("deletionVector"):
            continue
        if prior is not None:
            actions.append({"remove": _removal(prior, timestamp)})
        actions.append({"add": add | {"modificationTime": timestamp}})
    actions += [{"remove": _removal(prior, timestamp)} for prior in earlier.values()]
    return actions


def _removal(add: dict[str, Any], timestamp: int) -> dict[str, Any]:
    kept = ("path", "partitionValues", "size", "deletionVector")
    return {key: add[key] for key in kept if key in add} | {
        "dataChange": True,
        "deletionTimestamp": timestamp,
    }


def changes_of_snapshot(table: Any, snapshot_id: int, previous_schema: Schema | None) -> list[dict[str, Any]]:
    """The Delta actions of one snapshot: the data files it added and removed.

    Raises `ChangesThroughDeletes` for a snapshot whose manifests add or drop
    delete files: which rows those delete is known only from the snapshots.
    """
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
                raise ChangesThroughDeletes(snapshot_id)
            action = file_action(entry.data_file, table, schema, columns, snap.timestamp_ms)
            if entry.status == ManifestEntryStatus.ADDED:
                actions.append({"add": action})
            else:
                action.pop("stats")
                action.pop("modificationTime")
                actions.append({"remove": action | {"deletionTimestamp": snap.timestamp_ms}})
    return as_data_change(actions, operation)
