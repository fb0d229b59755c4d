"""Delta schemas, partitions and grants in Iceberg's terms, without a server."""

from __future__ import annotations

import datetime
import decimal

import pytest
from pyiceberg.schema import Schema, index_by_id

from share_store.errors import UnsupportedOperation
from share_store.iceberg.catalog_view import ReadableFiles, shared_metadata
from share_store.iceberg.from_delta import FieldIds, iceberg_schema, partition_spec, partition_value
from share_store.signing.request_signing import SigningRefused, parse_object_request

NESTED = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": False, "metadata": {}},
        {
            "name": "address",
            "type": {
                "type": "struct",
                "fields": [
                    {"name": "city", "type": "string", "nullable": True, "metadata": {}},
                    {"name": "zip", "type": "integer", "nullable": True, "metadata": {}},
                ],
            },
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "tags",
            "type": {"type": "array", "elementType": "string", "containsNull": False},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "scores",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": "decimal(10,2)",
                "valueContainsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
        {"name": "at", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
    ],
}


def test_a_nested_schema_gets_unique_ids_and_a_matching_name_mapping() -> None:
    ids = FieldIds()
    mapped = iceberg_schema(NESTED, ids)
    schema = Schema.model_validate({**mapped.schema, "schema-id": 0})  # pyiceberg accepts it
    assert [f.name for f in schema.fields] == ["id", "address", "tags", "scores", "at", "day"]
    assert schema.find_field("id").required
    assert str(schema.find_type("scores")) == "map<string, decimal(10, 2)>"
    assert str(schema.find_type("at")) == "timestamp"  # ntz; Delta `timestamp` is timestamptz
    # id, address (city, zip), tags (element), scores (key, value), at, day: eleven distinct ids.
    assert sorted(index_by_id(schema)) == list(range(1, 12)) and ids.last == 11
    names = {entry["names"][0]: entry for entry in mapped.name_mapping}
    assert [child["names"] for child in names["address"]["fields"]] == [["city"], ["zip"]]
    assert names["tags"]["fields"][0]["names"] == ["element"]


def test_column_mapping_ids_and_physical_names_are_kept() -> None:
    delta = {
        "type": "struct",
        "fields": [
            {
                "name": "a b",
                "type": "string",
                "nullable": True,
                "metadata": {"delta.columnMapping.id": 7, "delta.columnMapping.physicalName": "col-1234"},
            },
            {"name": "plain", "type": "long", "nullable": True, "metadata": {}},
        ],
    }
    mapped = iceberg_schema(delta, FieldIds())
    assert mapped.top_level["a b"][0] == 7
    assert mapped.top_level["plain"][0] == 8  # assigned above every mapped id
    assert mapped.name_mapping[0] == {"field-id": 7, "names": ["col-1234"]}
    assert mapped.physical == {"a b": "col-1234", "plain": "plain"}


def test_partitions_are_identity_and_values_convert() -> None:
    mapped = iceberg_schema(NESTED, FieldIds())
    spec = partition_spec(["day", "id"], mapped)
    assert [(f["source-id"], f["field-id"], f["transform"]) for f in spec["fields"]] == [
        (mapped.top_level["day"][0], 1000, "identity"),
        (mapped.top_level["id"][0], 1001, "identity"),
    ]
    with pytest.raises(UnsupportedOperation):
        partition_spec(["missing"], mapped)
    assert (
        partition_value("2021-02-03", "date") == (datetime.date(2021, 2, 3) - datetime.date(1970, 1, 1)).days
    )
    assert partition_value("12", "long") == 12
    assert partition_value(None, "string") is None
    assert partition_value("1.50", "decimal(10, 2)") == decimal.Decimal("1.50")
    assert partition_value("2021-01-01 00:00:01", "timestamptz") == 1609459201_000_000
    with pytest.raises(UnsupportedOperation):
        iceberg_schema({"type": "struct", "fields": [{"name": "v", "type": "variant"}]}, FieldIds())


