"""Replaying a Delta log into the raw actions of one version.

deltalake answers "which files are in version N" but not with the actions as
written: it drops deletion-vector descriptors and tags, and hands back stats
and partition values re-typed. The protocol's `delta` format must carry the
actions as they are, and the `parquet` format wants the raw strings, so the
active files are replayed here: the newest complete checkpoint at or before
the version (classic, multi-part, or v2 with sidecars), then each commit
after it, as the log's listing names them (`log_listing`). Tests check the
result against deltalake on every version of every test table.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from share_store.delta.log_listing import (
    CLASSIC_CHECKPOINT,
    MULTIPART_CHECKPOINT,
    LogListing,
    check_available,
    list_log,
)
from share_store.errors import TableFilesMissing, TableLogDamaged
from share_store.storage.base import ObjectStorage
from share_store.tables.active_files import FileSet, StreamedFileSet, struct_rows

CHECKPOINT_COLUMNS = ("add", "remove", "metaData", "protocol", "sidecar")
# Checkpoints larger than this are streamed rather than held (see `active_files`).
# Bytes track memory better than rows: wide stats make both the file and the
# held dictionaries bigger. 100,000 files with two columns' stats take 2.3 MB,
# and about 200 MB once held; a million, 23 MB on disk, would take 2 GB.
STREAM_THRESHOLD_BYTES = 8 * 1024 * 1024
# Checkpoints larger than this are streamed to a table's first reader while the held
# snapshot is built beside it (see `DeltaTableReader.snapshot`): holding 100,000 files
# (2.3 MB) takes 0.7 s, streaming the first lines of them 20 ms. 10,000 files are
# held in some 70 ms, as fast as a first answer needs.
COLD_STREAM_BYTES = 1024 * 1024


_pause_lock = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a replay builds its dictionaries.

    A replay makes a few dictionaries per file, long-lived and free of cycles;
    the collector, set off by every few hundred allocations, would walk them
    again and again: a quarter of a cold 100,000-file replay. Reference counting
    still frees everything meanwhile. Replays in several threads share one
    pause, which ends with the last of them.
    """
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def _streamable(keys: list[str]) -> bool:
    # Classic and multi-part checkpoints hold every add themselves; v2 checkpoints
    # point to sidecars, and are read whole.
    names = [key.rpartition("/")[2] for key in keys]
    return all(CLASSIC_CHECKPOINT.fullmatch(name) or MULTIPART_CHECKPOINT.fullmatch(name) for name in names)


def _loads(line: bytes) -> dict[str, Any]:
    """One action of a commit: orjson parses it six times faster than json.

    Actions' numbers (sizes, times, versions) fit in 64 bits, which orjson keeps
    exact; column statistics, which may not, are a string inside the action.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:  # what only json accepts (NaN, Infinity)
        return json.loads(line)


def dv_id(descriptor: dict[str, Any] | None) -> str:
    """The unique id of a deletion vector (empty without one), per the Delta protocol."""
    if not descriptor:
        return ""
    offset = descriptor.get("offset")
    suffix = f"@{offset}" if offset is not None else ""
    return f"{descriptor['storageType']}{descriptor['pathOrInlineDv']}{suffix}"


def file_identity(action: dict[str, Any]) -> tuple[str, str]:
    return action["path"], dv_id(action.get("deletionVector"))


def _stat_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stat_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, datetime):
        # Checkpoint stats carry naive timestamps in UTC.
        text = value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return text + "Z"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def _normalize(action: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint row as the JSON action it stands for."""
    result: dict[str, Any] = {}
    for key, value in action.items():
        if value is None or key == "stats_parsed":
            continue
        if key in ("partitionValues", "tags", "configuration") and isinstance(value, list):
            value = dict(value)
        result[key] = value
    if "stats" not in result and action.get("stats_parsed"):
        stats = _stat_value(action["stats_parsed"])
        result["stats"] = json.dumps(stats, separators=(",", ":"))
    if "partitionValues" in action and action["partitionValues"] is None:
        result["partitionValues"] = {}
    return result


def _metadata_from_checkpoint(value: dict[str, Any]) -> dict[str, Any]:
    meta = _normalize(value)
    meta.setdefault("configuration", {})
    meta.setdefault("partitionColumns", [])
    if isinstance(meta.get("format"), dict) and isinstance(meta["format"].get("options"), list):
        meta["format"]["options"] = dict(meta["format"]["options"])
    return meta


@dataclass
class ReplayState:
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: Active files, or with a streamed checkpoint, those added after it.
    active: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: A checkpoint too large to hold, read again whenever the files are listed.
    streamed_parts: list[Path] = field(default_factory=list)
    streamed_temporary: bool = False
    #: With a streamed checkpoint: files removed after it.
    removed: set[tuple[str, str]] = field(default_factory=set)

    def apply(self, action: dict[str, Any]) -> None:
        if (add := action.get("add")) is not None:
            self.active[file_identity(add)] = add
        elif (remove := action.get("remove")) is not None:
            identity = file_identity(remove)
            self.active.pop(identity, None)
            if self.streamed_parts:
                self.removed.add(identity)
        elif (meta := action.get("metaData")) is not None:
            self.metadata = meta
        elif (protocol := action.get("protocol")) is not None:
            self.protocol = protocol

    def files(self) -> FileSet:
        if not self.streamed_parts:
            return FileSet(self.active.values())
        return StreamedFileSet(
            self.streamed_parts, self.streamed_temporary, self.active, self.removed, _normalize, file_identity
        )


