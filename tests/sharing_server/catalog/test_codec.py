"""The Iceberg REST catalog's bodies (`sharing_server.catalog.codec`): what a request body means, which
names it may use, and what a table load or commit answers. Pure functions, tested directly; the
tables they answer are made by a real `WarehouseCatalog` on SQLite and local storage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from share_store.catalog.catalog import LoadedTable, NewTable, WarehouseCatalog
from share_store.catalog.names import LEVEL_SEPARATOR, TableName
from share_store.errors import InvalidParameter
from sharing_server.catalog import codec
from tests.own_catalog import own_catalog

SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "name", "type": "string", "required": False},
    ],
}
SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType()))
V2 = {"format-version": "2"}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.fixture
def warehouse_catalog(tmp_path: Path, request: pytest.FixtureRequest) -> WarehouseCatalog:
    """The store's catalog itself, on SQLite (the folder's `catalog` is the served one)."""
    return own_catalog(tmp_path, request)


# -- json_object ------------------------------------------------------------------------------------


def test_json_object_reads_an_object() -> None:
    assert codec.json_object(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


@pytest.mark.parametrize(
    "raw", [b"", b"{not json", b'{"a": 1', b"\xff\xfe{}", b"'single'", b'{"a": NaN}', b'{"a": -Infinity}']
)
def test_json_object_refuses_what_is_not_json(raw: bytes) -> None:
    with pytest.raises(InvalidParameter, match="not valid JSON"):
        codec.json_object(raw)


@pytest.mark.parametrize("raw", [b"[]", b"[1, 2]", b'"text"', b"3", b"null", b"true"])
def test_json_object_refuses_json_that_is_not_an_object(raw: bytes) -> None:
    with pytest.raises(InvalidParameter, match="must be a JSON object"):
        codec.json_object(raw)


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000],
    ids=["arrays", "objects"],
)
def test_json_object_refuses_deep_nesting_as_a_bad_request_not_a_crash(raw: bytes) -> None:
    with pytest.raises(InvalidParameter, match="not valid JSON"):
        codec.json_object(raw)


def test_invalid_parameter_is_a_400() -> None:
    with pytest.raises(InvalidParameter) as refused:
        codec.json_object(b"[]")
    assert refused.value.status_code == 400


# -- names in the path ------------------------------------------------------------------------------


def test_table_at_reads_the_path_and_splits_namespace_levels_on_the_unit_separator() -> None:
    name = codec.table_at("whs", f"a{LEVEL_SEPARATOR}b{LEVEL_SEPARATOR}c", "t_1")
    assert name == TableName("whs", ("a", "b", "c"), "t_1")
    assert str(name) == "a.b.c.t_1"
    assert codec.table_at("whs", "ns", "t") == TableName("whs", ("ns",), "t")


@pytest.mark.parametrize("table", ["../x", "a/b", "..", ".hidden", "a%2Fb", "a b", "", "t\u2215x", "x" * 201])
def test_table_at_refuses_table_names_that_could_escape_or_hide(table: str) -> None:
    with pytest.raises(InvalidParameter, match="invalid table name"):
        codec.table_at("whs", "ns", table)


@pytest.mark.parametrize("warehouse", ["WHS", "ab", "has space", "../x", "a..b", "config", "oauth", "-whs"])
def test_table_at_and_namespace_at_refuse_bad_warehouses(warehouse: str) -> None:
    with pytest.raises(InvalidParameter, match="invalid warehouse name"):
        codec.table_at(warehouse, "ns", "t")
    with pytest.raises(InvalidParameter, match="invalid warehouse name"):
        codec.namespace_at(warehouse, "ns")


def test_namespace_at_reads_nested_levels() -> None:
    assert codec.namespace_at("whs", f"a{LEVEL_SEPARATOR}b") == ("whs", ("a", "b"))
    assert codec.namespace_at("my.warehouse-1", "ns") == ("my.warehouse-1", ("ns",))


@pytest.mark.parametrize(
    "namespace", ["", "a.b", "../x", "a/b", f"a{LEVEL_SEPARATOR}", LEVEL_SEPARATOR.join(["l"] * 17)]
)
def test_namespace_at_refuses_bad_namespaces(namespace: str) -> None:
    with pytest.raises(InvalidParameter, match="invalid namespace"):
        codec.namespace_at("whs", namespace)


def test_parent_namespace_is_none_for_the_top_level() -> None:
    assert codec.parent_namespace(None) == ()
    assert codec.parent_namespace("") == ()
    assert codec.parent_namespace(f"a{LEVEL_SEPARATOR}b") == ("a", "b")
    with pytest.raises(InvalidParameter):
        codec.parent_namespace("a/b")


# -- warehouses and namespaces ----------------------------------------------------------------------


def test_new_warehouse_reads_its_name_and_adopt() -> None:
    assert codec.new_warehouse(body({"name": "lake"})) == ("lake", False)
    assert codec.new_warehouse(body({"name": "lake", "adopt": True})) == ("lake", True)


@pytest.mark.parametrize("raw", [{}, {"name": None}, {"name": 5}, {"name": ["lake"]}])
def test_new_warehouse_must_be_named(raw: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameter, match="must name the warehouse"):
        codec.new_warehouse(body(raw))


@pytest.mark.parametrize("adopt", [1, 0, "true", None, []])
def test_new_warehouse_adopt_must_be_a_boolean(adopt: Any) -> None:
    with pytest.raises(InvalidParameter, match="adopt must be true or false"):
        codec.new_warehouse(body({"name": "lake", "adopt": adopt}))


@pytest.mark.parametrize("name", ["UPPER", "x", "config", "warehouses", "../lake"])
def test_new_warehouse_names_are_checked(name: str) -> None:
    with pytest.raises(InvalidParameter, match="invalid warehouse name"):
        codec.new_warehouse(body({"name": name}))


def test_new_namespace_reads_levels_and_properties() -> None:
    assert codec.new_namespace(body({"namespace": ["a", "b"], "properties": {"k": "v"}})) == (
        ("a", "b"),
        {"k": "v"},
    )
    assert codec.new_namespace(body({"namespace": ["a"]})) == (("a",), {})
    assert codec.new_namespace(body({"namespace": ["a"], "properties": None})) == (("a",), {})


@pytest.mark.parametrize("namespace", [None, "a", ["a", 1], [["a"]], {"a": 1}])
def test_new_namespace_must_be_a_list_of_strings(namespace: Any) -> None:
    with pytest.raises(InvalidParameter, match="must name the namespace"):
        codec.new_namespace(body({"namespace": namespace}))


@pytest.mark.parametrize("namespace", [[], ["a.b"], ["a", "../b"], ["l"] * 17])
def test_new_namespace_levels_are_checked(namespace: list[str]) -> None:
    with pytest.raises(InvalidParameter, match="invalid namespace"):
        codec.new_namespace(body({"namespace": namespace}))


def test_property_changes_reads_removals_and_updates() -> None:
    assert codec.property_changes(body({"removals": ["a"], "updates": {"b": "1"}})) == (["a"], {"b": "1"})
    assert codec.property_changes(body({})) == ([], {})


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"removals": "a"}, "removals must be a list"),
        ({"removals": ["a", 1]}, "removals must be a list"),
        ({"removals": {"a": 1}}, "removals must be a list"),
        ({"updates": ["a"]}, "updates must be an object"),
        ({"updates": "a=1"}, "updates must be an object"),
    ],
)
def test_property_changes_refuses_other_shapes(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidParameter, match=problem):
        codec.property_changes(body(raw))


# -- tables -----------------------------------------------------------------------------------------


def test_new_table_fills_the_optional_fields_pyiceberg_wants() -> None:
    table, new = codec.new_table("whs", ("ns",), body({"name": "t", "schema": SCHEMA_JSON}))
    assert table == TableName("whs", ("ns",), "t")
    assert isinstance(new, NewTable)
    assert new.schema == SCHEMA
    assert [field.name for field in new.schema.fields] == ["id", "name"]
    assert new.location is None and not new.stage and dict(new.properties) == {}
    assert new.partition_spec is None and new.sort_order is None


def test_new_table_reads_a_staged_create_with_its_location_and_properties() -> None:
    raw = {"name": "t", "schema": SCHEMA_JSON, "stage-create": True, "location": "file:///somewhere/t",
           "properties": V2, "partition-spec": {"spec-id": 0, "fields": []}}  # fmt: skip
    table, new = codec.new_table("whs", ("a", "b"), body(raw))
    assert table == TableName("whs", ("a", "b"), "t")
    assert new.stage is True
    assert new.location == "file:///somewhere/t"
    assert dict(new.properties) == V2
    assert new.partition_spec is not None and new.partition_spec.fields == ()


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"schema": SCHEMA_JSON}, "name"),
        ({"name": "t"}, "schema"),
        ({"name": "t", "schema": {"type": "struct", "fields": "no"}}, "schema"),
        ({"name": "t", "schema": SCHEMA_JSON, "stage-create": "maybe"}, "stage-create"),
    ],
)
def test_new_table_refuses_bodies_pyiceberg_cannot_read(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidParameter, match=f"invalid create table request: {problem}"):
        codec.new_table("whs", ("ns",), body(raw))


@pytest.mark.parametrize("name", ["../x", "a/b", "a.b", ""])
def test_new_table_checks_the_tables_name(name: str) -> None:
    with pytest.raises(InvalidParameter, match="invalid table name"):
        codec.new_table("whs", ("ns",), body({"name": name, "schema": SCHEMA_JSON}))


def test_a_created_table_is_what_the_new_table_asked_for(warehouse_catalog: WarehouseCatalog) -> None:
    raw = {"name": "t", "schema": SCHEMA_JSON, "properties": {**V2, "owner": "me"}}
    table, new = codec.new_table("whs", ("ns",), body(raw))
    loaded = warehouse_catalog.create_table(table, new)
    assert loaded.metadata.format_version == 2
    assert loaded.metadata.properties["owner"] == "me"
    assert loaded.metadata.schema() == SCHEMA


def test_commit_is_to_the_table_the_path_names_whatever_the_body_says() -> None:
    path = TableName.of("whs", ("a", "b"), "t")
    raw = {"identifier": {"namespace": ["other"], "name": "victim"},
           "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}  # fmt: skip
    request = codec.commit(path, body(raw))
    assert request.identifier is not None
    assert request.identifier.namespace.root == ["a", "b"] and request.identifier.name == "t"
    assert [update.action for update in request.updates] == ["set-properties"]
    # Without an identifier at all, the path names it too.
    assert codec.commit(path, b"{}").identifier.name == "t"


def test_commit_refuses_unknown_updates_and_requirements() -> None:
    path = TableName.of("whs", ("ns",), "t")
    with pytest.raises(InvalidParameter, match=r"invalid commit: updates\.0"):
        codec.commit(path, body({"updates": [{"action": "drop-everything"}]}))
    with pytest.raises(InvalidParameter, match=r"invalid commit: requirements\.0"):
        codec.commit(path, body({"requirements": [{"type": "assert-nothing"}]}))
    with pytest.raises(InvalidParameter, match="must be a JSON object"):
        codec.commit(path, b"[]")


def test_registration_defaults_overwrite_to_false() -> None:
    raw = {"name": "r", "metadata-location": "file:///m/00000-x.metadata.json"}
    assert codec.registration("whs", ("ns",), body(raw)) == (
        TableName("whs", ("ns",), "r"),
        "file:///m/00000-x.metadata.json",
        False,
    )
    assert codec.registration("whs", ("ns",), body({**raw, "overwrite": True}))[2] is True


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"name": "r"}, "metadata-location"),
        ({"metadata-location": "file:///m.json"}, "name"),
        ({"name": "r", "metadata-location": "file:///m.json", "overwrite": "perhaps"}, "overwrite"),
    ],
)
def test_registration_refuses_incomplete_bodies(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidParameter, match=f"invalid register table request: {problem}"):
        codec.registration("whs", ("ns",), body(raw))


def test_registration_checks_the_tables_name() -> None:
    with pytest.raises(InvalidParameter, match="invalid table name"):
        codec.registration("whs", ("ns",), body({"name": "../r", "metadata-location": "file:///m.json"}))


def test_renaming_reads_source_and_destination() -> None:
    raw = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["b", "c"], "name": "u"}}
    assert codec.renaming("whs", body(raw)) == (
        TableName("whs", ("a",), "t"),
        TableName("whs", ("b", "c"), "u"),
    )


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (None, "source must be"),
        ("a.t", "source must be"),
        ({"namespace": "a", "name": "t"}, "source must be"),
        ({"namespace": ["a"]}, "source must be"),
        ({"namespace": [], "name": "t"}, "invalid namespace"),
        ({"namespace": ["a", 3], "name": "t"}, "invalid namespace"),
        ({"namespace": ["a"], "name": "../t"}, "invalid table name"),
        ({"namespace": ["a"], "name": 5}, "invalid table name"),
        ({"namespace": ["../a"], "name": "t"}, "invalid namespace"),
    ],
)
def test_renaming_refuses_bad_identifiers(source: Any, problem: str) -> None:
    raw = {"source": source, "destination": {"namespace": ["b"], "name": "u"}}
    with pytest.raises(InvalidParameter, match=problem):
        codec.renaming("whs", body(raw))


def test_renaming_checks_the_destination_and_the_warehouse() -> None:
    source = {"namespace": ["a"], "name": "t"}
    with pytest.raises(InvalidParameter, match="destination must be"):
        codec.renaming("whs", body({"source": source}))
    with pytest.raises(InvalidParameter, match="invalid table name"):
        codec.renaming("whs", body({"source": source, "destination": {"namespace": ["a"], "name": "a/b"}}))
    with pytest.raises(InvalidParameter, match="invalid warehouse name"):
        codec.renaming("BAD", body({"source": source, "destination": source}))


def test_transaction_names_each_changes_table() -> None:
    raw = {"table-changes": [
        {"identifier": {"namespace": ["a"], "name": "t"}, "updates": []},
        {"identifier": {"namespace": ["b", "c"], "name": "u"}, "requirements": [{"type": "assert-create"}],
         "updates": []},
    ]}  # fmt: skip
    changes = codec.transaction("whs", body(raw))
    assert [table for table, _ in changes] == [
        TableName("whs", ("a",), "t"),
        TableName("whs", ("b", "c"), "u"),
    ]
    assert [req.type for req in changes[1][1].requirements] == ["assert-create"]


@pytest.mark.parametrize(
    "raw", [{}, {"table-changes": []}, {"table-changes": {"a": 1}}, {"table-changes": None}]
)
def test_transaction_must_list_some_changes(raw: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameter, match="must list the commits"):
        codec.transaction("whs", body(raw))


@pytest.mark.parametrize(
    "change", [{"updates": []}, {"identifier": None, "updates": []}], ids=["missing", "null"]
)
def test_transaction_refuses_a_change_without_identifier(change: dict[str, Any]) -> None:
    ok = {"identifier": {"namespace": ["a"], "name": "t"}, "updates": []}
    with pytest.raises(InvalidParameter, match="identifier"):
        codec.transaction("whs", body({"table-changes": [ok, change]}))


def test_transaction_checks_each_changes_names() -> None:
    change = {"identifier": {"namespace": ["a"], "name": "../t"}, "updates": []}
    with pytest.raises(InvalidParameter, match="invalid table name"):
        codec.transaction("whs", body({"table-changes": [change]}))
    with pytest.raises(InvalidParameter, match="invalid table change"):
        codec.transaction("whs", body({"table-changes": [5]}))


@pytest.mark.parametrize(("value", "mode"), [(None, "all"), ("", "all"), ("all", "all"), ("refs", "refs")])
def test_snapshots_mode(value: str | None, mode: str) -> None:
    assert codec.snapshots_mode(value) == mode


@pytest.mark.parametrize("value", ["bad", "REFS", "All", "refs,all"])
def test_snapshots_mode_refuses_others(value: str) -> None:
    with pytest.raises(InvalidParameter, match="snapshots must be 'all' or 'refs'"):
        codec.snapshots_mode(value)


# -- results ----------------------------------------------------------------------------------------


def _with_three_snapshots(warehouse_catalog: WarehouseCatalog) -> LoadedTable:
    """A v2 table with snapshots 1, 2 and 3: `main` at 3, tag `v1` at 1, nothing at 2."""
    name = TableName.of("whs", ("ns",), "t")
    created = warehouse_catalog.create_table(name, NewTable(SCHEMA, properties=V2))
    location = created.metadata.location
    updates: list[dict[str, Any]] = []
    for snapshot_id in (1, 2, 3):
        snapshot = {"snapshot-id": snapshot_id, "sequence-number": snapshot_id,
                    "timestamp-ms": 1_700_000_000_000 + snapshot_id, "schema-id": 0,
                    "manifest-list": f"{location}/metadata/snap-{snapshot_id}.avro",
                    "summary": {"operation": "append"}}  # fmt: skip
        if snapshot_id > 1:
            snapshot["parent-snapshot-id"] = snapshot_id - 1
        updates.append({"action": "add-snapshot", "snapshot": snapshot})
        updates.append({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                        "snapshot-id": snapshot_id})  # fmt: skip
    updates.append({"action": "set-snapshot-ref", "ref-name": "v1", "type": "tag", "snapshot-id": 1})
    return warehouse_catalog.commit(name, codec.commit(name, body({"updates": updates})))


def test_load_result_with_every_snapshot(warehouse_catalog: WarehouseCatalog) -> None:
    loaded = _with_three_snapshots(warehouse_catalog)
    result = codec.load_result(loaded)
    assert set(result) == {"metadata", "config", "metadata-location"}
    assert result["config"] == {}
    assert result["metadata-location"] == loaded.metadata_location
    assert [s["snapshot-id"] for s in result["metadata"]["snapshots"]] == [1, 2, 3]
    assert result["metadata"]["current-snapshot-id"] == 3
    assert result["metadata"]["table-uuid"] == str(loaded.metadata.table_uuid)


def test_load_result_with_refs_keeps_only_snapshots_a_branch_or_tag_points_at(
    warehouse_catalog: WarehouseCatalog,
) -> None:
    loaded = _with_three_snapshots(warehouse_catalog)
    result = codec.load_result(loaded, "refs")
    assert [s["snapshot-id"] for s in result["metadata"]["snapshots"]] == [1, 3]
    assert result["metadata"]["refs"] == {
        "main": {"snapshot-id": 3, "type": "branch"},
        "v1": {"snapshot-id": 1, "type": "tag"},
    }
    assert result["metadata"]["current-snapshot-id"] == 3
    # The table itself keeps all three: only the answer is trimmed.
    assert len(loaded.metadata.snapshots) == 3


def test_load_result_of_a_table_without_snapshots(warehouse_catalog: WarehouseCatalog) -> None:
    loaded = warehouse_catalog.create_table(
        TableName.of("whs", ("ns",), "empty"), NewTable(SCHEMA, properties=V2)
    )
    for mode in ("all", "refs"):
        result = codec.load_result(loaded, mode)
        assert result["metadata"].get("snapshots", []) == []
        assert result["metadata"]["location"] == loaded.metadata.location


def test_load_result_of_a_staged_create_has_no_metadata_location(warehouse_catalog: WarehouseCatalog) -> None:
    table, new = codec.new_table(
        "whs", ("ns",), body({"name": "s", "schema": SCHEMA_JSON, "stage-create": True})
    )
    staged = warehouse_catalog.create_table(table, new)
    result = codec.load_result(staged)
    assert "metadata-location" not in result
    assert result["metadata"]["schemas"][0]["fields"][0]["name"] == "id"
    assert not warehouse_catalog.table_exists(table)


def test_commit_result_names_the_new_metadata_file(warehouse_catalog: WarehouseCatalog) -> None:
    name = TableName.of("whs", ("ns",), "t")
    created = warehouse_catalog.create_table(name, NewTable(SCHEMA, properties=V2))
    request = codec.commit(name, body({"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}))
    committed = warehouse_catalog.commit(name, request)
    result = codec.commit_result(committed)
    assert set(result) == {"metadata-location", "metadata"}
    assert result["metadata-location"] == committed.metadata_location != created.metadata_location
    assert result["metadata"]["properties"]["k"] == "v"
    assert result["metadata"]["metadata-log"][-1]["metadata-file"] == created.metadata_location
    assert json.loads(json.dumps(result)) == result  # plain JSON, as the response sends it


def test_identifiers_result_is_the_spec_listing_of_one_namespace_in_one_page() -> None:
    assert codec.identifiers_result(("a", "b"), ["t1", "t2"]) == {
        "identifiers": [{"namespace": ["a", "b"], "name": "t1"}, {"namespace": ["a", "b"], "name": "t2"}],
        "next-page-token": None,
    }
    assert codec.identifiers_result(("a",), []) == {"identifiers": [], "next-page-token": None}
