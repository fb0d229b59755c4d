"""Pure snapshot → parquet-format action mapping, tested without a server."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from share_store.delta import actions
from share_store.delta.snapshot import DeltaProtocol, DeltaSnapshot, file_key
from share_store.errors import UnsupportedOperation


def snapshot(configuration: dict | None = None, protocol: DeltaProtocol | None = None) -> DeltaSnapshot:
    schema = {
        "type": "struct",
        "fields": [
            {
                "name": "id",
                "type": "long",
                "nullable": True,
                "metadata": {"comment": "key", "delta.identity.highWaterMark": 3},
            },
            {"name": "p", "type": "date", "nullable": True, "metadata": {}},
        ],
    }
    files = pa.table(
        {
            "path": ["p=2024-01-01/a.parquet", "p=__HIVE_DEFAULT_PARTITION__/b%20c.parquet"],
            "size_bytes": [10, 20],
            "modification_time": [1, 2],
            "num_records": [3, None],
            "min": [{"id": 1}, None],
            "max": [{"id": 9}, None],
            "null_count": [{"id": 0}, None],
            "partition": [{"p": date(2024, 1, 1)}, {"p": None}],
        }
    )
    return DeltaSnapshot(
        version=7,
        protocol=protocol or DeltaProtocol(1, 2),
        metadata={
            "id": "m-id",
            "name": "orders",
            "description": None,
            "format": {"provider": "parquet"},
            "schemaString": json.dumps(schema),
            "partitionColumns": ["p"],
            "configuration": configuration or {},
            "createdTime": 0,
        },
        files=files,
    )


def test_metadata_line() -> None:
    meta = actions.parquet_metadata(snapshot({"delta.enableChangeDataFeed": "true"}), history_shared=True)[
        "metaData"
    ]
    assert meta["id"] == "m-id" and meta["name"] == "orders" and "description" not in meta
    assert meta["format"] == {"provider": "parquet"}
    assert meta["configuration"] == {"enableChangeDataFeed": "true"}
    assert meta["size"] == 30 and meta["numFiles"] == 2
    fields = json.loads(meta["schemaString"])["fields"]
    assert fields[0]["metadata"] == {"comment": "key"}
    assert (
        actions.parquet_metadata(snapshot({"delta.enableChangeDataFeed": "true"}), False)["metaData"][
            "configuration"
        ]
        == {}
    )


def test_file_entries_and_file_lines() -> None:
    first, second = actions.iter_file_entries(snapshot())
    assert first.partition_values == {"p": "2024-01-01"} and second.partition_values == {"p": None}
    assert json.loads(first.stats) == {
        "numRecords": 3,
        "minValues": {"id": 1},
        "maxValues": {"id": 9},
        "nullCount": {"id": 0},
    }
    assert second.stats is None
    line = actions.parquet_file(first, "https://x", 123)["file"]
    assert line == {
        "url": "https://x",
        "id": actions.file_id(first.path),
        "partitionValues": {"p": "2024-01-01"},
        "size": 10,
        "stats": first.stats,
        "expirationTimestamp": 123,
    }
    assert len(actions.file_id("a", "delta")) == 64
    assert actions.parquet_file(second, "u", 1, version=7)["file"]["version"] == 7


def test_object_keys_are_url_decoded_and_relative() -> None:
    assert file_key("t/path", "p=x/b%20c.parquet") == "t/path/p=x/b c.parquet"
    assert file_key("t", "x=A%252FA/f.parquet") == "t/x=A%2FA/f.parquet"
    for absolute in ("s3://other/bucket/f.parquet", "/etc/passwd", "file:///etc/passwd"):
        with pytest.raises(UnsupportedOperation):
            file_key("t", absolute)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        (True, "true"),
        (False, "false"),
        (5, "5"),
        (1.5, "1.5"),
        (Decimal("1.20"), "1.20"),
        (date(2024, 2, 29), "2024-02-29"),
        (datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05"),
        (datetime(2024, 1, 2, 3, 4, 5, 120000), "2024-01-02 03:04:05.12"),
        ("a/b c", "a/b c"),
    ],
)
def test_partition_value_strings(value: object, text: str | None) -> None:
    assert actions.partition_value_string(value) == text


def test_stats_values_are_json() -> None:
    entry = actions.FileEntry(
        "f",
        1,
        0,
        {},
        2,
        {"t": datetime(2024, 1, 1, tzinfo=UTC), "d": Decimal("1.5"), "n": float("nan"), "s": {"inner": 1}},
        None,
        None,
    )
    assert json.loads(entry.stats)["minValues"] == {
        "t": "2024-01-01T00:00:00.000Z",
        "d": 1.5,
        "s": {"inner": 1},
    }


@pytest.mark.parametrize(
    ("configuration", "protocol", "reason"),
    [
        ({"delta.columnMapping.mode": "name"}, DeltaProtocol(2, 5), "columnMapping"),
        (
            {"delta.enableDeletionVectors": "true"},
            DeltaProtocol(3, 7, ("deletionVectors",), ("deletionVectors",)),
            "deletion vectors",
        ),
        ({}, DeltaProtocol(3, 7, ("v2Checkpoint",), ("v2Checkpoint",)), "v2Checkpoint"),
    ],
)
def test_parquet_refuses_tables_it_cannot_describe(
    configuration: dict, protocol: DeltaProtocol, reason: str
) -> None:
    with pytest.raises(UnsupportedOperation, match=reason):
        actions.check_parquet_readable(snapshot(configuration, protocol))
    actions.check_parquet_readable(snapshot())


def test_real_table_snapshot(tmp_path: Path, testdata: Path) -> None:
    import shutil

    from share_store.delta.snapshot import DeltaTableReader
    from share_store.signing import UrlSigner
    from share_store.storage.local import LocalStorage

    shutil.copytree(testdata / "delta-0.8.0-special-partition", tmp_path / "bucket" / "t")
    storage = LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://x/files"))
    reader = DeltaTableReader(storage, "bucket", "t")
    snap = reader.snapshot()
    entries = list(actions.iter_file_entries(snap))
    assert sorted(e.partition_values["x"] for e in entries) == ["A/A", "B B"]
    reader.check_files_exist(snap)
