"""Unit tests of `sharing_server.delta_sharing.encoding.LineEncoder`, with a deterministic in-test signer.

Covered, in both response formats (`parquet`, `delta`): the `protocol` and
`metadata` lines; snapshot files (`file`, `entry_file`); change files (`add`,
`remove`, `cdc`) with version and timestamp; deletion vectors (on disk: signed
in the delta format; inline: left alone); `min_expiration`; `hash_kind`, which
decides the file ids; and `change` for `FileChange`, `MetadataChange` and
`ProtocolChange`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from share_store.storage.base import UrlSigning
from share_store.tables import actions
from share_store.tables.actions import FileEntry
from share_store.tables.changes import FileChange, MetadataChange, ProtocolChange
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing.encoding import FileSigner, LineEncoder

NOW = 1_700_000_000.75
HOUR_LATER = 1_700_003_600_000  # int(NOW) + 3600 s, in ms
BUCKET = "bucket"
TABLE = "sales/orders"

SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {"comment": "key"}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    },
    separators=(",", ":"),
)
METADATA = {
    "id": "m-id",
    "name": "orders",
    "format": {"provider": "parquet", "options": {}},
    "schemaString": SCHEMA_STRING,
    "partitionColumns": ["p"],
    "configuration": {"delta.enableChangeDataFeed": "true", "delta.enableInCommitTimestamps": "true"},
    "createdTime": 0,
}
PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "changeDataFeed"],
}
STATS = '{"numRecords":2,"minValues":{"id":1},"maxValues":{"id":2},"nullCount":{"id":0}}'
ADD = {
    "path": "p=a/part-0001.parquet",
    "partitionValues": {"p": "a"},
    "size": 100,
    "modificationTime": 5,
    "dataChange": True,
    "stats": STATS,
    "tags": {"INSERTION_TIME": "1"},
}
REMOVE = {
    "path": "p=a/part-0000.parquet",
    "deletionTimestamp": 900,
    "dataChange": True,
    "extendedFileMetadata": True,
    "partitionValues": {"p": "a"},
    "size": 50,
}
CDC = {
    "path": "_change_data/p=a/cdc-0001.parquet",
    "partitionValues": {"p": "a"},
    "size": 30,
    "dataChange": False,
}
BY_KIND = {"add": ADD, "remove": REMOVE, "cdc": CDC}
DV_ON_DISK = {
    "storageType": "u",
    "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
    "offset": 4,
    "sizeInBytes": 40,
    "cardinality": 6,
}
DV_ABSOLUTE = {
    "storageType": "p",
    "pathOrInlineDv": "s3://bucket/sales/orders/deletion_vector_1.bin",
    "offset": 1,
    "sizeInBytes": 36,
    "cardinality": 2,
}
DV_INLINE = {
    "storageType": "i",
    "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
    "sizeInBytes": 40,
    "cardinality": 6,
}


class Signer:
    """A `FileSigner` whose URLs and expirations follow from the key; remembers what it signed."""

    def __init__(self, lifetimes: dict[str, int] | None = None) -> None:
        self.lifetimes = lifetimes or {}
        self.signed: list[tuple[str, str]] = []

    def locate(self, path: str) -> tuple[str, str]:
        return BUCKET, f"{TABLE}/{path}"

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        if descriptor["storageType"] == "i":
            return None
        return BUCKET, f"{TABLE}/dv/{descriptor['cardinality']}.bin"

    def _url(self, location: tuple[str, str], now: float) -> tuple[str, int]:
        self.signed.append(location)
        expiration = (int(now) + self.lifetimes.get(location[1], 3600)) * 1000
        bucket, key = location
        return f"https://storage.test/{bucket}/{key}?expires={expiration}", expiration

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        return lambda bucket, key: self._url((bucket, key), now)


def url(key: str, expiration: int = HOUR_LATER) -> str:
    return f"https://storage.test/{BUCKET}/{TABLE}/{key}?expires={expiration}"


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot(adds: list[dict[str, Any]] | None = None) -> TableSnapshot:
    return TableSnapshot(7, PROTOCOL, METADATA, [ADD] if adds is None else adds)


def encoder(response_format: str, signer: FileSigner | None = None, **options: Any) -> LineEncoder:
    return LineEncoder(response_format, signer or Signer(), NOW, **options)


def without_tags(action: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in action.items() if key != "tags"}


# -- protocol and metadata ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        ("parquet", {"protocol": {"minReaderVersion": 1}}),
        ("delta", {"protocol": {"deltaProtocol": PROTOCOL}}),
    ],
)
def test_protocol_line(response_format: str, expected: dict[str, Any]) -> None:
    assert encoder(response_format).protocol(snapshot()) == expected


PARQUET_METADATA = {
    "id": "m-id",
    "name": "orders",
    "format": {"provider": "parquet"},
    "schemaString": SCHEMA_STRING,
    "partitionColumns": ["p"],
    "configuration": {"enableChangeDataFeed": "true"},
    "size": 100,
    "numFiles": 1,
}
DELTA_METADATA = METADATA | {"configuration": {"delta.enableChangeDataFeed": "true"}}


@pytest.mark.parametrize(
    ("response_format", "history_shared", "version", "expected"),
    [
        ("parquet", True, None, {"metaData": PARQUET_METADATA}),
        ("parquet", True, 4, {"metaData": PARQUET_METADATA | {"version": 4}}),
        ("parquet", False, None, {"metaData": PARQUET_METADATA | {"configuration": {}}}),
        ("delta", True, None, {"metaData": {"deltaMetadata": DELTA_METADATA, "size": 100, "numFiles": 1}}),
        (
            "delta",
            True,
            4,
            {"metaData": {"deltaMetadata": DELTA_METADATA, "version": 4, "size": 100, "numFiles": 1}},
        ),
        # Whether history is shared changes only the parquet format's configuration.
        ("delta", False, None, {"metaData": {"deltaMetadata": DELTA_METADATA, "size": 100, "numFiles": 1}}),
    ],
)
def test_metadata_line(
    response_format: str, history_shared: bool, version: int | None, expected: dict[str, Any]
) -> None:
    line = encoder(response_format, history_shared=history_shared).metadata(snapshot(), version)
    assert line == expected


def test_protocol_and_metadata_sign_nothing() -> None:
    signer = Signer()
    lines = encoder("delta", signer)
    lines.protocol(snapshot())
    lines.metadata(snapshot())
    assert signer.signed == [] and lines.min_expiration is None


# -- snapshot files ------------------------------------------------------------------------------------


def test_snapshot_file_parquet() -> None:
    expected = {
        "file": {
            "url": url("p=a/part-0001.parquet"),
            "id": md5("p=a/part-0001.parquet"),
            "partitionValues": {"p": "a"},
            "size": 100,
            "stats": STATS,
            "expirationTimestamp": HOUR_LATER,
        }
    }
    assert encoder("parquet").file("add", ADD, ("p",)) == expected
    assert encoder("parquet").entry_file("add", FileEntry(ADD, ("p",))) == expected
    entry = next(actions.entries(snapshot()))
    assert encoder("parquet").entry_file("add", entry) == expected


def test_snapshot_file_parquet_with_version() -> None:
    line = encoder("parquet").file("add", ADD, ("p",), version=3)
    assert line == {
        "file": {
            "url": url("p=a/part-0001.parquet"),
            "id": md5("p=a/part-0001.parquet"),
            "partitionValues": {"p": "a"},
            "size": 100,
            "stats": STATS,
            "version": 3,
            "expirationTimestamp": HOUR_LATER,
        }
    }


def test_snapshot_file_delta() -> None:
    expected = {
        "file": {
            "id": sha256("p=a/part-0001.parquet"),
            "expirationTimestamp": HOUR_LATER,
            "deltaSingleAction": {"add": without_tags(ADD) | {"path": url("p=a/part-0001.parquet")}},
        }
    }
    assert encoder("delta").file("add", ADD, ("p",)) == expected
    assert encoder("delta").entry_file("add", FileEntry(ADD, ("p",))) == expected


def test_partition_values_follow_the_partition_columns() -> None:
    action = ADD | {"partitionValues": {"p": "a", "stray": "x"}}
    assert encoder("parquet").file("add", action, ("p", "q"))["file"]["partitionValues"] == {
        "p": "a",
        "q": None,
    }
    assert encoder("parquet").file("add", action)["file"]["partitionValues"] == {"p": "a", "stray": "x"}


# -- change files ----------------------------------------------------------------------------------------


def parquet_change(kind: str, line_kind: str, with_stats: bool) -> dict[str, Any]:
    action = BY_KIND[kind]
    body: dict[str, Any] = {
        "url": url(action["path"]),
        "id": md5(action["path"]),
        "partitionValues": {"p": "a"},
        "size": action["size"],
    }
    if with_stats:
        body["stats"] = STATS
    return {
        line_kind: body | {"version": 2, "timestamp": 1_600_000_000_000, "expirationTimestamp": HOUR_LATER}
    }


def delta_change(kind: str) -> dict[str, Any]:
    action = BY_KIND[kind]
    return {
        "file": {
            "id": sha256(action["path"]),
            "version": 2,
            "timestamp": 1_600_000_000_000,
            "expirationTimestamp": HOUR_LATER,
            "deltaSingleAction": {kind: without_tags(action) | {"path": url(action["path"])}},
        }
    }


@pytest.mark.parametrize(
    ("response_format", "kind", "expected"),
    [
        ("parquet", "add", parquet_change("add", "add", with_stats=True)),
        ("parquet", "remove", parquet_change("remove", "remove", with_stats=False)),
        ("parquet", "cdc", parquet_change("cdc", "cdf", with_stats=False)),
        ("delta", "add", delta_change("add")),
        ("delta", "remove", delta_change("remove")),
        ("delta", "cdc", delta_change("cdc")),
    ],
)
def test_change_file_lines(response_format: str, kind: str, expected: dict[str, Any]) -> None:
    action = BY_KIND[kind]
    assert encoder(response_format).file(kind, action, ("p",), 2, 1_600_000_000_000) == expected
    change = FileChange(kind, action, ("p",), 2, 1_600_000_000_000)
    assert encoder(response_format).change(change) == expected


def test_change_of_a_file_carries_stats_only_on_adds() -> None:
    remove_with_stats = REMOVE | {"stats": STATS}
    line = encoder("parquet").change(FileChange("remove", remove_with_stats, ("p",), 2, 1))
    assert "stats" not in line["remove"]
    # The delta format passes the action through as it is.
    line = encoder("delta").change(FileChange("remove", remove_with_stats, ("p",), 2, 1))
    assert line["file"]["deltaSingleAction"]["remove"]["stats"] == STATS


# -- deletion vectors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("descriptor", [DV_ON_DISK, DV_ABSOLUTE], ids=["u", "p"])
def test_deletion_vector_on_disk_is_signed_in_the_delta_format(descriptor: dict[str, Any]) -> None:
    signer = Signer()
    lines = encoder("delta", signer)
    line = lines.file("add", ADD | {"deletionVector": descriptor}, ("p",))
    dv_key = f"{TABLE}/dv/{descriptor['cardinality']}.bin"
    assert signer.signed == [(BUCKET, f"{TABLE}/p=a/part-0001.parquet"), (BUCKET, dv_key)]
    dv_url = f"https://storage.test/{BUCKET}/{dv_key}?expires={HOUR_LATER}"
    assert line == {
        "file": {
            "id": sha256("p=a/part-0001.parquet"),
            "deletionVectorFileId": sha256(descriptor["pathOrInlineDv"]),
            "expirationTimestamp": HOUR_LATER,
            "deltaSingleAction": {
                "add": without_tags(ADD)
                | {
                    "path": url("p=a/part-0001.parquet"),
                    "deletionVector": descriptor | {"storageType": "p", "pathOrInlineDv": dv_url},
                }
            },
        }
    }


def test_inline_deletion_vector_is_left_alone() -> None:
    signer = Signer()
    line = encoder("delta", signer).file("add", ADD | {"deletionVector": DV_INLINE}, ("p",))
    assert signer.signed == [(BUCKET, f"{TABLE}/p=a/part-0001.parquet")]
    assert line == {
        "file": {
            "id": sha256("p=a/part-0001.parquet"),
            "expirationTimestamp": HOUR_LATER,
            "deltaSingleAction": {
                "add": without_tags(ADD) | {"path": url("p=a/part-0001.parquet"), "deletionVector": DV_INLINE}
            },
        }
    }


def test_parquet_format_signs_no_deletion_vector() -> None:
    signer = Signer()
    line = encoder("parquet", signer).file("add", ADD | {"deletionVector": DV_ON_DISK}, ("p",))
    assert signer.signed == [(BUCKET, f"{TABLE}/p=a/part-0001.parquet")]
    assert set(line["file"]) == {"url", "id", "partitionValues", "size", "stats", "expirationTimestamp"}


# -- expirations and ids ---------------------------------------------------------------------------------


def test_min_expiration_is_the_earliest_handed_out() -> None:
    dv_key = f"{TABLE}/dv/{DV_ON_DISK['cardinality']}.bin"
    signer = Signer({f"{TABLE}/{REMOVE['path']}": 600, dv_key: 60, f"{TABLE}/{CDC['path']}": 7200})
    lines = encoder("delta", signer)
    assert lines.min_expiration is None
    lines.file("add", ADD, ("p",))
    assert lines.min_expiration == HOUR_LATER
    lines.file("remove", REMOVE, ("p",), 2, 1)
    assert lines.min_expiration == 1_700_000_600_000
    line = lines.file("add", ADD | {"deletionVector": DV_ON_DISK}, ("p",))
    # The data file's URL lives an hour, its deletion vector's a minute: the line says the former,
    # the response the latter.
    assert line["file"]["expirationTimestamp"] == HOUR_LATER
    assert lines.min_expiration == 1_700_000_060_000
    lines.file("cdc", CDC, ("p",), 2, 1)
    assert lines.min_expiration == 1_700_000_060_000


@pytest.mark.parametrize(
    ("response_format", "hash_kind", "digest"),
    [
        ("parquet", None, md5),
        ("delta", None, sha256),
        ("parquet", "delta", sha256),
        ("delta", "parquet", md5),
        ("parquet", "parquet", md5),
    ],
)
def test_hash_kind_decides_the_ids(
    response_format: str, hash_kind: str | None, digest: Callable[[str], str]
) -> None:
    lines = encoder(response_format, hash_kind=hash_kind)
    assert lines.hash_kind == (hash_kind or response_format)
    line = lines.file("add", ADD | {"deletionVector": DV_ON_DISK}, ("p",))
    body = line["file"]
    assert body["id"] == digest("p=a/part-0001.parquet") == actions.file_id(ADD["path"], lines.hash_kind)
    if response_format == "delta":
        assert body["deletionVectorFileId"] == digest(DV_ON_DISK["pathOrInlineDv"])


# -- metadata and protocol changes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        ("parquet", {"metaData": PARQUET_METADATA | {"version": 5}}),
        (
            "delta",
            {"metaData": {"deltaMetadata": DELTA_METADATA, "version": 5, "size": 100, "numFiles": 1}},
        ),
    ],
)
def test_metadata_change(response_format: str, expected: dict[str, Any]) -> None:
    assert encoder(response_format).change(MetadataChange(snapshot(), 5)) == expected


def test_protocol_change() -> None:
    line = encoder("delta").change(ProtocolChange(snapshot(), 6))
    assert line == {"protocol": {"deltaProtocol": PROTOCOL, "version": 6}}
