"""Iceberg metadata for a shared Delta table, written once per version to the cache of derived files.

Iceberg engines read a Delta share through the REST facade as an Iceberg v2
table whose data files are the Delta table's own. Per Delta version this
writes, under `<cache prefix>iceberg/<table id>/<schema fingerprint>/`:

- `<version>/data-<random>.avro`: a manifest of every live data file
  (partition values, row count, size), `<version>/deletes-<random>.avro` when
  files carry deletion vectors, and `<version>/snap.avro`, the manifest list,
  written last: its presence means the version is complete, so a crash leaves
  nothing half-read, and two writers racing (replicas) each write manifests of
  their own, so whichever list lands names manifests that match it;
- `deletes/<hash>.parquet`: a v2 position-delete file per deletion vector,
  named by the data file and vector, so versions that keep a vector share it.
  (v3 deletion vectors would point into the Delta files directly, but
  pyiceberg neither writes v3 manifests nor reads a vector out of a file that
  is not Puffin; position deletes read everywhere.)
- `metadata/<latest>-<snapshots>-t.metadata.json`: the table metadata, whose `location` is
  the folder of this fingerprint (holding `metadata/`: engines that find the file relative to
  the location, ClickHouse, find it; nothing is written into the provider's Delta table), one
  snapshot per shared Delta version (snapshot id and sequence number are the
  version + 1), the newest `versions_kept` (`[iceberg] delta_snapshots`) when history is shared, else the
  latest alone.

Everything is content-addressed by version and schema, so replicas share it
and a restart reuses it; only the current schema is used for every snapshot
(a Delta table without column mapping only ever adds columns).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from share_store.delta.deletion_vectors import z85_decode
from share_store.delta.reader import DeltaTableReader
from share_store.errors import UnsupportedOperation
from share_store.iceberg.deletes import positions
from share_store.iceberg.from_delta import (
    FieldIds,
    IcebergSchema,
    iceberg_schema,
    partition_spec,
    partition_value,
)
from share_store.storage.base import ObjectStorage
from share_store.tables.snapshot import TableSnapshot

POSITION_DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"2147483545"}),
    ]
)


@dataclass(frozen=True)
class GeneratedTable:
    metadata_location: str
    metadata: dict[str, Any]
    #: (bucket, key) of the data and delete files the shown snapshots reach, and the metadata file.
    files: frozenset[tuple[str, str]]
    #: (bucket, key prefix) of each shown version's manifests and manifest list.
    version_prefixes: tuple[tuple[str, str], ...]
    #: (bucket, key prefix) under which everything generated for this table lies.
    generated_prefix: tuple[str, str]


class _Upload(io.BytesIO):
    def __init__(self, storage: ObjectStorage, bucket: str, key: str) -> None:
        super().__init__()
        self._target = (storage, bucket, key)

    def close(self) -> None:
        if not self.closed:
            storage, bucket, key = self._target
            storage.write(bucket, key, self.getvalue())
        super().close()


def _output_file(storage: ObjectStorage, bucket: str, key: str) -> Any:
    """A pyiceberg `OutputFile` that writes the whole object on close (atomic: one PUT or rename)."""
    from pyiceberg.io import OutputFile

    class StorageOutput(OutputFile):
        def __len__(self) -> int:
            found = storage.stat(bucket, key)
            return 0 if found is None else found.size

        def exists(self) -> bool:
            return storage.stat(bucket, key) is not None

        def to_input_file(self) -> Any:
            raise NotImplementedError

        def create(self, overwrite: bool = False) -> Any:
            return _Upload(storage, bucket, key)

    return StorageOutput(f"s3://{bucket}/{key}")


class DeltaAsIceberg:
    """The Iceberg view of one shared Delta table, generated into the cache on demand."""

    def __init__(
        self,
        reader: DeltaTableReader,
        table_id: str,
        cache_bucket: str,
        cache_prefix: str,
        versions_kept: int,
        field_ids: FieldIds | None = None,
    ) -> None:
        self.reader = reader
        #: Ids the generated schema must give its fields (by physical path), where the data
        #: files carry ids of their own: a restricted Iceberg table's, its source's.
        self.field_ids = field_ids
        self.storage = reader.storage
        self.table_id = table_id
        self.cache_bucket = cache_bucket
        self.cache_prefix = cache_prefix
        self.versions_kept = versions_kept

    def _uri(self, location: tuple[str, str]) -> str:
        return f"s3://{location[0]}/{location[1]}"

    def generate(self, history_shared: bool) -> GeneratedTable:
        listing = self.reader.listing()
        latest = self.reader.snapshot(None, listing)
        commits = self.reader.commits(listing, latest)
        times = {commit.version: commit.timestamp for commit in commits}
        wanted = sorted(times)[-self.versions_kept :] if history_shared else [latest.version]
        ids = (
            dataclasses.replace(self.field_ids, by_path=dict(self.field_ids.by_path))
            if self.field_ids
            else FieldIds()
        )
        schema = iceberg_schema(latest.schema, ids)
        spec = partition_spec(latest.partition_columns, schema)
        fingerprint = hashlib.sha256(
            json.dumps([schema.schema, spec, schema.name_mapping], sort_keys=True).encode()
        ).hexdigest()[:16]
        table_root = f"{self.cache_prefix}iceberg/{self.table_id}/"
        base = table_root + fingerprint
        snapshots: list[dict[str, Any]] = []
        files: set[tuple[str, str]] = set()
        parent: int | None = None
        for version in wanted:
            snapshot = latest if version == latest.version else self.reader.snapshot(version, listing)
            manifest_list = self._write_version(snapshot, schema, spec, base, parent, files)
            entry: dict[str, Any] = {
                "snapshot-id": version + 1,
                "sequence-number": version + 1,
                "timestamp-ms": times.get(version, 0),
                "manifest-list": self._uri(manifest_list),
                "summary": {
                    "operation": "append" if parent is None else "overwrite",
                    "delta-version": str(version),
                },
                "schema-id": 0,
            }
            if parent is not None:
                entry["parent-snapshot-id"] = parent
            snapshots.append(entry)
            parent = version + 1
        metadata = self._metadata(latest, schema, spec, ids, snapshots, self._uri((self.cache_bucket, base)))
        # `-t`: the metadata whose `location` is the folder it is in (files before it named the Delta
        # table's folder; a cached one must not be served with the other location).
        key = f"{base}/metadata/{latest.version}-{len(snapshots)}-t.metadata.json"
        if self.storage.stat(self.cache_bucket, key) is None:
            self.storage.write(self.cache_bucket, key, json.dumps(metadata).encode())
        files.add((self.cache_bucket, key))
        return GeneratedTable(
            self._uri((self.cache_bucket, key)),
            metadata,
            frozenset(files),
            tuple((self.cache_bucket, f"{base}/{version}/") for version in wanted),
            (self.cache_bucket, table_root),
        )

    def _metadata(
        self,
        latest: TableSnapshot,
        schema: IcebergSchema,
        spec: dict[str, Any],
        ids: FieldIds,
        snapshots: list[dict[str, Any]],
        location: str,
    ) -> dict[str, Any]:
        """`location`: the generated folder, which holds `metadata/` (the data files are named whole,
        in the Delta table's folder). Engines that find the metadata file relative to the table's
        location (ClickHouse) then find it, and nothing is written into the provider's table."""
        current = snapshots[-1]
        return {
            "format-version": 2,
            "table-uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"delta-sharing:{self.table_id}")),
            "location": location,
            "last-sequence-number": current["sequence-number"],
            "last-updated-ms": current["timestamp-ms"],
            "last-column-id": ids.last,
            "current-schema-id": 0,
            "schemas": [{**schema.schema, "schema-id": 0, "identifier-field-ids": []}],
            "default-spec-id": 0,
            "partition-specs": [spec],
            "last-partition-id": max([f["field-id"] for f in spec["fields"]], default=999),
            "properties": {
                "schema.name-mapping.default": json.dumps(schema.name_mapping),
                "delta.version": str(latest.version),
            },
            "current-snapshot-id": current["snapshot-id"],
            "snapshots": snapshots,
            "snapshot-log": [
                {"snapshot-id": s["snapshot-id"], "timestamp-ms": s["timestamp-ms"]} for s in snapshots
            ],
            "metadata-log": [],
            "sort-orders": [{"order-id": 0, "fields": []}],
            "default-sort-order-id": 0,
            "refs": {"main": {"snapshot-id": current["snapshot-id"], "type": "branch"}},
        }

    # -- one version's manifests ---------------------------------------------------------

    def _write_version(
        self,
        snapshot: TableSnapshot,
        schema: IcebergSchema,
        spec: dict[str, Any],
        base: str,
        parent: int | None,
        files: set[tuple[str, str]],
    ) -> tuple[str, str]:
        from pyiceberg.manifest import (
            DataFile,
            DataFileContent,
            FileFormat,
            ManifestEntry,
            ManifestEntryStatus,
            ManifestWriterV2,
            write_manifest_list,
        )
        from pyiceberg.partitioning import PartitionSpec
        from pyiceberg.schema import Schema
        from pyiceberg.typedef import Record

        from share_store.iceberg.delete_manifests import DeleteManifestWriter

        version = snapshot.version
        snapshot_id = version + 1
        list_key = f"{base}/{version}/snap.avro"
        partition_types = [(f["name"], schema.top_level[f["name"]][1]) for f in spec["fields"]]
        iceberg = Schema.model_validate({**schema.schema, "schema-id": 0})
        partitioning = PartitionSpec.model_validate(spec)
        data_entries, delete_entries = [], []
        # A version written before needs only its files named (for a grant without history).
        written = self.storage.stat(self.cache_bucket, list_key) is not None
        for add in snapshot.adds:
            location = self.reader.locate(add["path"])
            files.add(location)
            if written:
                if add.get("deletionVector"):
                    files.add((self.cache_bucket, self._delete_key(add["deletionVector"], location, base)))
                continue
            values = add.get("partitionValues") or {}
            partition = Record(
                *(
                    partition_value(values.get(schema.physical.get(n, n), values.get(n)), t)
                    for n, t in partition_types
                )
            )
            data = DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=self._uri(location),
                file_format=FileFormat.PARQUET,
                partition=partition,
                record_count=self._record_count(add, location),
                file_size_in_bytes=int(add["size"]),
            )
            data.spec_id = 0
            data_entries.append(data)
            if add.get("deletionVector"):
                delete = self._position_deletes(add["deletionVector"], location, base)
                files.add(delete[0])
                deletes = DataFile.from_args(
                    content=DataFileContent.POSITION_DELETES,
                    file_path=self._uri(delete[0]),
                    file_format=FileFormat.PARQUET,
                    partition=partition,
                    record_count=delete[1],
                    file_size_in_bytes=delete[2],
                )
                deletes.spec_id = 0
                delete_entries.append(deletes)
        if written:
            return self.cache_bucket, list_key
        manifests = []
        writer_id = uuid.uuid4().hex[:12]
        for name, entries, writer_class in (
            ("data", data_entries, ManifestWriterV2),
            ("deletes", delete_entries, DeleteManifestWriter),
        ):
            if not entries:  # pyiceberg writes no empty manifest: a version of no files lists none
                continue
            key = f"{base}/{version}/{name}-{writer_id}.avro"
            output = _output_file(self.storage, self.cache_bucket, key)
            with writer_class(partitioning, iceberg, output, snapshot_id, "deflate") as writer:
                for entry in entries:
                    writer.add(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=entry
                        )
                    )
            manifests.append(writer.to_manifest_file())
        output = _output_file(self.storage, self.cache_bucket, list_key)
        with write_manifest_list(2, output, snapshot_id, parent, snapshot_id, "deflate") as manifest_list:
            manifest_list.add_manifests(manifests)
        return self.cache_bucket, list_key

    def _record_count(self, add: dict[str, Any], location: tuple[str, str]) -> int:
        stats = add.get("stats")
        if isinstance(stats, str):
            stats = json.loads(stats)
        if isinstance(stats, dict) and stats.get("numRecords") is not None:
            return int(stats["numRecords"])
        with self.storage.open(*location) as stream:  # no stats: the Parquet footer knows
            return int(pq.ParquetFile(stream).metadata.num_rows)

    def _position_deletes(
        self, descriptor: dict[str, Any], data: tuple[str, str], base: str
    ) -> tuple[tuple[str, str], int, int]:
        """The position-delete file of one deletion vector: its location, rows and size."""
        key = self._delete_key(descriptor, data, base)
        found = self.storage.stat(self.cache_bucket, key)
        count = int(descriptor.get("cardinality") or 0)
        if found is not None:
            return (self.cache_bucket, key), count, found.size
        payload = self._vector_payload(descriptor)
        rows = sorted(positions(payload))
        path = self._uri(data)
        table = pa.table(
            [pa.array([path] * len(rows), pa.string()), pa.array(rows, pa.int64())],
            schema=POSITION_DELETE_SCHEMA,
        )
        sink = io.BytesIO()
        pq.write_table(table, sink)
        self.storage.write(self.cache_bucket, key, sink.getvalue())
        return (self.cache_bucket, key), len(rows), len(sink.getvalue())

    def _delete_key(self, descriptor: dict[str, Any], data: tuple[str, str], base: str) -> str:
        """Where one deletion vector's position-delete file is: named by the data file and vector."""
        identity = json.dumps([data, descriptor], sort_keys=True).encode()
        return f"{base.rsplit('/', 1)[0]}/deletes/{hashlib.sha256(identity).hexdigest()[:32]}.parquet"

    def _vector_payload(self, descriptor: dict[str, Any]) -> bytes:
        if descriptor.get("storageType") == "i":
            return z85_decode(descriptor["pathOrInlineDv"])
        location = self.reader.locate_dv(descriptor)
        if location is None:
            raise UnsupportedOperation("a deletion vector without a file or inline bytes")
        offset = int(descriptor.get("offset") or 0)
        size = int(descriptor["sizeInBytes"])
        with self.storage.open(*location) as stream:
            stream.seek(offset + 4)
            return stream.read(size)
