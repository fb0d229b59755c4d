"""The writable catalog's guarantees on local storage, SQLite and PostgreSQL: compare-and-swap, crash
safety, names, emptiness. Two replicas on one PostgreSQL race as two commits here do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import MetadataLogEntry
from pyiceberg.types import LongType, NestedField
from sqlalchemy import update

from share_store.catalog import table_pointers
from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.commits import created_metadata, metadata_json, parse_model
from share_store.catalog.errors import AlreadyExists, CommitConflict, MetadataFileMissing, NotEmpty
from share_store.catalog.names import TableName
from share_store.errors import InvalidParameter
from share_store.persistence.sql_schema import warehouse_tables_table

SCHEMA = Schema(NestedField(1, "id", LongType()))


def properties(key: str, value: str, table: str = "t") -> CommitTableRequest:
    body = {"identifier": {"namespace": ["ns"], "name": table},
            "updates": [{"action": "set-properties", "updates": {key: value}}]}  # fmt: skip
    return parse_model(CommitTableRequest, body, "commit")


def metadata_files(catalog: WarehouseCatalog) -> list[Path]:
    root = catalog.storage.root  # type: ignore[attr-defined]
    return sorted(root.glob("whs/ns/*/metadata/*.metadata.json"))


def test_a_commit_that_loses_the_race_is_a_conflict_and_the_winner_stays(catalog: WarehouseCatalog) -> None:
    name = TableName.of("whs", ("ns",), "t")
    catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}))
    with catalog.transactions.engine.connect() as conn:
        stale = table_pointers.table_pointer(conn, "whs", ("ns",), "t")
    catalog.commit(name, properties("first", "1"))
    with catalog.transactions.change() as conn, pytest.raises(CommitConflict, match="changed by another"):
        table_pointers.swap_table_pointer(conn, stale, "file:///elsewhere.metadata.json")
    assert catalog.load_table(name).metadata.properties["first"] == "1"


def test_a_crash_between_the_file_and_the_swap_leaves_the_old_metadata(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = TableName.of("whs", ("ns",), "t")
    created = catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}))

    def fail(*args: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(table_pointers, "swap_table_pointer", fail)
    with pytest.raises(RuntimeError):
        catalog.commit(name, properties("lost", "yes"))
    loaded = catalog.load_table(name)
    assert loaded.metadata_location == created.metadata_location
    assert "lost" not in loaded.metadata.properties
    assert len(metadata_files(catalog)) == 1  # the new file written before the swap was taken back


class CommitFailed(RuntimeError):
    """The database's answer to COMMIT was lost: the transaction may or may not have committed."""


def _commit_then_fail(catalog: WarehouseCatalog, committed: bool) -> Any:
    @contextmanager
    def change() -> Iterator[Any]:
        connection = catalog.transactions.engine.connect()
        transaction = connection.begin()
        try:
            yield connection
            (transaction.commit if committed else transaction.rollback)()
        finally:
            connection.close()
        raise CommitFailed("server closed the connection unexpectedly")

    return change


@pytest.mark.parametrize("committed", [True, False])
def test_a_commit_whose_outcome_is_unknown_deletes_no_file_a_pointer_names(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    name = TableName.of("whs", ("ns",), "t")
    created = catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}))
    monkeypatch.setattr(catalog, "_change", _commit_then_fail(catalog, committed))
    if committed:
        # The pointer was swapped: the commit happened, and its file stays.
        loaded = catalog.commit(name, properties("kept", "yes"))
        assert catalog.load_table(name).metadata_location == loaded.metadata_location
        assert len(metadata_files(catalog)) == 2
    else:
        with pytest.raises(CommitFailed):
            catalog.commit(name, properties("kept", "no"))
        assert catalog.load_table(name).metadata_location == created.metadata_location
        assert len(metadata_files(catalog)) == 1  # read again, found unused, taken back
    monkeypatch.undo()
    for path in metadata_files(catalog):
        assert path.exists()
    assert Path(str(catalog.load_table(name).metadata_location).removeprefix("file://")).exists()


