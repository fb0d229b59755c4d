"""`spark.readStream.format("deltaSharing")`: a table's new versions as micro-batches.

As the JVM connector streams: the first batch is the table's snapshot (or, with
`startingVersion` / `startingTimestamp`, the commits from there on), then each
new commit's added files; with `readChangeFeed`, each commit's row changes
from `/changes`. Offsets are `offsets.Offset`s; files are read on executors by
`files.read_file`, as a batch read reads them.

PySpark 4.1 gives a Python source no read limits of Spark's own: it asks for
the latest offset once per trigger, and once per run under
`Trigger.AvailableNow`. So `maxFilesPerTrigger` / `maxBytesPerTrigger` cut
every batch this source offers, and an AvailableNow run with them set reads
one batch and stops; without them (the default) every batch, AvailableNow's
included, takes all that is there.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pyspark_delta_sharing import environment
from pyspark_delta_sharing.offsets import Entry, Limits, Offset

if TYPE_CHECKING:
    import pyarrow as pa

    from pyspark_delta_sharing.files import TableLayout
    from pyspark_delta_sharing.options import ReadOptions

__all__ = ["DeltaSharingStreamReader", "StreamOptions"]

log = logging.getLogger("pyspark_delta_sharing")

#: A URL this close to expiry is refreshed before it is read.
REFRESH_MARGIN_MS = 5 * 60 * 1000


def _flag(options: dict[str, str], name: str) -> bool:
    return options.get(name.lower(), "false").strip().lower() == "true"


@dataclass(frozen=True)
class StreamOptions:
    """What a stream reads besides the table: where it starts, how much a batch takes, what it lets by."""

    starting_version: int | None = None
    #: `startingVersion=latest`: only commits after the latest version when the stream starts.
    from_latest: bool = False
    starting_timestamp: str | None = None
    limits: Limits = field(default_factory=Limits)
    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    #: Seconds between two asks for the table's latest version (the JVM connector waits 10 too):
    #: Spark asks for the latest offset every few milliseconds while a stream is idle.
    version_interval: float = 10.0

    @classmethod
    def parse(cls, options: dict[str, str]) -> StreamOptions:
        from pyspark_delta_sharing.offsets import parse_bytes

        lowered = {key.lower(): value for key, value in options.items()}
        starting = (lowered.get("startingversion") or "").strip()
        timestamp = lowered.get("startingtimestamp") or None
        if starting and timestamp:
            raise ValueError("deltaSharing stream: set startingVersion or startingTimestamp, not both")
        max_files = lowered.get("maxfilespertrigger")
        if max_files is not None and int(max_files) <= 0:
            raise ValueError(f"maxFilesPerTrigger {max_files!r} must be a positive number of files")
        max_bytes = lowered.get("maxbytespertrigger")
        return cls(
            starting_version=int(starting) if starting and starting.lower() != "latest" else None,
            from_latest=starting.lower() == "latest",
            starting_timestamp=timestamp,
            limits=Limits(
                int(max_files) if max_files is not None else None,
                parse_bytes(max_bytes) if max_bytes is not None else None,
            ),
            ignore_deletes=_flag(lowered, "ignoreDeletes"),
            ignore_changes=_flag(lowered, "ignoreChanges"),
            skip_change_commits=_flag(lowered, "skipChangeCommits"),
            version_interval=float(lowered.get("querytableversionintervalseconds", "10")),
        )


@dataclass
class StreamPartition(InputPartition):
    """Files of one task of a micro-batch, and the batch's offsets to list them again by."""

    files: list[dict[str, Any]]
    layout: TableLayout
    start: dict[str, Any]
    end: dict[str, Any]


