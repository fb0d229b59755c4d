"""The table snapshot: one version of a shared table, in the Delta Sharing protocol's terms.

Delta tables give it straight from their log; Iceberg tables are mapped to it
(`share_store.iceberg.mapping`). Everything past the door into tables
(`share_store.tables`) speaks of snapshots in this one type.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from share_store.tables.active_files import FileSet, UnheldFileSet


@dataclass(frozen=True)
class TableSnapshot:
    """One version of a shared table as the protocol sees it: Delta protocol and metadata
    actions and the active `add` actions, whatever format the table is kept in."""

    version: int
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    #: The active `add` actions (a list is wrapped in a `FileSet`).
    adds: FileSet
    #: Response format → why this snapshot cannot be served in it (Iceberg tables).
    refusals: dict[str, str] = field(default_factory=dict)
    #: Files name their columns as the schema does, whatever the column mapping says
    #: (Iceberg tables whose columns were never renamed).
    native_column_names: bool = False
    #: What the server derives from this snapshot once and keeps with it (pre-encoded
    #: lines). Not an `__init__` argument, so `dataclasses.replace` starts a new one.
    memo: dict[Hashable, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.adds, FileSet):
            object.__setattr__(self, "adds", FileSet(self.adds))

    @property
    def num_files(self) -> int:
        return self.adds.count

    @property
    def size(self) -> int:
        return self.adds.total_size

    @property
    def streamed(self) -> bool:
        """Whether the files are read from the log each time rather than held."""
        return isinstance(self.adds, UnheldFileSet)

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.get("configuration") or {}

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.get("partitionColumns") or [])

    @property
    def min_reader_version(self) -> int:
        return int(self.protocol.get("minReaderVersion", 1))

    @property
    def reader_features(self) -> tuple[str, ...]:
        return tuple(self.protocol.get("readerFeatures") or ())

    @property
    def column_mapping_mode(self) -> str:
        return self.configuration.get("delta.columnMapping.mode", "none")

    def narrowed(self, adds: Iterable[dict[str, Any]]) -> TableSnapshot:
        """The same version with only `adds`, some of its own files: a query's planned subset.

        It shares this snapshot's memo, so the pre-encoded lines of its files are
        the held snapshot's, made once for every query that plans its way to them.
        (They are keyed by the actions' ids: the subset's actions are this
        snapshot's own, so the ids mean the same files.)
        """
        subset = dataclasses.replace(self, adds=FileSet(adds))
        object.__setattr__(subset, "memo", self.memo)
        return subset

    @cached_property
    def has_deletion_vectors(self) -> bool:
        # Cached: checked on every request, and a snapshot never changes.
        return (
            "deletionVectors" in self.reader_features
            or self.configuration.get("delta.enableDeletionVectors", "false").lower() == "true"
            or self.adds.has_deletion_vectors
        )

    @property
    def change_data_feed_enabled(self) -> bool:
        return cdf_enabled(self.metadata)

    @cached_property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.metadata["schemaString"])


def cdf_enabled(metadata: dict[str, Any]) -> bool:
    config = metadata.get("configuration") or {}
    return str(config.get("delta.enableChangeDataFeed", "false")).lower() == "true"