class LogReader:
    """Reads one table's log files through the storage interface."""

    def __init__(self, storage: ObjectStorage, bucket: str, table_path: str) -> None:
        self.storage = storage
        self.bucket = bucket
        self.log_prefix = f"{table_path}/_delta_log/"

    def listing(self, after: int | None = None) -> LogListing:
        return list_log(self.storage, self.bucket, self.log_prefix, after)

    def read_commit(self, listing: LogListing, version: int) -> list[dict[str, Any]]:
        key = listing.commits.get(version)
        if key is None:
            check_available(listing, version)
            raise TableLogDamaged(f"commit {version} is missing from the log (a gap in its commits)")
        try:
            raw = self.storage.read(self.bucket, key)
        except FileNotFoundError as error:
            raise TableFilesMissing() from error
        try:
            return [_loads(line) for line in raw.splitlines() if line.strip()]
        except ValueError as error:  # orjson's and json's decode errors both are
            raise TableLogDamaged(f"the log is unreadable at version {version}: not JSON") from error

    def replay(self, listing: LogListing, version: int, stream_above: int | None = None) -> ReplayState:
        """The state at `version`: newest usable checkpoint, then the commits after it.

        A classic or multi-part checkpoint of more than `stream_above` bytes
        (`STREAM_THRESHOLD_BYTES` unless given) is streamed rather than held.
        """
        with collector_paused():
            threshold = STREAM_THRESHOLD_BYTES if stream_above is None else stream_above
            return self._replay(listing, version, threshold)

    def checkpoint_bytes(self, listing: LogListing, version: int) -> int:
        """The size of the checkpoint a replay of `version` would start from, if streamable (else 0)."""
        checkpoint = self._checkpoint(listing, version)
        if checkpoint is None or not _streamable(listing.checkpoints[checkpoint]):
            return 0
        return listing.checkpoint_bytes.get(checkpoint, 0)

    @staticmethod
    def _checkpoint(listing: LogListing, version: int) -> int | None:
        """The newest checkpoint at or before `version` with every commit after it up to `version`."""
        for checkpoint in sorted((v for v in listing.checkpoints if v <= version), reverse=True):
            if all(v in listing.commits for v in range(checkpoint + 1, version + 1)):
                return checkpoint
        return None

    def _replay(self, listing: LogListing, version: int, stream_above: int) -> ReplayState:
        check_available(listing, version)
        state = ReplayState()
        start = 0
        checkpoint = self._checkpoint(listing, version)
        if checkpoint is not None:
            keys = listing.checkpoints[checkpoint]
            if _streamable(keys) and listing.checkpoint_bytes.get(checkpoint, 0) > stream_above:
                self._stream_checkpoint(keys, state)
            else:
                self._load_checkpoint(keys, state)
            start = checkpoint + 1
        for commit in range(start, version + 1):
            for action in self.read_commit(listing, commit):
                state.apply(action)
        if state.protocol is None or state.metadata is None:
            raise TableFilesMissing()
        if not isinstance(state.metadata.get("schemaString"), str):
            raise TableLogDamaged(f"the table's metadata at version {version} has no schema (schemaString)")
        return state

    def _load_checkpoint(self, keys: list[str], state: ReplayState) -> None:
        sidecars: list[str] = []
        for key in keys:
            if key.endswith(".json"):
                for action in self._json_lines(key):
                    if "sidecar" in action:
                        sidecars.append(action["sidecar"]["path"])
                    else:
                        state.apply(action)
            else:
                sidecars += self._load_parquet(key, state)
        for sidecar in sidecars:
            self._load_parquet(f"{self.log_prefix}_sidecars/{sidecar.rpartition('/')[2]}", state)

    def _stream_checkpoint(self, keys: list[str], state: ReplayState) -> None:
        """Fetch the checkpoint to disk and take only its protocol and metadata now."""
        for key in keys:
            try:
                path, temporary = self.storage.local_file(self.bucket, key)
            except FileNotFoundError as error:
                raise TableFilesMissing() from error
            state.streamed_parts.append(path)
            state.streamed_temporary = temporary
            parquet = pq.ParquetFile(path)
            columns = [c for c in ("metaData", "protocol") if c in parquet.schema_arrow.names]
            for batch in parquet.iter_batches(batch_size=65_536, columns=columns):
                for column in columns:
                    values = batch.column(column)
                    if values.null_count == len(values):
                        continue
                    for value in values.filter(pc.is_valid(values)).to_pylist():
                        if column == "metaData":
                            state.metadata = _metadata_from_checkpoint(value)
                        else:
                            state.protocol = _normalize(value)

    def _json_lines(self, key: str) -> Iterator[dict[str, Any]]:
        for line in self._read(key).splitlines():
            if line.strip():
                yield _loads(line)

    def _read(self, key: str) -> bytes:
        try:
            return self.storage.read(self.bucket, key)
        except FileNotFoundError as error:
            raise TableFilesMissing() from error

    def _load_parquet(self, key: str, state: ReplayState) -> list[str]:
        # ParquetFile rather than read_table, which loads pyarrow.dataset on first use.
        parquet = pq.ParquetFile(pa.BufferReader(self._read(key)))
        columns = [c for c in CHECKPOINT_COLUMNS if c in parquet.schema_arrow.names]
        sidecars: list[str] = []
        for batch in parquet.read(columns=columns).to_batches():
            for column in columns:
                values = batch.column(column)
                if values.null_count == len(values) or column == "remove":  # tombstones: not active
                    continue
                if column == "add":
                    for _, row in struct_rows(values):
                        add = _normalize(row)
                        state.active[file_identity(add)] = add
                    continue
                for value in values.filter(values.is_valid()).to_pylist():
                    if column == "metaData":
                        state.metadata = _metadata_from_checkpoint(value)
                    elif column == "protocol":
                        state.protocol = _normalize(value)
                    else:
                        sidecars.append(value["path"])
        return sidecars