def test_a_multi_table_commit_that_fails_on_one_table_creates_none(catalog: WarehouseCatalog) -> None:
    """All or nothing on SQLite too: a staged create first, then a table whose requirement fails."""
    existing = TableName.of("whs", ("ns",), "t")
    catalog.create_table(existing, NewTable(SCHEMA, properties={"format-version": "2"}))
    staged = catalog.create_table(
        TableName.of("whs", ("ns",), "new"), NewTable(SCHEMA, properties={"format-version": "2"}, stage=True)
    )
    assert staged.location is not None
    create = parse_model(CommitTableRequest, {
        "identifier": {"namespace": ["ns"], "name": "new"}, "requirements": [{"type": "assert-create"}],
        "updates": [{"action": "assign-uuid", "uuid": str(staged.metadata.table_uuid)},
                    {"action": "upgrade-format-version", "format-version": 2},
                    {"action": "add-schema", "schema": staged.metadata.schemas[0].model_dump(by_alias=True)},
                    {"action": "set-current-schema", "schema-id": -1},
                    {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
                    {"action": "set-default-spec", "spec-id": -1},
                    {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
                    {"action": "set-default-sort-order", "sort-order-id": -1},
                    {"action": "set-location", "location": staged.location.uri}]}, "commit")  # fmt: skip
    stale = parse_model(CommitTableRequest, {
        "identifier": {"namespace": ["ns"], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
        "updates": []}, "commit")  # fmt: skip
    with pytest.raises(CommitConflict):
        catalog.commit_transaction([(TableName.of("whs", ("ns",), "new"), create), (existing, stale)])
    assert not catalog.table_exists(TableName.of("whs", ("ns",), "new"))
    assert len(metadata_files(catalog)) == 1


def test_a_warehouse_over_a_bucket_that_exists_is_refused_and_leaves_no_row(
    catalog: WarehouseCatalog,
) -> None:
    (catalog.storage.root / "taken").mkdir()  # type: ignore[attr-defined]
    with pytest.raises(AlreadyExists, match="--adopt"):
        catalog.create_warehouse("taken")
    assert catalog.list_warehouses() == ["whs"]
    catalog.create_warehouse("taken", adopt=True)  # the provider's explicit choice
    assert catalog.list_warehouses() == ["taken", "whs"]


def test_the_pointer_always_names_a_file_that_exists(catalog: WarehouseCatalog) -> None:
    name = TableName.of("whs", ("ns",), "t")
    catalog.create_table(name, NewTable(SCHEMA))
    for n in range(3):
        loaded = catalog.commit(name, properties("n", str(n)))
        assert loaded.metadata_location is not None
        assert Path(loaded.metadata_location.removeprefix("file://")).exists()
    assert catalog.load_table(name).metadata.properties["n"] == "2"
    assert len(catalog.load_table(name).metadata.metadata_log) == 3


def test_two_catalogs_on_one_store_race_as_replicas_do(catalog: WarehouseCatalog) -> None:
    """Two replicas' catalogs over one database: each commit reads, writes its file, swaps; one loses."""
    name = TableName.of("whs", ("ns",), "t")
    catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}))
    other = WarehouseCatalog(catalog.transactions, catalog.storage)
    base = catalog.load_table(name).metadata
    pinned = {"type": "assert-last-assigned-field-id", "last-assigned-field-id": base.last_column_id}

    def guarded(key: str) -> CommitTableRequest:
        body = {"identifier": {"namespace": ["ns"], "name": "t"}, "requirements": [pinned],
                "updates": [{"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
                             "fields": [{"id": 1, "name": "id", "type": "long", "required": False},
                                        {"id": 2, "name": key, "type": "string", "required": False}]},
                             "last-column-id": 2}]}  # fmt: skip
        return parse_model(CommitTableRequest, body, "commit")

    catalog.commit(name, guarded("a"))
    with pytest.raises(CommitConflict):
        other.commit(name, guarded("b"))  # its requirement no longer holds: refresh and retry
    assert [f.name for f in catalog.load_table(name).metadata.schemas[-1].fields] == ["id", "a"]


def test_names_that_could_escape_or_hide_are_refused(catalog: WarehouseCatalog) -> None:
    for bad in ("..", "a/b", "a\nb", "x" * 256, ".dot", ""):
        with pytest.raises(InvalidParameter):
            TableName.of("whs", ("ns",), bad)
    for warehouse in ("UPPER", "a", "has space", "config", "warehouses", "../x"):
        with pytest.raises(InvalidParameter):
            catalog.create_warehouse(warehouse)
    assert catalog.list_warehouses() == ["whs"]


