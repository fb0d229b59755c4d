"""Asking the sharing server for a table's files, in either response format, as plain dicts.

We announce `responseformat=delta,parquet` with the reader features this
source implements, so the server answers plain tables in the parquet format
and the others (deletion vectors, column mapping, ...) in the delta format.
Both become the same picklable file dicts, which executors read with
`files.read_file`:

    {"key", "id", "url", "size", "partition_values", "expiration",
     "deletion_vector"?, "rows"?, "change"?}

`key` tells a file apart within one listing (a change feed lists a file's
remove and add of one version under one id), so fresh URLs can replace
expiring ones. `rows`, for a change feed, keeps only the rows one vector has
and another lacks: what a commit that only rewrote a vector deleted.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

if TYPE_CHECKING:
    from delta_sharing.protocol import DeltaSharingProfile, Table
    from delta_sharing.rest_client import DataSharingRestClient

#: What this source reads besides plain Parquet, as `readerfeatures` (the server checks them).
READER_FEATURES = ("deletionvectors", "columnmapping", "timestampntz", "typewidening", "typewidening-preview")
RESPONSE_FORMATS = ("delta,parquet", "parquet", "delta")
CAPABILITIES_HEADER = "delta-sharing-capabilities"


def capabilities(response_format: str) -> str:
    """The `delta-sharing-capabilities` header asking for `response_format`."""
    if response_format == "parquet":
        return "responseformat=parquet"
    return f"responseformat={response_format};readerfeatures={','.join(READER_FEATURES)}"


def open_client(profile: DeltaSharingProfile, response_format: str) -> DataSharingRestClient:
    """The Python connector's REST client (auth, retries), asking for `response_format`."""
    from delta_sharing.rest_client import DataSharingRestClient

    client = DataSharingRestClient(profile, num_retries=5)
    # The connector has no setter for our own feature list; its session carries the header.
    client._session.headers[CAPABILITIES_HEADER] = capabilities(response_format)
    return client


@dataclass
class Listing:
    """One answer of the server: the table as of it, and its files."""

    response_format: str
    version: int | None
    schema_string: str
    partition_columns: list[str]
    configuration: dict[str, str]
    files: list[dict[str, Any]] = field(default_factory=list)
    #: The schemas of later `metaData` lines (commits that changed the table's metadata).
    later_schemas: list[str] = field(default_factory=list)


def url_expiration_ms(url: str, listed_ms: float) -> float:
    """When a presigned URL stops working, read from its own query string.

    The Python client drops the protocol's `expirationTimestamp` in the parquet
    format, so the URL is asked instead: SigV4 (`X-Amz-Date` + `X-Amz-Expires`),
    this server's local URLs (`X-Sharing-Expires`), GCS (`X-Goog-Date` +
    `X-Goog-Expires`). Unknown kinds are assumed to live an hour, as the Spark
    connector assumes.
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


def _committed(timestamp_ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC) if timestamp_ms is not None else None


def _change(kind: str, version: int | None, timestamp_ms: int | None) -> dict[str, Any]:
    # A cdc file holds `_change_type` itself: None says read it from the file.
    change_type = {"add": "insert", "remove": "delete", "cdc": None, "cdf": None}[kind]
    return {
        "_change_type": change_type,
        "_commit_version": version,
        "_commit_timestamp": _committed(timestamp_ms),
    }


def list_snapshot(
    profile: DeltaSharingProfile,
    table: Table,
    response_format: str,
    version: int | None = None,
    timestamp: str | None = None,
    hints: str | None = None,
) -> Listing:
    """The table's files as of `version`/`timestamp` (or the latest), filtered by `hints` if any."""
    client = open_client(profile, response_format)
    try:
        response = client.list_files_in_table(
            table, jsonPredicateHints=hints, version=version, timestamp=timestamp
        )
    finally:
        client.close()
    if response.lines:  # the delta format: raw lines, the parquet format's come parsed
        metadata, lines = parse_delta_lines(response.lines)
        return Listing(
            "delta",
            response.delta_table_version,
            metadata["schemaString"],
            list(metadata.get("partitionColumns") or []),
            dict(metadata.get("configuration") or {}),
            [delta_file(line) for line in lines],
        )
    meta = response.metadata
    return Listing(
        "parquet",
        response.delta_table_version,
        meta.schema_string,
        list(meta.partition_columns),
        dict(meta.configuration),
        [parquet_file(add) for add in response.add_files],
    )


