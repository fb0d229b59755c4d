"""Pure mapping from a Delta snapshot's raw actions to Delta Sharing protocol lines.

No I/O here: URLs arrive already signed, so every function can be tested on
plain dictionaries. Two response formats:

* `parquet`: one flat object per file (`file`, or `add`/`cdf`/`remove` for
  changes and streaming), partition values and stats as strings;
* `delta`: the table's own Delta actions wrapped in `file` objects, paths
  replaced by signed URLs, for clients that replay them with a Delta reader.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from share_store.errors import UnsupportedOperation
from share_store.tables.snapshot import TableSnapshot

# Reader features that shape how data files are read; a client must announce
# each one the table uses. Log-layout features (v2Checkpoint,
# vacuumProtocolCheck) are not listed: recipients never see our log layout.
DATA_READER_FEATURES = {
    "columnmapping", "deletionvectors", "timestampntz", "typewidening", "typewidening-preview",
    "varianttype", "varianttype-preview", "variantshredding-preview", "variantshredding", "geospatial",
}  # fmt: skip
LOG_ONLY_FEATURES = {"v2checkpoint", "vacuumprotocolcheck", "checkpointprotection", "catalogmanaged"}
#: The newest reader protocol whose rules this server knows (3: table features).
MAX_READER_VERSION = 3


def file_id(path: str, hash_kind: str = "parquet") -> str:
    """Stable id of a file: md5 of its log path (parquet) or sha256 (delta), as the reference."""
    digest = hashlib.md5 if hash_kind == "parquet" else hashlib.sha256
    return digest(path.encode()).hexdigest()


@dataclass
class FileEntry:
    """One `add` (or `remove`/`cdc`) action of the log, with convenient views.

    Not frozen: one is made per file of every response, and a frozen dataclass's
    `__init__` costs several times as much.
    """

    action: dict[str, Any]
    partition_columns: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return self.action["path"]

    @property
    def size(self) -> int:
        return int(self.action.get("size") or 0)

    @property
    def stats(self) -> str | None:
        return self.action.get("stats")

    @property
    def partition_values(self) -> dict[str, str | None]:
        values = self.action.get("partitionValues") or {}
        if not self.partition_columns:
            return dict(values)
        return {column: values.get(column) for column in self.partition_columns}

    @cached_property
    def parsed_stats(self) -> dict[str, Any]:
        if not self.stats:
            return {}
        try:
            # orjson: predicate hints on stats parse them for every file, and json takes 4x as long.
            stats = orjson.loads(self.stats)
        except orjson.JSONDecodeError:
            try:
                stats = json.loads(self.stats)  # what only json accepts (NaN, Infinity)
            except ValueError:
                return {}
        return stats if isinstance(stats, dict) else {}

    @property
    def num_records(self) -> int | None:
        value = self.parsed_stats.get("numRecords")
        return value if isinstance(value, int) else None

    @property
    def deleted_rows(self) -> int:
        descriptor = self.action.get("deletionVector") or {}
        return int(descriptor.get("cardinality") or 0)


def entries(snapshot: TableSnapshot) -> Iterator[FileEntry]:
    """The snapshot's files, made one at a time: a response streams them as it goes."""
    columns = tuple(snapshot.partition_columns)
    for add in snapshot.adds:
        yield FileEntry(add, columns)


# -- format rules ---------------------------------------------------------------------------


def check_understood(snapshot: TableSnapshot) -> None:
    """Refuse a table whose protocol asks readers for rules this server does not know.

    Serving it would hand out files whose meaning the server cannot vouch for,
    in either format: the parquet format would even present it as version 1.
    """
    version = snapshot.min_reader_version
    if version > MAX_READER_VERSION:
        raise UnsupportedOperation(
            f"The table requires Delta reader version {version}; this server understands reader "
            f"versions up to {MAX_READER_VERSION}."
        )
    known = DATA_READER_FEATURES | LOG_ONLY_FEATURES
    unknown = sorted(f for f in snapshot.reader_features if f.lower() not in known)
    if unknown:
        raise UnsupportedOperation(
            "The table uses reader features this server does not understand: " + ", ".join(unknown) + "."
        )


def check_parquet_readable(snapshot: TableSnapshot) -> None:
    """Refuse tables the parquet response format cannot describe faithfully."""
    check_understood(snapshot)
    if "parquet" in snapshot.refusals:
        raise UnsupportedOperation(snapshot.refusals["parquet"])
    reasons = []
    if snapshot.column_mapping_mode != "none" and not snapshot.native_column_names:
        reasons.append(f"delta.columnMapping.mode={snapshot.column_mapping_mode}")
    if snapshot.has_deletion_vectors:
        reasons.append("deletion vectors")
    other = {f for f in snapshot.reader_features if f.lower() not in LOG_ONLY_FEATURES}
    other -= {"deletionVectors", "columnMapping"}
    if snapshot.native_column_names:
        other.discard("timestampNtz")  # a column type, which the parquet format carries as is
    if other:
        reasons.append("reader features " + ", ".join(sorted(other)))
    if reasons:
        raise UnsupportedOperation(
            "Unsupported Delta Table Properties: "
            + "; ".join(reasons)
            + ". This table can only be read with responseformat=delta."
        )


def required_reader_features(snapshot: TableSnapshot) -> set[str]:
    """Lower-cased reader features a client must announce to read this table."""
    features = {f.lower() for f in snapshot.reader_features} - LOG_ONLY_FEATURES
    if snapshot.column_mapping_mode != "none":
        features.add("columnmapping")
    if snapshot.has_deletion_vectors:
        features.add("deletionvectors")
    return features