def test_a_location_outside_the_warehouse_is_refused(catalog: WarehouseCatalog, tmp_path: Path) -> None:
    name = TableName.of("whs", ("ns",), "t")
    for location in ((tmp_path / "root" / "other" / "t").as_uri(), (tmp_path / "elsewhere").as_uri(),
                     (tmp_path / "root" / "whs" / ".." / "other").as_uri()):  # fmt: skip
        with pytest.raises(InvalidParameter, match=r"not inside warehouse|not a normalised path"):
            catalog.create_table(name, NewTable(SCHEMA, location=location))
    assert not catalog.table_exists(name)


def test_namespaces_and_warehouses_go_only_when_empty(catalog: WarehouseCatalog) -> None:
    name = TableName.of("whs", ("ns",), "t")
    catalog.create_table(name, NewTable(SCHEMA))
    with pytest.raises(NotEmpty):
        catalog.drop_namespace("whs", ("ns",))
    with pytest.raises(NotEmpty):
        catalog.drop_warehouse("whs")
    with pytest.raises(AlreadyExists):
        catalog.create_table(name, NewTable(SCHEMA))
    catalog.drop_table(name, purge=True)
    assert metadata_files(catalog) == []
    catalog.drop_namespace("whs", ("ns",))
    catalog.drop_warehouse("whs")
    assert catalog.list_warehouses() == []


def test_namespace_table_defaults_apply_to_new_tables_and_the_tables_own_properties_win(
    catalog: WarehouseCatalog,
) -> None:
    catalog.create_namespace(
        "whs", ("v3",), {"table-default.format-version": "3", "table-default.owner": "x"}
    )
    plain = catalog.create_table(TableName.of("whs", ("v3",), "a"), NewTable(SCHEMA))
    assert plain.metadata.format_version == 3 and plain.metadata.properties["owner"] == "x"
    v2 = {"format-version": "2", "owner": "y"}
    asked = catalog.create_table(TableName.of("whs", ("v3",), "b"), NewTable(SCHEMA, properties=v2))
    assert asked.metadata.format_version == 2 and asked.metadata.properties["owner"] == "y"
    assert (
        catalog.create_table(TableName.of("whs", ("ns",), "c"), NewTable(SCHEMA)).metadata.format_version == 2
    )


def test_a_warehouses_table_defaults_sit_under_its_namespaces(catalog: WarehouseCatalog) -> None:
    assert catalog.update_warehouse_properties("whs", [], {"table-default.format-version": "3"}) == (
        ["table-default.format-version"],
        [],
        [],
    )
    assert (
        catalog.create_table(TableName.of("whs", ("ns",), "w"), NewTable(SCHEMA)).metadata.format_version == 3
    )
    catalog.create_namespace("whs", ("duck",), {"table-default.format-version": "2"})
    assert (
        catalog.create_table(TableName.of("whs", ("duck",), "d"), NewTable(SCHEMA)).metadata.format_version
        == 2
    )
    with pytest.raises(InvalidParameter, match="only table-default"):
        catalog.update_warehouse_properties("whs", [], {"owner": "x"})
    assert catalog.warehouse_properties("whs") == {"table-default.format-version": "3"}


def test_a_metadata_file_gone_from_storage_is_named_not_a_bare_error(catalog: WarehouseCatalog) -> None:
    name = TableName.of("whs", ("ns",), "t")
    created = catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}))
    path = Path(str(created.metadata_location).removeprefix("file://"))
    path.unlink()
    fresh = WarehouseCatalog(catalog.transactions, catalog.storage)  # nothing kept in memory
    with pytest.raises(MetadataFileMissing, match="cannot be read from storage") as refused:
        fresh.load_table(name)
    assert refused.value.status_code == 500 and refused.value.iceberg_type == "ServiceFailureException"
    with pytest.raises(MetadataFileMissing):
        fresh.commit(name, properties("k", "v"))


def test_a_table_made_before_locations_were_recorded_gets_its_own_recorded_once(
    catalog: WarehouseCatalog,
) -> None:
    name = TableName.of("whs", ("ns",), "t")
    created = catalog.create_table(name, NewTable(SCHEMA, properties={"format-version": "2"}))
    with catalog.transactions.engine.begin() as conn:  # as revision 0008 leaves a table made before it
        conn.execute(update(warehouse_tables_table).values(location=None))
    assert catalog.load_table(name).location is None
    assert created.location is not None and catalog.table_location(name) == created.location
    assert catalog.load_table(name).location == created.location  # recorded now
    # One whose metadata names the warehouse's root (accepted before) is not taken: no commit.
    at_root = created.metadata.model_copy(update={"location": (catalog.storage.root / "whs").as_uri()})  # type: ignore[attr-defined]
    legacy = catalog.storage.root / "whs" / "legacy.metadata.json"  # type: ignore[attr-defined]
    legacy.write_bytes(metadata_json(at_root))
    with catalog.transactions.engine.begin() as conn:
        table_pointers.insert_table(conn, "whs", ("ns",), "at_root", legacy.as_uri(), "x")
        conn.execute(update(warehouse_tables_table).where(warehouse_tables_table.c.name == "at_root")
                     .values(location=None))  # fmt: skip
    with pytest.raises(InvalidParameter, match="register its metadata again"):
        catalog.commit(TableName.of("whs", ("ns",), "at_root"), properties("k", "v"))


