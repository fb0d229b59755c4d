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

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from share_store.delta import streamed_commits
from share_store.delta.collector import collector_paused
from share_store.delta.log_listing import (
    CLASSIC_CHECKPOINT,
    MULTIPART_CHECKPOINT,
    LogListing,
    check_available,
    list_log,
)
from share_store.delta.streamed_commits import StreamedCommits
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
#: Commits stream to a first reader beyond this many times `COLD_STREAM_BYTES`: a file takes some
#: 280 bytes of JSON against 23 of checkpoint, yet replays only three times slower, and 10,000
#: files (2.8 MB) are held in 65 ms to the first byte, streamed in 59 (and the query at once after
#: the first, sharing the CPU with the build behind a streamed one, took 72 ms instead of 5).
COMMIT_STREAM_FACTOR = 4
#: From this many commits on, a replay reads them several at a time: on S3 each is a
#: round trip of a few milliseconds, and a table of many small commits has hundreds.
PARALLEL_READS_FROM = 8
_log_reads = ThreadPoolExecutor(max_workers=8, thread_name_prefix="log-read")


def _streamable(keys: list[str]) -> bool:
    # Classic and multi-part checkpoints hold every add themselves; v2 checkpoints
    # point to sidecars, and are read whole.
    names = [key.rpartition("/")[2] for key in keys]
    return all(CLASSIC_CHECKPOINT.fullmatch(name) or MULTIPART_CHECKPOINT.fullmatch(name) for name in names)