def check_delta_readable(snapshot: TableSnapshot, client_features: frozenset[str]) -> None:
    check_understood(snapshot)
    if "delta" in snapshot.refusals:
        raise UnsupportedOperation(snapshot.refusals["delta"])
    missing = required_reader_features(snapshot) - client_features
    if missing:
        names = {"deletionvectors": "deletionVectors", "columnmapping": "columnMapping"}
        listed = ", ".join(sorted(names.get(m, m) for m in missing))
        raise UnsupportedOperation(
            f"Unsupported Delta Table Properties: the table needs reader features the client did not "
            f"announce: {listed}. Add them to readerfeatures in the delta-sharing-capabilities header."
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


# -- parquet format ---------------------------------------------------------------------------


def parquet_protocol() -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": 1}}


def parquet_metadata(
    snapshot: TableSnapshot, history_shared: bool, version: int | None = None
) -> dict[str, Any]:
    meta = snapshot.metadata
    body: dict[str, Any] = {"id": meta["id"]}
    if meta.get("name"):
        body["name"] = meta["name"]
    if meta.get("description"):
        body["description"] = meta["description"]
    body["format"] = {"provider": "parquet"}
    body["schemaString"] = clean_schema_string(meta["schemaString"])
    body["partitionColumns"] = snapshot.partition_columns
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
    entry: FileEntry,
    url: str,
    expiration: int,
    hash_kind: str = "parquet",
    version: int | None = None,
    timestamp: int | None = None,
    kind: str = "file",
) -> dict[str, Any]:
    """A `file` line, or with `kind` an `add`/`cdf`/`remove` line of changes and streaming."""
    action = entry.action
    body: dict[str, Any] = {
        "url": url,
        "id": file_id(action["path"], hash_kind),
        "partitionValues": entry.partition_values,
        "size": int(action.get("size") or 0),
    }
    stats = action.get("stats")
    if stats is not None and kind in ("file", "add"):
        body["stats"] = stats
    if version is not None:
        body["version"] = version
    if timestamp is not None:
        body["timestamp"] = timestamp
    body["expirationTimestamp"] = expiration
    return {kind: body}


# -- delta format ---------------------------------------------------------------------------------


def delta_protocol(snapshot: TableSnapshot) -> dict[str, Any]:
    protocol = snapshot.protocol
    body: dict[str, Any] = {
        "minReaderVersion": int(protocol.get("minReaderVersion", 1)),
        "minWriterVersion": int(protocol.get("minWriterVersion", 2)),
    }
    # Present even when empty: delta-kernel requires the lists at reader version 3 / writer 7.
    if protocol.get("readerFeatures") is not None:
        body["readerFeatures"] = list(protocol["readerFeatures"])
    if protocol.get("writerFeatures") is not None:
        body["writerFeatures"] = list(protocol["writerFeatures"])
    return {"protocol": {"deltaProtocol": body}}


# Recipients rebuild a log from our lines with their own commit files, which carry
# no commitInfo; a reader told that in-commit timestamps are on then fails to
# find them. Commit times travel on each file line instead.
LOG_ONLY_CONFIGURATION = {
    "delta.enableInCommitTimestamps",
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
}


def delta_metadata(snapshot: TableSnapshot, version: int | None = None) -> dict[str, Any]:
    meta = dict(snapshot.metadata)
    meta.setdefault("format", {"provider": "parquet", "options": {}})
    meta.setdefault("partitionColumns", [])
    meta["configuration"] = {
        key: value
        for key, value in (meta.get("configuration") or {}).items()
        if key not in LOG_ONLY_CONFIGURATION
    }
    body: dict[str, Any] = {"deltaMetadata": meta}
    if version is not None:
        body["version"] = version
    # The Delta Lake connector refuses a delta-format metadata without `size`.
    body["size"] = snapshot.size
    body["numFiles"] = snapshot.num_files
    return {"metaData": body}


def delta_file(
    kind: str,
    action: dict[str, Any],
    url: str,
    expiration: int,
    hash_kind: str = "delta",
    dv_url: str | None = None,
    version: int | None = None,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """A `file` line wrapping one `add`/`remove`/`cdc` action whose paths are signed URLs."""
    signed = {key: value for key, value in action.items() if key != "tags"}
    signed["path"] = url
    wrapper: dict[str, Any] = {"id": file_id(action["path"], hash_kind)}
    descriptor = action.get("deletionVector")
    if descriptor and dv_url is not None:
        signed["deletionVector"] = descriptor | {"storageType": "p", "pathOrInlineDv": dv_url}
        wrapper["deletionVectorFileId"] = file_id(descriptor["pathOrInlineDv"], hash_kind)
    if kind == "remove" and "size" not in signed:
        raise UnsupportedOperation("a remove action without size cannot be shared")
    if version is not None:
        wrapper["version"] = version
    if timestamp is not None:
        wrapper["timestamp"] = timestamp
    wrapper["expirationTimestamp"] = expiration
    wrapper["deltaSingleAction"] = {kind: signed}
    return {"file": wrapper}


# -- predicate hints ---------------------------------------------------------------------------


def physical_names(snapshot: TableSnapshot) -> dict[str, str]:
    """Logical → physical top-level column names (identity without column mapping)."""
    if snapshot.column_mapping_mode == "none":
        return {}
    names = {}
    for field in snapshot.schema.get("fields", []):
        physical = (field.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if physical:
            names[field["name"]] = physical
    return names