def test_a_staged_create_that_lost_the_race_is_a_conflict_not_a_moved_location(
    catalog: WarehouseCatalog,
) -> None:
    """pyiceberg's `test_concurrent_create_transaction`: a staged create's commit, its name taken
    meanwhile, is a 409 (CommitFailedException), checked before the location it asks for."""
    name = TableName.of("whs", ("ns",), "t")
    catalog.create_table(name, NewTable(SCHEMA))
    before = catalog.load_table(name).metadata_location
    staged = parse_model(CommitTableRequest, {
        "identifier": {"namespace": ["ns"], "name": "t"}, "requirements": [{"type": "assert-create"}],
        "updates": [{"action": "set-location", "location": "file:///x/t"}]}, "commit")  # fmt: skip
    with pytest.raises(CommitConflict, match="already exists"):
        catalog.commit(name, staged)
    stale = parse_model(CommitTableRequest, {
        "identifier": {"namespace": ["ns"], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}],
        "updates": [{"action": "set-location", "location": "file:///elsewhere/t"}]}, "commit")  # fmt: skip
    with pytest.raises(CommitConflict, match="Requirement failed"):
        catalog.commit(name, stale)
    assert catalog.load_table(name).metadata_location == before


# -- old metadata files: write.metadata.delete-after-commit.enabled ----------------------------------

DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"


def on_disk(uri: str | None) -> Path:
    return Path(str(uri).removeprefix("file://"))


def test_a_metadata_log_naming_files_outside_the_tables_metadata_folder_deletes_none_of_them(
    catalog: WarehouseCatalog, tmp_path: Path
) -> None:
    """A registered table's metadata log is the caller's to write: every file it names that is not one
    the catalog writes for this table (another table's, another warehouse's, a data file, a path
    escaping with `..`, another spelling of a file still tracked) stays when old versions go."""
    root: Path = catalog.storage.root  # type: ignore[attr-defined]
    victim = catalog.create_table(TableName.of("whs", ("ns",), "victim"), NewTable(SCHEMA))
    catalog.create_warehouse("other")
    catalog.create_namespace("other", ("ns",), {})
    elsewhere = catalog.create_table(TableName.of("other", ("ns",), "t"), NewTable(SCHEMA))
    folder = root / "whs" / "ns" / "evil"
    own_old = folder / "metadata" / "00000-old.metadata.json"  # the one file that is the table's to drop
    data_file = folder / "data" / "x.metadata.json"
    not_metadata = folder / "metadata" / "snap-1.avro"
    nested = folder / "metadata" / "deeper" / "y.metadata.json"
    outside = tmp_path / "outside.metadata.json"
    for planted in (own_old, data_file, not_metadata, nested, outside):
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.write_bytes(b"{}")
    victim_file = on_disk(victim.metadata_location)
    climb = f"metadata/../../{victim_file.parent.parent.name}/metadata/{victim_file.name}"
    registered = folder / "metadata" / "00001-registered.metadata.json"
    hostile = [
        str(victim.metadata_location),  # (a) another table's metadata file, same namespace
        data_file.as_uri(),  # (b) inside the location, outside metadata/
        f"{folder.as_uri()}/{climb}",  # (c) escaping the location with `..`
        f"{folder.as_uri()}/{climb.replace('..', '%2e%2e')}",
        str(elsewhere.metadata_location),  # (d) another warehouse's
        outside.as_uri(),  # outside the storage altogether
        not_metadata.as_uri(),
        nested.as_uri(),
        "file:" + str(registered),  # the registered file (kept in the new log), spelt another way
        own_old.as_uri(),
    ]
    asked = {"format-version": "2", DELETE_AFTER_COMMIT: "true", PREVIOUS_VERSIONS_MAX: "1"}
    metadata = created_metadata(SCHEMA, None, None, folder.as_uri(), asked)
    log_entries = [MetadataLogEntry(metadata_file=path, timestamp_ms=1) for path in hostile]
    registered.write_bytes(metadata_json(metadata.model_copy(update={"metadata_log": log_entries})))
    name = TableName.of("whs", ("ns",), "t")
    catalog.register_table(name, registered.as_uri())

    committed = catalog.commit(name, properties("k", "v"))

    assert not own_old.exists()  # the deletion ran: what is the table's own did go
    for kept in (victim_file, data_file, not_metadata, nested, outside, registered,
                 on_disk(elsewhere.metadata_location), on_disk(committed.metadata_location)):  # fmt: skip
        assert kept.exists(), kept
    assert catalog.load_table(name).metadata.properties["k"] == "v"
    assert catalog.load_table(TableName.of("whs", ("ns",), "victim")).metadata_location == str(
        victim.metadata_location
    )
    assert catalog.load_table(TableName.of("other", ("ns",), "t")).metadata_location is not None