def list_changes(
    profile: DeltaSharingProfile, table: Table, response_format: str, options: dict[str, Any]
) -> Listing:
    """The table's change data feed between the versions or timestamps in `options`."""
    from delta_sharing.protocol import CdfOptions

    client = open_client(profile, response_format)
    try:
        response = client.list_table_changes(table, CdfOptions(**options))
    finally:
        client.close()
    if response.lines is not None:
        metadata, lines = parse_delta_lines(response.lines)
        return Listing(
            "delta",
            None,
            metadata["schemaString"],
            list(metadata.get("partitionColumns") or []),
            dict(metadata.get("configuration") or {}),
            change_files(lines),
        )
    meta = response.metadata
    files = [parquet_file(action, _parquet_kind(action)) for action in response.actions]
    return Listing(
        "parquet", None, meta.schema_string, list(meta.partition_columns), dict(meta.configuration), files
    )


def _key(kind: str, file_id: str, version: int | None) -> str:
    """A file's name within its listing, the same in a fresh listing of the same table.

    A snapshot lists each file once, with or without the version asked for; a
    change feed may list one file under several versions and kinds.
    """
    return f"{kind}:{file_id}" if version is None else f"{kind}:{file_id}:{version}"


# -- the parquet format ---------------------------------------------------------------------------


def parquet_file(action: Any, kind: str = "file") -> dict[str, Any]:
    """A file dict from the connector's parsed `AddFile`/`AddCdcFile`/`RemoveFile`."""
    file: dict[str, Any] = {
        "key": _key(kind, action.id, None if kind == "file" else action.version),
        "id": action.id,
        "url": action.url,
        "size": action.size,
        "partition_values": action.partition_values,
        "expiration": url_expiration_ms(action.url, time.time() * 1000),
    }
    if kind != "file":
        file["change"] = _change(kind, action.version, action.timestamp)
    return file


def _parquet_kind(action: Any) -> str:
    from delta_sharing.protocol import AddCdcFile, AddFile

    if isinstance(action, AddCdcFile):
        return "cdc"
    return "add" if isinstance(action, AddFile) else "remove"


# -- the delta format -----------------------------------------------------------------------------


