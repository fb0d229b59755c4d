"""The `deltaSharing` data source: options, schema, planning, and reading on executors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
from delta_sharing.protocol import AddCdcFile, AddFile, CdfOptions, DeltaSharingProfile, RemoveFile, Table
from delta_sharing.rest_client import DataSharingRestClient
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from pyspark_delta_sharing.filters import json_predicate_hints

#: Files are grouped into Spark partitions of about this many bytes.
TARGET_PARTITION_BYTES = 128 * 1024 * 1024
#: A URL this close to expiry is refreshed before it is read.
REFRESH_MARGIN_MS = 5 * 60 * 1000


def parse_url(url: str) -> tuple[str, Table]:
    """`<profile>#<share>.<schema>.<table>` → (profile path, table)."""
    profile, sep, name = url.rpartition("#")
    parts = name.split(".")
    if not sep or not profile or len(parts) != 3 or not all(parts):
        raise ValueError(f"Invalid deltaSharing path {url!r}: expected <profile>#<share>.<schema>.<table>")
    return profile, Table(name=parts[2], share=parts[0], schema=parts[1])


@dataclass(frozen=True)
class ReadOptions:
    profile: DeltaSharingProfile
    table: Table
    version: int | None = None
    timestamp: str | None = None
    change_feed: bool = False
    cdf: dict[str, Any] = field(default_factory=dict)
    push_filters: bool = False

    @classmethod
    def parse(cls, options: dict[str, str]) -> ReadOptions:
        lowered = {key.lower(): value for key, value in options.items()}
        path = lowered.get("path")
        if not path:
            raise ValueError("deltaSharing needs a path: load('<profile>#<share>.<schema>.<table>')")
        profile_path, table = parse_url(path)
        response_format = lowered.get("responseformat", "parquet").lower()
        if response_format != "parquet":
            raise ValueError(
                f"responseFormat {response_format!r}: this data source reads the parquet format only"
            )
        cdf = {
            "starting_version": _int(lowered.get("startingversion")),
            "ending_version": _int(lowered.get("endingversion")),
            "starting_timestamp": lowered.get("startingtimestamp"),
            "ending_timestamp": lowered.get("endingtimestamp"),
        }
        return cls(
            profile=DeltaSharingProfile.read_from_file(profile_path),
            table=table,
            version=_int(lowered.get("versionasof")),
            timestamp=lowered.get("timestampasof"),
            change_feed=lowered.get("readchangefeed", "false").lower() == "true",
            cdf=cdf,
            push_filters=lowered.get("pushfilters", "false").lower() == "true",
        )

    def client(self) -> DataSharingRestClient:
        return DataSharingRestClient(self.profile, num_retries=3)


def _int(value: str | None) -> int | None:
    return None if value is None or value == "" else int(value)


CHANGE_FIELDS = [
    StructField("_change_type", StringType()),
    StructField("_commit_version", LongType()),
    StructField("_commit_timestamp", TimestampType()),
]


class DeltaSharingDataSource(DataSource):
    """`spark.read.format("deltaSharing").load("<profile>#<share>.<schema>.<table>")`."""

    @classmethod
    def name(cls) -> str:
        return "deltaSharing"

    def schema(self) -> StructType:
        options = ReadOptions.parse(dict(self.options))
        client = options.client()
        try:
            metadata = client.query_table_metadata(options.table).metadata
        finally:
            client.close()
        schema = StructType.fromJson(json.loads(metadata.schema_string))
        if options.change_feed:
            schema = StructType([*schema.fields, *CHANGE_FIELDS])
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        options = ReadOptions.parse(dict(self.options))
        # Spark refuses a reader that implements pushFilters unless
        # spark.sql.python.filterPushdown.enabled is true, so pushdown is opt-in.
        if options.push_filters:
            return FilteringReader(options, schema)
        return DeltaSharingReader(options, schema)


@dataclass
class FilePartition(InputPartition):
    files: list[dict[str, Any]]


class DeltaSharingReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.hints: str | None = None

    def _list(self) -> tuple[list[dict[str, Any]], int | None]:
        """The files to read, as plain dicts, and the version they belong to."""
        client = self.options.client()
        try:
            if self.options.change_feed:
                response = client.list_table_changes(self.options.table, CdfOptions(**self.options.cdf))
                return [_change_file(action) for action in response.actions], None
            response = client.list_files_in_table(
                self.options.table,
                jsonPredicateHints=self.hints,
                version=self.options.version,
                timestamp=self.options.timestamp,
            )
            files = [_snapshot_file(add) for add in response.add_files]
            return files, response.delta_table_version
        finally:
            client.close()

    def partitions(self) -> list[FilePartition]:
        files, version = self._list()
        self.pinned_version = version
        groups: list[list[dict[str, Any]]] = []
        current: list[dict[str, Any]] = []
        size = 0
        for file in sorted(files, key=lambda f: f["size"], reverse=True):
            if current and size + file["size"] > TARGET_PARTITION_BYTES:
                groups.append(current)
                current, size = [], 0
            current.append(file)
            size += file["size"]
        if current:
            groups.append(current)
        return [FilePartition(group) for group in groups] or [FilePartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from pyspark_delta_sharing.files import read_file

        arrow_schema = to_arrow_schema(self.schema)
        assert isinstance(partition, FilePartition)  # what `partitions` made
        files = self._refreshed(partition.files)
        for file in files:
            yield from read_file(file["url"], arrow_schema, file["partition_values"], file.get("change"))

    def _refreshed(self, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Fresh URLs for files whose URLs expire before they would be read."""
        now_ms = time.time() * 1000
        if not any(f.get("expiration") and f["expiration"] - REFRESH_MARGIN_MS < now_ms for f in files):
            return files
        if getattr(self, "pinned_version", None) is not None and self.options.version is None:
            refresh_options = ReadOptions(
                **{**self.options.__dict__, "version": self.pinned_version, "timestamp": None}
            )
            latest = DeltaSharingReader(refresh_options, self.schema)
        else:
            latest = DeltaSharingReader(self.options, self.schema)
        latest.hints = self.hints
        fresh, _ = latest._list()
        by_id = {(f["id"], f.get("change", {}).get("_commit_version")): f for f in fresh}
        return [by_id.get((f["id"], f.get("change", {}).get("_commit_version")), f) for f in files]