def test_old_metadata_files_go_after_commits_unless_the_table_keeps_them(
    catalog: WarehouseCatalog,
) -> None:
    # Unset, as explicitly "true": the catalog keeps a table's newest files (the log and the current).
    for name, asked in (("t", {DELETE_AFTER_COMMIT: "true"}), ("unset", {})):
        trimmed = TableName.of("whs", ("ns",), name)
        catalog.create_table(trimmed, NewTable(SCHEMA, properties={**asked, PREVIOUS_VERSIONS_MAX: "2"}))
        for n in range(6):
            catalog.commit(trimmed, properties("n", str(n), table=name))
        loaded = catalog.load_table(trimmed)
        assert loaded.metadata.properties["n"] == "5" and len(loaded.metadata.metadata_log) == 2
        tracked = [loaded.metadata_location, *(entry.metadata_file for entry in loaded.metadata.metadata_log)]
        own = [f for f in metadata_files(catalog) if f.parent.parent.name.startswith(f"{name}-")]
        assert own == sorted(on_disk(path) for path in tracked)
        catalog.drop_table(trimmed)
    # "false", as Iceberg's own default: the log is trimmed by its own property, every file stays.
    kept = TableName.of("whs", ("ns",), "kept")
    catalog.create_table(kept, NewTable(SCHEMA, properties={DELETE_AFTER_COMMIT: "false",
                                                            PREVIOUS_VERSIONS_MAX: "3"}))  # fmt: skip
    for n in range(6):
        catalog.commit(kept, properties("n", str(n), table="kept"))
    assert len(catalog.load_table(kept).metadata.metadata_log) == 3
    assert len([f for f in metadata_files(catalog) if f.parent.parent.name.startswith("kept-")]) == 7


def test_a_transaction_drops_each_tables_old_metadata_files_once_it_committed(
    catalog: WarehouseCatalog,
) -> None:
    names = [TableName.of("whs", ("ns",), table) for table in ("a", "b")]
    for name in names:
        catalog.create_table(name, NewTable(SCHEMA, properties={DELETE_AFTER_COMMIT: "true",
                                                                PREVIOUS_VERSIONS_MAX: "1"}))  # fmt: skip
    for n in range(3):
        catalog.commit_transaction([(name, properties("n", str(n), table=name.name)) for name in names])
    assert len(metadata_files(catalog)) == 4  # each table's current file and the one in its log


@pytest.mark.parametrize("error", [PermissionError("storage refused"), RuntimeError("storage went away")])
def test_a_storage_error_deleting_old_metadata_files_leaves_the_commit_committed(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    error: Exception,
) -> None:  # fmt: skip
    name = TableName.of("whs", ("ns",), "t")
    catalog.create_table(name, NewTable(SCHEMA, properties={DELETE_AFTER_COMMIT: "true",
                                                            PREVIOUS_VERSIONS_MAX: "1"}))  # fmt: skip
    catalog.commit(name, properties("n", "0"))

    def fail(bucket: str, keys: Any) -> None:
        raise error

    monkeypatch.setattr(catalog.storage, "delete", fail)
    committed = catalog.commit(name, properties("n", "1"))
    loaded = catalog.load_table(name)
    assert loaded.metadata_location == committed.metadata_location
    assert loaded.metadata.properties["n"] == "1"
    assert len(metadata_files(catalog)) == 3  # the one that should have gone is still there
    assert "old metadata files" in caplog.text
