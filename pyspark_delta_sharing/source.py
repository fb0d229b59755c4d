"""The `deltaSharing` data source: options, schema, planning, and reading on executors.

Only PySpark and the standard library are imported at module level: Spark
imports this package in whatever Python it starts, and a failed import would
hide the source behind `DATA_SOURCE_NOT_FOUND` (see `environment`).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from pyspark_delta_sharing import environment
from pyspark_delta_sharing.filters import json_predicate_hints
from pyspark_delta_sharing.listing import url_expiration_ms
from pyspark_delta_sharing.options import ReadOptions, parse_url
from pyspark_delta_sharing.partitions import FilePartition, plan_partitions

if TYPE_CHECKING:
    import pyarrow as pa

    from pyspark_delta_sharing.listing import Listing

__all__ = [
    "DeltaSharingDataSource",
    "FilePartition",
    "ReadOptions",
    "parse_url",
    "plan_partitions",
    "url_expiration_ms",
]

log = logging.getLogger("pyspark_delta_sharing")

#: A URL this close to expiry is refreshed before it is read.
REFRESH_MARGIN_MS = 5 * 60 * 1000
PUSHDOWN_SETTING = "spark.sql.python.filterPushdown.enabled"


CHANGE_FIELDS = [
    StructField("_change_type", StringType()),
    StructField("_commit_version", LongType()),
    StructField("_commit_timestamp", TimestampType()),
]


class DeltaSharingDataSource(DataSource):
    """`spark.read.format("deltaSharing").load("<profile>#<share>.<schema>.<table>")`, and `readStream`."""

    @classmethod
    def name(cls) -> str:
        return "deltaSharing"

    def schema(self) -> StructType:
        environment.check()
        from pyspark_delta_sharing.column_mapping import logical_schema
        from pyspark_delta_sharing.listing import open_client

        options = ReadOptions.parse(dict(self.options))
        client = open_client(options.profile, options.response_format)
        try:
            metadata = client.query_table_metadata(options.table).metadata
        finally:
            client.close()
        schema = StructType.fromJson(logical_schema(metadata.schema_string))
        if options.change_feed:
            schema = StructType([*schema.fields, *CHANGE_FIELDS])
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        environment.check()
        options = ReadOptions.parse(dict(self.options))
        # f_back, not sys._getframe(1): an engine that calls reader() from native code with no
        # Python frame beneath it (Sail, a Spark Connect server in Rust) has no caller, and
        # _getframe(1) raises "call stack is not deep enough" there.
        caller = sys._getframe(0).f_back
        if options.push_filters and pushdown_allowed(caller):
            return FilteringReader(options, schema)
        return DeltaSharingReader(options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        environment.check()
        from pyspark_delta_sharing.streaming import DeltaSharingStreamReader, StreamOptions

        options = dict(self.options)
        return DeltaSharingStreamReader(ReadOptions.parse(options), StreamOptions.parse(options), schema)


_pushdown_warned = False


def pushdown_allowed(caller: Any) -> bool:
    """Whether the reader may push filters, judged by the PySpark worker that asks for it.

    No caller (None) is an engine calling from native code: it calls `pushFilters` only if it
    pushes filters, and FilteringReader hands every filter back, so pushing is allowed.

    PySpark 4 asks for the reader in the filter pushdown worker when
    spark.sql.python.filterPushdown.enabled is on and the query has filters,
    and otherwise in the plain planning worker, which fails the query if the
    reader implements `pushFilters` while the setting is off. That worker
    never pushes filters, so it gets the plain reader; its `enable_pushdown`
    is the setting, which is said once in the log when off.
    """
    global _pushdown_warned
    if caller is None:
        return True
    names = {caller.f_globals.get("__name__", ""), getattr(caller.f_globals.get("__spec__"), "name", "")}
    if not any(name.endswith("plan_data_source_read") for name in names):
        return True
    if caller.f_locals.get("enable_pushdown") is False and not _pushdown_warned:
        _pushdown_warned = True
        log.warning(
            "deltaSharing: %s is off, so filters are not sent to the sharing server as "
            "jsonPredicateHints and every file is listed and read; set it to true to skip files",
            PUSHDOWN_SETTING,
        )
    return False


class DeltaSharingReader(DataSourceReader):
    """Lists the table's files when Spark plans the read; executors read them by URL.

    Spark pickles the reader for its executors before it calls `partitions`,
    so what the listing says (the layout of the table's files, the version
    listed) travels in each partition instead.
    """

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.hints: str | None = None
        self._fresh: dict[str, dict[str, Any]] | None = None

    def _list(self, version: int | None = None, timestamp: str | None = None) -> Listing:
        from pyspark_delta_sharing.listing import list_changes, list_snapshot

        options = self.options
        if options.change_feed:
            return list_changes(options.profile, options.table, options.response_format, options.cdf)
        return list_snapshot(
            options.profile, options.table, options.response_format, version, timestamp, self.hints
        )

    def partitions(self) -> list[FilePartition]:
        from pyspark_delta_sharing.files import TableLayout

        listing = self._list(self.options.version, self.options.timestamp)
        layout = TableLayout.of(listing)
        # Spark does not tell a Python data source its parallelism: the planning machine's
        # cores stand in (exact in local mode; bigger tables are cut by size anyway).
        groups = plan_partitions(listing.files, os.cpu_count() or 1) or [[]]
        return [FilePartition(group, layout, listing.version) for group in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        environment.check()
        from pyspark.sql.pandas.types import to_arrow_schema

        from pyspark_delta_sharing.files import read_files

        assert isinstance(partition, FilePartition) and partition.layout  # what `partitions` made
        arrow_schema = to_arrow_schema(self.schema)

        def renew(file: dict[str, Any]) -> dict[str, Any]:
            return self.renew(file, partition.version)

        yield from read_files(
            partition.files, arrow_schema, partition.layout, renew=renew, refresh_margin_ms=REFRESH_MARGIN_MS
        )

    def renew(self, file: dict[str, Any], version: int | None) -> dict[str, Any]:
        """`file` with fresh URLs: the same listing again (pinned to `version`), kept for the task.

        A task longer than the URLs live lists again when the kept ones near expiry too.
        """
        fresh = (self._fresh or {}).get(file["key"])
        if fresh is None or fresh["expiration"] - REFRESH_MARGIN_MS < time.time() * 1000:
            self._fresh = {f["key"]: f for f in self._relist(version).files}
            fresh = self._fresh.get(file["key"])
        return fresh or file

    def _relist(self, version: int | None) -> Listing:
        if self.options.change_feed or self.options.version is not None or self.options.timestamp:
            return self._list(self.options.version, self.options.timestamp)
        from requests import HTTPError

        try:
            return self._list(version)
        except HTTPError:  # history not shared: the latest is all there is
            return self._list()


class FilteringReader(DeltaSharingReader):
    """A reader that turns Spark's filters into `jsonPredicateHints` for the server."""

    def pushFilters(self, filters: list[Any]) -> list[Any]:
        types = {f.name: f.dataType.typeName() for f in self.schema.fields if f.name not in _CHANGE_NAMES}
        self.hints = json_predicate_hints(list(filters), types)
        # Hints are best effort: Spark still applies every filter itself.
        return list(filters)


_CHANGE_NAMES = {f.name for f in CHANGE_FIELDS}