class DeltaSharingStreamReader(DataSourceStreamReader):
    """Plans micro-batches on the driver (one Python process per query) and reads them on executors.

    The driver-side reader remembers where the stream stands: Spark hands it
    each batch's offsets in `partitions`, and after a restart the checkpoint's
    last offset (as `partitions(offset, offset)`), so `latestOffset` can cut
    the next batch from there.
    """

    def __init__(self, read: ReadOptions, stream: StreamOptions, schema: StructType) -> None:
        self.read_options = read
        self.stream = stream
        self.schema = schema
        self._initial: Offset | None = None
        self._position: Offset | None = None
        #: The last listing: (first offset, newest version listed) → its entries and layout.
        self._cache: tuple[Offset, int, list[Entry], TableLayout] | None = None
        self._fresh: dict[str, dict[str, Any]] | None = None
        #: When the latest version was last asked for, and the answer.
        self._latest: tuple[float, int] | None = None

    # -- driver -------------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        return self._initial_offset().to_json()

    def _initial_offset(self) -> Offset:
        # Spark may ask for the latest offset before the initial one: both must see one start.
        if self._initial is None:
            from pyspark_delta_sharing.listing import latest_version

            options, stream = self.read_options, self.stream
            if stream.starting_version is not None:
                self._initial = Offset(stream.starting_version)
            elif stream.starting_timestamp:
                version = latest_version(options.profile, options.table, stream.starting_timestamp)
                self._initial = Offset(version)
            elif stream.from_latest:  # `latestOffset` asks next: one request serves both
                self._initial = Offset(self._latest_version() + 1)
            else:
                self._initial = Offset(self._latest_version(), snapshot=True)
        return self._initial

    def latestOffset(self) -> dict[str, Any]:
        from pyspark_delta_sharing.offsets import end_offset

        start = self._position or self._initial_offset()
        latest = self._latest_version()
        if not start.snapshot and start.index < 0 and start.version > latest:
            return start.to_json()  # nothing new: no listing
        entries, _ = self._entries(start, latest)
        return end_offset(start, entries, latest, self.stream.limits).to_json()

    def _latest_version(self) -> int:
        """The table's latest version, asked of the server at most once per `version_interval`."""
        now = time.monotonic()
        if self._latest is None or now - self._latest[0] >= self.stream.version_interval:
            self._latest = (now, self._query_latest())
        return self._latest[1]

    def _query_latest(self) -> int:
        from pyspark_delta_sharing.listing import latest_version

        return latest_version(self.read_options.profile, self.read_options.table)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[StreamPartition]:
        from pyspark_delta_sharing.offsets import between
        from pyspark_delta_sharing.partitions import plan_partitions

        first, last = Offset.from_json(start), Offset.from_json(end)
        self._position = last
        if first.position >= last.position:
            return []
        entries, layout = self._entries(first, last.last_version)
        files = [entry.file for entry in between(entries, first, last)]
        groups = plan_partitions(files, os.cpu_count() or 1)
        return [StreamPartition(group, layout, start, end) for group in groups]

    def commit(self, end: dict[str, Any]) -> None:
        # Files before `end` are read: the listing need not keep them.
        if self._cache and Offset.from_json(end).last_version >= self._cache[1]:
            self._cache = None

    def _entries(self, start: Offset, newest: int) -> tuple[list[Entry], TableLayout]:
        """Every file after `start` up to version `newest`, kept for the batch that reads them."""
        cached = self._cache
        if cached and cached[0].position <= start.position and cached[0].snapshot == start.snapshot:
            if cached[1] >= newest:
                return cached[2], cached[3]
        entries, layout = list_entries(self.read_options, self.stream, start, newest, self.schema.jsonValue())
        self._cache = (start, newest, entries, layout)
        return entries, layout

    # -- executors ----------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        environment.check()
        from pyspark.sql.pandas.types import to_arrow_schema

        from pyspark_delta_sharing.files import read_files

        assert isinstance(partition, StreamPartition)  # what `partitions` made
        arrow_schema = to_arrow_schema(self.schema)

        def renew(file: dict[str, Any]) -> dict[str, Any]:
            return self.renew(file, partition)

        yield from read_files(
            partition.files, arrow_schema, partition.layout, renew=renew, refresh_margin_ms=REFRESH_MARGIN_MS
        )

    def renew(self, file: dict[str, Any], partition: StreamPartition) -> dict[str, Any]:
        """`file` with fresh URLs: its batch listed again, kept for the task."""
        fresh = (self._fresh or {}).get(file["key"])
        if fresh is None or fresh["expiration"] - REFRESH_MARGIN_MS < time.time() * 1000:
            first, last = Offset.from_json(partition.start), Offset.from_json(partition.end)
            entries, _ = list_entries(
                self.read_options, self.stream, first, last.last_version, self.schema.jsonValue()
            )
            self._fresh = {entry.file["key"]: entry.file for entry in entries}
            fresh = self._fresh.get(file["key"])
        return fresh or file


