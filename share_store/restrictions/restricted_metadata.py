"""What a restricted table shows of its metadata and commits: nothing naming what it leaves out.

The schema keeps the served columns only, and of their field metadata only
comments and column mapping (generation expressions and identity columns may
name the columns cut); the configuration hides constraints (which name columns
and values); no file has a deletion vector, so the protocol drops the feature;
a commit serves its protocol, metadata, files and time only (an operation's
parameters name rows).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from share_store.restrictions.restriction import BoundRestriction
from share_store.tables.reader import TableReader

log = logging.getLogger(__name__)

#: Field metadata a restricted schema keeps: comments and column mapping. Generation
#: expressions, identity columns and the like may name the columns cut.
KEPT_FIELD_METADATA = ("comment", "delta.columnMapping.")
#: Table configuration a restricted table does not show: constraints name columns and values.
HIDDEN_CONFIGURATION = ("delta.constraints.", "delta.dataSkippingStatsColumns", "delta.enableDeletionVectors")
#: The actions of a commit a restricted table serves; others (domain metadata, transactions)
#: are the provider's.
SERVED_ACTIONS = ("protocol", "metaData", "add", "remove", "cdc", "commitInfo")
#: What a restricted table's commitInfo keeps: its time (an operation's parameters name rows).
KEPT_COMMIT_INFO = ("timestamp", "inCommitTimestamp")


def restricted_commit_info(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key in KEPT_COMMIT_INFO}


def served_partition_values(
    values: dict[str, Any], bound: BoundRestriction, partition_columns: list[str]
) -> dict[str, Any]:
    served = bound.served_physical
    if served is None:
        return values
    # Keyed by physical name, or by name where a writer keyed them so (served either way).
    return {key: value for key, value in values.items() if key in served or bound.serves(key)}


def without_deletion_vectors(protocol: dict[str, Any]) -> dict[str, Any]:
    """The protocol less the deletion-vector feature: no served file has a vector."""
    found = dict(protocol)
    for key in ("readerFeatures", "writerFeatures"):
        if found.get(key) is not None:
            found[key] = [feature for feature in found[key] if feature != "deletionVectors"]
    return found


def restricted_metadata(metadata: dict[str, Any], bound: BoundRestriction) -> dict[str, Any]:
    """A `metaData` action as a restricted table shows it: served columns only, nothing naming
    the others (field metadata, constraints), no deletion vectors."""
    schema = json.loads(metadata["schemaString"])
    fields = []
    for field in schema.get("fields", []):
        if not bound.serves(field["name"]):
            continue
        kept = {
            key: value
            for key, value in (field.get("metadata") or {}).items()
            if key.startswith(KEPT_FIELD_METADATA)
        }
        fields.append(field | {"metadata": kept})
    schema["fields"] = fields
    served = {field["name"].lower() for field in fields}
    configuration = {
        key: value
        for key, value in (metadata.get("configuration") or {}).items()
        if not key.startswith(HIDDEN_CONFIGURATION)
    }
    return metadata | {
        "schemaString": json.dumps(schema, separators=(",", ":")),
        "partitionColumns": [c for c in metadata.get("partitionColumns") or [] if c.lower() in served],
        "configuration": configuration,
    }


class EarlierStats:
    """The statistics of files a version removes, from the version before (removes carry none)."""

    def __init__(self, inner: TableReader, listing: Any, version: int) -> None:
        self.inner, self.listing, self.version = inner, listing, version
        self._stats: dict[str, str | None] | None = None

    def stats(self, path: str) -> str | None:
        if self._stats is None:
            self._stats = {}
            if self.version > 0:
                try:
                    before = self.inner.snapshot(self.version - 1, self.listing)
                    self._stats = {add["path"]: add.get("stats") for add in before.adds}
                except Exception:  # noqa: BLE001 - no earlier version readable: the file is derived
                    log.info("no statistics for the removes of version %s", self.version)
        return self._stats.get(path)
