"""A Delta table at one version, read with deltalake.

deltalake replays the log (checkpoints of every kind included) and hands us
the active files as an Arrow table; we keep that table as it is rather than
turning 100k files into 100k dicts, and map rows to protocol actions only
while streaming them out.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, DeltaProtocolError, TableNotFoundError

from share_store.delta.log import Commit, CommitLog
from share_store.errors import MalformedRequest, TableFilesMissing, UnsupportedOperation
from share_store.storage.base import ObjectStorage


@dataclass(frozen=True)
class DeltaProtocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeltaSnapshot:
    version: int
    protocol: DeltaProtocol
    metadata: dict[str, Any]
    files: pa.Table
    partition_types: dict[str, str] = field(default_factory=dict)

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    @property
    def size(self) -> int:
        return int(pa.compute.sum(self.files["size_bytes"]).as_py() or 0) if self.files.num_rows else 0

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.get("configuration") or {}

    @property
    def column_mapping_mode(self) -> str:
        return self.configuration.get("delta.columnMapping.mode", "none")

    @property
    def has_deletion_vectors(self) -> bool:
        return (
            "deletionVectors" in self.protocol.reader_features
            or self.configuration.get("delta.enableDeletionVectors", "false").lower() == "true"
        )

    @property
    def change_data_feed_enabled(self) -> bool:
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    def file_keys(self, table_path: str) -> list[str]:
        return [file_key(table_path, path) for path in self.files["path"].to_pylist()]


def file_key(table_path: str, log_path: str) -> str:
    """Object key of a data file; paths in the log are relative, URL-encoded URIs."""
    if "://" in log_path or log_path.startswith("/"):
        # Absolute paths point outside the shared table: sharing them would hand
        # out URLs to objects the provider never shared.
        raise UnsupportedOperation("tables with absolute file paths cannot be shared")
    return f"{table_path}/{unquote(log_path)}"


def _sanitize(error: Exception, uri: str) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text.replace(uri, "<table>")


class DeltaTableReader:
    """One shared Delta table: its commits and snapshots (cached by version)."""

    CACHE_SIZE = 8

    def __init__(self, storage: ObjectStorage, bucket: str, path: str) -> None:
        self.storage = storage
        self.bucket = bucket
        self.path = path
        self.uri = storage.table_uri(bucket, path)
        self.log = CommitLog(storage, bucket, path)
        self._snapshots: OrderedDict[int, DeltaSnapshot] = OrderedDict()
        self._checked: set[int] = set()
        self._lock = threading.Lock()

    def latest_version(self) -> int:
        return self.log.list_commits()[-1].version

    def commits(self, snapshot: DeltaSnapshot | None = None) -> list[Commit]:
        config = snapshot.configuration if snapshot else {}
        ict_from = None
        if config.get("delta.enableInCommitTimestamps", "false").lower() == "true":
            ict_from = int(config.get("delta.inCommitTimestampEnablementVersion", "0"))
        return self.log.list_commits(ict_from)

    def snapshot(self, version: int | None = None) -> DeltaSnapshot:
        if version is None:
            version = self.latest_version()
        with self._lock:
            cached = self._snapshots.get(version)
            if cached is not None:
                self._snapshots.move_to_end(version)
                return cached
        snapshot = self._load(version)
        with self._lock:
            self._snapshots[version] = snapshot
            while len(self._snapshots) > self.CACHE_SIZE:
                self._snapshots.popitem(last=False)
        return snapshot

    def check_files_exist(self, snapshot: DeltaSnapshot) -> None:
        """`TableFilesMissing` if any active data file is gone (vacuumed, lost)."""
        if snapshot.version in self._checked:
            return
        if self.storage.missing(self.bucket, f"{self.path}/", snapshot.file_keys(self.path)):
            raise TableFilesMissing()
        self._checked.add(snapshot.version)

    def _load(self, version: int) -> DeltaSnapshot:
        try:
            table = DeltaTable(self.uri, version=version, storage_options=self.storage.deltalake_options())
            files = pa.table(table.get_add_actions(flatten=False))
            protocol = table.protocol()
            meta = table.metadata()
            schema_string = table.schema().to_json()
        except TableNotFoundError as error:
            raise TableFilesMissing() from error
        except DeltaProtocolError as error:
            raise UnsupportedOperation(f"table cannot be read: {_sanitize(error, self.uri)}") from error
        except DeltaError as error:
            message = _sanitize(error, self.uri)
            if "not found" in message.lower() or "no such file" in message.lower():
                raise TableFilesMissing() from error
            raise MalformedRequest(f"Cannot load table version {version}: {message}") from error
        except FileNotFoundError as error:
            raise TableFilesMissing() from error
        metadata = {
            "id": meta.id,
            "name": meta.name,
            "description": meta.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": list(meta.partition_columns),
            "configuration": dict(meta.configuration),
            "createdTime": meta.created_time,
        }
        fields = {f["name"]: f["type"] for f in json.loads(schema_string)["fields"]}
        return DeltaSnapshot(
            version=version,
            protocol=DeltaProtocol(
                min_reader_version=protocol.min_reader_version,
                min_writer_version=protocol.min_writer_version,
                reader_features=tuple(protocol.reader_features or ()),
                writer_features=tuple(protocol.writer_features or ()),
            ),
            metadata=metadata,
            files=files,
            partition_types={c: fields.get(c, "string") for c in meta.partition_columns},
        )