def _loads(line: bytes | memoryview) -> dict[str, Any]:
    """One action of a commit: orjson parses it six times faster than json.

    Actions' numbers (sizes, times, versions) fit in 64 bits, which orjson keeps
    exact; column statistics, which may not, are a string inside the action.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:  # what only json accepts (NaN, Infinity)
        return json.loads(bytes(line))


def _parsed(raw: bytes, version: int) -> list[dict[str, Any]]:
    try:
        return [_loads(line) for line in raw.splitlines() if line.strip()]
    except ValueError as error:  # orjson's and json's decode errors both are
        raise TableLogDamaged(f"the log is unreadable at version {version}: not JSON") from error


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
    #: A version with no checkpoint, its files listed from its commits' lines.
    streamed_commits: StreamedCommits | None = None

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
        if self.streamed_commits is not None:
            return self.streamed_commits
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
        return _parsed(self._commit_bytes(listing, version), version)

    def _commit_bytes(self, listing: LogListing, version: int) -> bytes:
        key = listing.commits.get(version)
        if key is None:
            check_available(listing, version)
            raise TableLogDamaged(f"commit {version} is missing from the log (a gap in its commits)")
        try:
            return self.storage.read(self.bucket, key)
        except FileNotFoundError as error:
            raise TableFilesMissing() from error

    def _commits_bytes(self, listing: LogListing, versions: range) -> list[bytes]:
        """The commits' files, read a few at a time when there are many (a round trip each on S3)."""
        if len(versions) < PARALLEL_READS_FROM:
            return [self._commit_bytes(listing, version) for version in versions]
        return list(_log_reads.map(lambda version: self._commit_bytes(listing, version), versions))

    def replay(
        self,
        listing: LogListing,
        version: int,
        stream_above: int | None = None,
        first_reader: bool = False,
    ) -> ReplayState:
        """The state at `version`: newest usable checkpoint, then the commits after it.

        A classic or multi-part checkpoint of more than `stream_above` bytes
        (`STREAM_THRESHOLD_BYTES` unless given) is streamed rather than held. For a
        `first_reader` (whose held snapshot is built behind it), so are a v2 checkpoint's
        sidecars beyond `stream_above`, and the files of a version with no checkpoint
        whose commits take more than `COMMIT_STREAM_FACTOR` times `COLD_STREAM_BYTES`
        (see `streamed_commits`).
        """
        with collector_paused():
            threshold = STREAM_THRESHOLD_BYTES if stream_above is None else stream_above
            return self._replay(listing, version, threshold, first_reader)

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

    def _replay(
        self, listing: LogListing, version: int, stream_above: int, first_reader: bool
    ) -> ReplayState:
        check_available(listing, version)
        state = ReplayState()
        start = 0
        checkpoint = self._checkpoint(listing, version)
        if checkpoint is not None:
            keys = listing.checkpoints[checkpoint]
            if _streamable(keys) and listing.checkpoint_bytes.get(checkpoint, 0) > stream_above:
                self._stream_checkpoint(keys, state)
            else:
                self._load_checkpoint(keys, state, stream_above if first_reader else None)
            start = checkpoint + 1
        versions = range(start, version + 1)
        commits = self._commits_bytes(listing, versions)
        scanned = None
        if (
            first_reader
            and checkpoint is None
            and sum(map(len, commits)) > COMMIT_STREAM_FACTOR * COLD_STREAM_BYTES
        ):
            scanned = streamed_commits.scan(commits, _loads, file_identity)
        if scanned is not None:
            state.protocol, state.metadata, state.streamed_commits = (
                scanned.protocol,
                scanned.metadata,
                scanned.files,
            )
        else:
            for commit, raw in zip(versions, commits, strict=True):
                for action in _parsed(raw, commit):
                    state.apply(action)
        if state.protocol is None or state.metadata is None:
            raise TableFilesMissing()
        if not isinstance(state.metadata.get("schemaString"), str):
            raise TableLogDamaged(f"the table's metadata at version {version} has no schema (schemaString)")
        return state

    def _load_checkpoint(
        self, keys: list[str], state: ReplayState, stream_sidecars_above: int | None
    ) -> None:
        """The checkpoint held in `state`; with `stream_sidecars_above`, a v2 checkpoint's sidecars of
        more bytes than that are streamed instead, as a classic checkpoint's parts are (unless its
        own file holds files too: a streamed set lists its parts alone)."""
        sidecars: list[dict[str, Any]] = []
        for key in keys:
            sidecars += self._load_top_level(key, state)
        if (
            stream_sidecars_above is not None
            and sidecars
            and not state.active
            and sum(int(s.get("sizeInBytes") or 0) for s in sidecars) > stream_sidecars_above
        ):
            self._stream_sidecars(sidecars, state)
            return
        for sidecar in sidecars:
            self._load_parquet(self._sidecar_key(sidecar), state)

    def _sidecar_key(self, sidecar: dict[str, Any]) -> str:
        return f"{self.log_prefix}_sidecars/{sidecar['path'].rpartition('/')[2]}"

    def _load_top_level(self, key: str, state: ReplayState) -> list[dict[str, Any]]:
        """A checkpoint file's actions applied to `state`; the sidecars it names."""
        if not key.endswith(".json"):
            return self._load_parquet(key, state)
        sidecars = []
        for action in self._json_lines(key):
            if "sidecar" in action:
                sidecars.append(action["sidecar"])
            else:
                state.apply(action)
        return sidecars

    def _stream_sidecars(self, sidecars: list[dict[str, Any]], state: ReplayState) -> None:
        """Fetch the sidecars to disk, to be read a record batch at a time (`StreamedFileSet`)."""
        for sidecar in sidecars:
            try:
                path, temporary = self.storage.local_file(self.bucket, self._sidecar_key(sidecar))
            except FileNotFoundError as error:
                raise TableFilesMissing() from error
            state.streamed_parts.append(path)
            state.streamed_temporary = temporary

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

    def _load_parquet(self, key: str, state: ReplayState) -> list[dict[str, Any]]:
        # ParquetFile rather than read_table, which loads pyarrow.dataset on first use.
        parquet = pq.ParquetFile(pa.BufferReader(self._read(key)))
        columns = [c for c in CHECKPOINT_COLUMNS if c in parquet.schema_arrow.names]
        sidecars: list[dict[str, Any]] = []
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
                        sidecars.append(value)
        return sidecars
