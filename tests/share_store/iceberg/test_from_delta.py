"""Delta schemas and partitions in Iceberg's terms (`share_store.iceberg.from_delta`), without a server."""

from __future__ import annotations

import datetime
import decimal

import pytest
from pyiceberg.schema import Schema, index_by_id

from share_store.errors import UnsupportedOperation
from share_store.iceberg.from_delta import FieldIds, iceberg_schema, partition_spec, partition_value

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