class SchemaChanged(RuntimeError):
    """The table's schema no longer has the stream's columns with their types."""


def _bare(data_type: Any) -> Any:
    """A type's JSON without nullability and metadata: what reading a column by it depends on."""
    if not isinstance(data_type, dict):
        return data_type
    kind = data_type.get("type")
    if kind == "struct":
        return {"type": "struct", "fields": [(f["name"], _bare(f["type"])) for f in data_type["fields"]]}
    if kind == "array":
        return {"type": "array", "elementType": _bare(data_type["elementType"])}
    if kind == "map":
        return {
            "type": "map",
            "keyType": _bare(data_type["keyType"]),
            "valueType": _bare(data_type["valueType"]),
        }
    return data_type


def schema_change(stream_schema: dict[str, Any], schema_string: str) -> str | None:
    """What makes the table's schema `schema_string` unreadable as `stream_schema` (None: nothing).

    Columns added are fine (the stream does not read them); a column dropped,
    renamed or of another type is not.
    """
    from pyspark_delta_sharing.column_mapping import logical_schema

    table = {f["name"]: f["type"] for f in logical_schema(schema_string)["fields"]}
    for column in stream_schema["fields"]:
        name = column["name"]
        if name in CHANGE_COLUMNS:
            continue
        if name not in table:
            return f"column {name!r} is gone"
        if _bare(table[name]) != _bare(column["type"]):
            return f"column {name!r} is now {json.dumps(table[name])}, not {json.dumps(column['type'])}"
    return None


CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


def list_entries(
    read: ReadOptions, stream: StreamOptions, start: Offset, newest: int, stream_schema: dict[str, Any]
) -> tuple[list[Entry], TableLayout]:
    """The files a stream standing at `start` reads up to version `newest`, and how to read them.

    A snapshot offset lists that version's snapshot, then the commits after it;
    a commit offset, the commits from its version on: their added files, or
    with `readChangeFeed` their changes from `/changes`.
    """
    from pyspark_delta_sharing.files import TableLayout
    from pyspark_delta_sharing.listing import list_changes, list_commits, list_snapshot
    from pyspark_delta_sharing.offsets import appended_files, by_version, indexed

    entries: list[Entry] = []
    layout = None
    first_commit = start.version
    if start.snapshot:
        snapshot = list_snapshot(read.profile, read.table, read.response_format, start.version)
        files = snapshot.files
        if read.change_feed:
            change = {"_change_type": "insert", "_commit_version": start.version, "_commit_timestamp": None}
            files = [file | {"change": change} for file in files]
        entries += indexed(start.version, files, snapshot=True)
        layout = TableLayout.of(snapshot)
        first_commit = start.version + 1
    if first_commit <= newest:
        if read.change_feed:
            range_ = {"starting_version": first_commit, "ending_version": newest}
            commits = list_changes(read.profile, read.table, read.response_format, range_)
        else:
            commits = list_commits(read.profile, read.table, read.response_format, first_commit, newest)
        for schema_string in [commits.schema_string, *commits.later_schemas]:
            problem = schema_change(stream_schema, schema_string)
            if problem:
                raise SchemaChanged(
                    f"deltaSharing stream: the table's schema changed between versions {first_commit} "
                    f"and {newest}: {problem}. A stream keeps the schema it started with; start it "
                    "again with a new checkpoint to read the table as it is now."
                )
        files = commits.files
        if not read.change_feed:
            files = appended_files(
                files, stream.ignore_deletes, stream.ignore_changes, stream.skip_change_commits
            )
        entries += by_version(files)
        layout = TableLayout.of(commits)
    if layout is None:
        raise ValueError(f"deltaSharing stream: nothing to list after {start} up to version {newest}")
    return entries, layout