def snapshot(snapshot_id: int, parent: int | None) -> dict:
    entry = {
        "snapshot-id": snapshot_id,
        "timestamp-ms": snapshot_id,
        "manifest-list": f"s3://b/{snapshot_id}",
    }
    return entry | ({"parent-snapshot-id": parent} if parent else {})


def test_the_grant_cuts_metadata_to_the_ancestry_or_the_current_snapshot() -> None:
    metadata = {
        "format-version": 3,
        "current-snapshot-id": 3,
        # 4 is on a branch, not an ancestor of the current snapshot.
        "snapshots": [snapshot(1, None), snapshot(2, 1), snapshot(3, 2), snapshot(4, 2)],
        "snapshot-log": [{"snapshot-id": i, "timestamp-ms": i} for i in (1, 2, 3)],
        "refs": {"main": {"snapshot-id": 3, "type": "branch"}, "dev": {"snapshot-id": 4, "type": "branch"}},
        "metadata-log": [{"metadata-file": "s3://b/v1.metadata.json", "timestamp-ms": 1}],
        "statistics": [{"snapshot-id": 1, "statistics-path": "s3://b/s1.puffin"}],
    }
    history = shared_metadata(metadata, history_shared=True)
    assert [s["snapshot-id"] for s in history["snapshots"]] == [1, 2, 3]
    assert list(history["refs"]) == ["main"] and history["metadata-log"] == []
    assert history["format-version"] == 3  # the provider's JSON, not rewritten
    latest = shared_metadata(metadata, history_shared=False)
    assert [s["snapshot-id"] for s in latest["snapshots"]] == [3]
    assert latest["snapshot-log"] == [{"snapshot-id": 3, "timestamp-ms": 3}]
    assert latest["statistics"] == []


def test_readable_files_by_prefix_or_exactly() -> None:
    readable = ReadableFiles([("b", "wh/t/")], exact=frozenset({("b", "landing/x.parquet")}))
    assert readable.allows("b", "wh/t/data/1.parquet")
    assert readable.allows("b", "landing/x.parquet")
    assert not readable.allows("b", "wh/t2/data/1.parquet")  # a sibling sharing the name's start
    assert not readable.allows("other", "wh/t/data/1.parquet")


@pytest.mark.parametrize(
    ("method", "uri", "reason"),
    [
        ("PUT", "http://s3:9000/b/k", "only GET and HEAD"),
        ("GET", "http://s3:9000/b/k?acl", "query string"),
        ("GET", "https://s3:9000/b/k", "endpoint"),
        ("GET", "http://evil:9000/b/k", "endpoint"),
        ("GET", "http://s3:9000/b/a/../k", "one object"),
        ("GET", "http://s3:9000/b/a//k", "one object"),
        ("GET", "http://s3:9000/b", "one object"),
    ],
)
def test_sign_requests_that_are_not_one_object_read_are_refused(method: str, uri: str, reason: str) -> None:
    with pytest.raises(SigningRefused, match=reason):
        parse_object_request(method, uri, {}, "http://s3:9000")


def test_both_addressing_styles_name_the_object_and_only_range_and_amz_headers_are_kept() -> None:
    headers = {"Range": ["bytes=0-9"], "User-Agent": ["x"], "x-amz-checksum-mode": ["ENABLED"]}
    path_style = parse_object_request("get", "http://s3:9000/b/dir/a%20b.parquet", headers, "http://s3:9000")
    assert (path_style.method, path_style.bucket, path_style.key) == ("GET", "b", "dir/a b.parquet")
    assert path_style.headers == {"range": "bytes=0-9", "x-amz-checksum-mode": "ENABLED"}
    virtual = parse_object_request("HEAD", "http://b.s3:9000/dir/k", {}, "http://s3:9000")
    assert (virtual.bucket, virtual.key) == ("b", "dir/k")