class FilteringReader(DeltaSharingReader):
    """A reader that turns Spark's filters into `jsonPredicateHints` for the server."""

    def pushFilters(self, filters: list[Any]) -> list[Any]:
        types = {f.name: f.dataType.typeName() for f in self.schema.fields if f.name != "_change_type"}
        self.hints = json_predicate_hints(list(filters), types)
        # Hints are best effort: Spark still applies every filter itself.
        return list(filters)


def url_expiration_ms(url: str, listed_ms: float) -> float:
    """When a presigned URL stops working, read from its own query string.

    The Python client drops the protocol's `expirationTimestamp`, so the URL is
    asked instead: SigV4 (`X-Amz-Date` + `X-Amz-Expires`), this server's local
    URLs (`X-Sharing-Expires`), GCS (`X-Goog-Date` + `X-Goog-Expires`). Unknown
    kinds are assumed to live an hour, as the Spark connector assumes.
    """
    query = {k.lower(): v for k, v in parse_qsl(urlsplit(url).query)}
    try:
        if "x-sharing-expires" in query:
            return int(query["x-sharing-expires"]) * 1000
        for prefix in ("x-amz-", "x-goog-"):
            if prefix + "date" in query and prefix + "expires" in query:
                signed = datetime.strptime(query[prefix + "date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
                return (signed.timestamp() + int(query[prefix + "expires"])) * 1000
    except ValueError:
        pass
    return listed_ms + 3600 * 1000


def _snapshot_file(add: AddFile) -> dict[str, Any]:
    return {
        "id": add.id,
        "url": add.url,
        "size": add.size,
        "partition_values": add.partition_values,
        "expiration": url_expiration_ms(add.url, time.time() * 1000),
    }


def _change_file(action: AddFile | AddCdcFile | RemoveFile) -> dict[str, Any]:
    if isinstance(action, AddCdcFile):
        change_type = None  # the cdc file holds the column itself
    else:
        change_type = "insert" if isinstance(action, AddFile) else "delete"
    committed = datetime.fromtimestamp(action.timestamp / 1000, UTC) if action.timestamp is not None else None
    return {
        "id": action.id,
        "url": action.url,
        "size": action.size,
        "partition_values": action.partition_values,
        "expiration": url_expiration_ms(action.url, time.time() * 1000),
        "change": {
            "_change_type": change_type,
            "_commit_version": action.version,
            "_commit_timestamp": committed,
        },
    }