def _delta_action(line: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    wrapper = line["file"]
    ((kind, action),) = wrapper["deltaSingleAction"].items()
    return kind, action, wrapper


def delta_file(line: dict[str, Any], change: bool = False) -> dict[str, Any]:
    """A file dict from one `file` line of the delta format (an add, remove or cdc action)."""
    kind, action, wrapper = _delta_action(line)
    now = time.time() * 1000
    vector = action.get("deletionVector")
    expiration = wrapper.get("expirationTimestamp")
    if expiration is None:
        expiration = url_expiration_ms(action["path"], now)
        if vector and vector.get("storageType") == "p":
            expiration = min(expiration, url_expiration_ms(vector["pathOrInlineDv"], now))
    file: dict[str, Any] = {
        "key": _key(kind, wrapper["id"], wrapper.get("version") if change else None),
        "id": wrapper["id"],
        "url": action["path"],
        "size": int(action.get("size") or 0),
        "partition_values": action.get("partitionValues") or {},
        "expiration": expiration,
    }
    if vector:
        file["deletion_vector"] = vector
    if change:
        file["change"] = _change(kind, wrapper.get("version"), wrapper.get("timestamp"))
    return file


def parse_delta_lines(lines: Iterable[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The (first) `deltaMetadata` of a delta-format answer, and its `file` lines."""
    metadata: dict[str, Any] | None = None
    files = []
    for text in lines:
        if not text:
            continue
        line = json.loads(text)
        if "file" in line:
            files.append(line)
        elif "metaData" in line and metadata is None:
            metadata = line["metaData"]["deltaMetadata"]
        elif "endStreamAction" in line and line["endStreamAction"].get("errorMessage"):
            raise RuntimeError(
                f"the sharing server failed mid-answer: {line['endStreamAction']['errorMessage']}"
            )
    if metadata is None:
        raise RuntimeError("the sharing server's answer has no metaData line")
    return metadata, files


def change_files(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The file dicts of a delta-format change feed, a rewritten vector read as what it deleted.

    A commit that deletes rows by vector removes the file with its old vector and
    adds it with the new one; read naively, every surviving row would show as
    deleted and inserted again. Paired by file id within a version, such a
    remove and add become the rows the new vector has and the old lacks
    (deleted), and those the old has and the new lacks (inserted: restored).
    """
    by_version: dict[Any, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    for line in lines:
        kind, _, wrapper = _delta_action(line)
        by_version[wrapper.get("version")][(kind, wrapper["id"])] = line
    files = []
    for actions in by_version.values():
        for (kind, file_id), line in actions.items():
            if kind == "cdc" or ("add" if kind == "remove" else "remove", file_id) not in actions:
                files.append(delta_file(line, change=True))
            elif kind == "add":
                removed = actions[("remove", file_id)]
                files += _rewritten(line, _delta_action(removed)[1].get("deletionVector"))
    return files


def _rewritten(add: dict[str, Any], old_vector: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The changes of a file removed and added again in one commit: rows its vectors disagree on."""
    base = delta_file(add, change=True)
    new_vector = base.pop("deletion_vector", None)
    out = []
    for change_type, only, minus in (("delete", new_vector, old_vector), ("insert", old_vector, new_vector)):
        if only is None:
            continue  # no vector: no row can have moved that way
        file = base | {
            "key": _key(f"{change_type}-by-vector", base["id"], base["change"]["_commit_version"]),
            "rows": {"only": only, "except": minus},
            "change": base["change"] | {"_change_type": change_type},
        }
        out.append(file)
    return out


def list_commits(
    profile: DeltaSharingProfile, table: Table, response_format: str, starting: int, ending: int
) -> Listing:
    """The data files commits `starting`..`ending` added and removed (`/query` with `startingVersion`).

    What a stream of appends reads, as the JVM connector asks for it: every
    file carries its commit in `change` (`insert` for an add, `delete` for a
    remove). The layout is the table's as of `starting`.
    """
    client = open_client(profile, response_format)
    try:
        headers, lines = _query_commits(client, table, {"startingVersion": starting, "endingVersion": ending})
    finally:
        client.close()
    if "responseformat=delta" in headers.get(CAPABILITIES_HEADER, "").lower():
        metadata, file_lines = parse_delta_lines(lines)
        later = [
            json.loads(line)["metaData"]["deltaMetadata"] for line in lines if line.startswith('{"metaData"')
        ]
        return Listing(
            "delta",
            None,
            metadata["schemaString"],
            list(metadata.get("partitionColumns") or []),
            dict(metadata.get("configuration") or {}),
            [delta_file(line, change=True) for line in file_lines],
            [m["schemaString"] for m in later[1:]],
        )
    from delta_sharing.protocol import FileAction, Metadata

    parsed = [json.loads(line) for line in lines if line]
    metadatas = [line["metaData"] for line in parsed if "metaData" in line]
    meta = Metadata.from_json(metadatas[0])
    files = []
    for line in parsed:
        if "add" in line or "remove" in line:
            action = FileAction.from_json(line)
            files.append(parquet_file(action, "add" if "add" in line else "remove"))
        elif "endStreamAction" in line and line["endStreamAction"].get("errorMessage"):
            message = line["endStreamAction"]["errorMessage"]
            raise RuntimeError(f"the sharing server failed mid-answer: {message}")
    return Listing(
        "parquet",
        None,
        meta.schema_string,
        list(meta.partition_columns),
        dict(meta.configuration),
        files,
        [m["schemaString"] for m in metadatas[1:]],
    )


def _query_commits(
    client: DataSharingRestClient, table: Table, body: dict[str, Any]
) -> tuple[dict[str, str], list[str]]:
    """POST `/query` with `body`, with the connector's retries: the response headers and lines."""
    from delta_sharing.rest_client import retry_with_exponential_backoff

    @retry_with_exponential_backoff
    def post(self: DataSharingRestClient) -> tuple[dict[str, str], list[str]]:
        target = f"/shares/{table.share}/schemas/{table.schema}/tables/{table.name}/query"
        with self._post_internal(target, data=body, return_headers=True) as (headers, lines):
            return {k.lower(): v for k, v in headers.items()}, list(lines)

    return post(client)


def latest_version(profile: DeltaSharingProfile, table: Table, starting_timestamp: str | None = None) -> int:
    """The table's latest version, or the first at or after `starting_timestamp`."""
    client = open_client(profile, "parquet")
    try:
        return int(client.query_table_version(table, starting_timestamp).delta_table_version)
    finally:
        client.close()
