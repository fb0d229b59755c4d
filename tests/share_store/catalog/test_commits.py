"""The metadata transitions written by hand: v3 metadata files and row lineage, and commit refusals."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import MetadataLogEntry, TableMetadata
from pyiceberg.types import LongType, NestedField

from share_store.catalog.commits import (
    committed_metadata,
    created_metadata,
    format_version,
    metadata_dict,
    metadata_file_location,
    metadata_json,
    next_file_version,
    parse_model,
    read_metadata,
    removed_metadata_files,
)
from share_store.catalog.errors import CommitConflict, NoSuchTable
from share_store.errors import InvalidParameter

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True))
LOCATION = "s3://wh/ns/t-1"


def created(version: int = 3) -> TableMetadata:
    return created_metadata(SCHEMA, None, None, LOCATION, {"format-version": str(version)})


def snapshot(snapshot_id: int, first_row_id: int | None, added_rows: int | None, parent: int | None = None,
             sequence: int = 1) -> dict[str, Any]:  # fmt: skip
    body: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence,
        "timestamp-ms": 1_700_000_000_000 + snapshot_id,
        "manifest-list": f"{LOCATION}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    if first_row_id is not None:
        body["first-row-id"] = first_row_id
    if added_rows is not None:
        body["added-rows"] = added_rows
    return body


def commit(*updates: dict[str, Any], requirements: tuple[dict[str, Any], ...] = ()) -> CommitTableRequest:
    body = {
        "identifier": {"namespace": ["ns"], "name": "t"},
        "requirements": list(requirements),
        "updates": list(updates),
    }
    return parse_model(CommitTableRequest, body, "commit")


def append(
    snapshot_id: int, first_row_id: int | None, added_rows: int | None, **kw: Any
) -> CommitTableRequest:
    return commit(
        {"action": "add-snapshot", "snapshot": snapshot(snapshot_id, first_row_id, added_rows, **kw)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    )


def test_a_new_table_is_v2_by_default_as_every_engine_writes_it() -> None:
    metadata = created_metadata(SCHEMA, None, None, LOCATION, {})
    assert metadata.format_version == 2
    assert "next-row-id" not in json.loads(metadata_json(metadata))


def test_a_v3_table_asked_for_starts_its_row_lineage() -> None:
    metadata = created_metadata(SCHEMA, None, None, LOCATION, {"format-version": "3"})
    assert metadata.format_version == 3
    assert json.loads(metadata_json(metadata))["next-row-id"] == 0
    assert "format-version" not in metadata.properties  # the version is the field, not a property


def test_v1_and_v2_are_made_on_request_and_other_versions_refused() -> None:
    assert created(1).format_version == 1 and created(2).format_version == 2
    assert "next-row-id" not in json.loads(metadata_json(created(2)))
    for bad in ("4", "0", "three"):
        with pytest.raises(InvalidParameter, match="format-version"):
            format_version({"format-version": bad})


def test_v3_metadata_files_are_written_and_read_back_unchanged() -> None:
    metadata = committed_metadata(
        created(), "s3://wh/ns/t-1/metadata/00000-a.metadata.json", append(5, 0, 10)
    )
    text = metadata_json(metadata)
    again = read_metadata(text)
    assert again == metadata and again.format_version == 3
    assert json.loads(text)["snapshots"][0]["first-row-id"] == 0


def test_each_added_snapshot_moves_next_row_id_by_its_added_rows() -> None:
    first = committed_metadata(created(), None if False else "x/00000-a.metadata.json", append(1, 0, 10))
    assert first.next_row_id == 10  # type: ignore[union-attr]
    second = committed_metadata(first, "x/00001-b.metadata.json", append(2, 10, 5, parent=1, sequence=2))
    assert second.next_row_id == 15  # type: ignore[union-attr]
    assert metadata_dict(second)["next-row-id"] == 15


def test_a_snapshot_starting_below_next_row_id_is_a_conflict_to_retry() -> None:
    first = committed_metadata(created(), "x/00000-a.metadata.json", append(1, 0, 10))
    with pytest.raises((CommitConflict, InvalidParameter)):
        committed_metadata(first, "x/00001-b.metadata.json", append(2, 3, 5, parent=1, sequence=2))


def test_a_v3_snapshot_without_first_row_id_or_added_rows_is_refused() -> None:
    with pytest.raises(InvalidParameter, match=r"first-row-id|first row id"):
        committed_metadata(created(), "x/00000-a.metadata.json", append(1, None, 10))
    with pytest.raises(InvalidParameter, match="added-rows"):
        committed_metadata(created(), "x/00000-a.metadata.json", append(1, 0, None))


def test_a_table_upgraded_to_v3_in_the_commit_that_adds_a_snapshot_keeps_its_lineage() -> None:
    """pyiceberg alone would drop next-row-id here: the base (v2) had none."""
    upgraded = committed_metadata(
        created(2),
        "x/00000-a.metadata.json",
        commit(
            {"action": "upgrade-format-version", "format-version": 3},
            {"action": "add-snapshot", "snapshot": snapshot(7, 0, 4)},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
        ),
    )
    assert upgraded.format_version == 3
    assert upgraded.next_row_id == 4  # type: ignore[union-attr]


def test_v2_tables_carry_no_row_lineage() -> None:
    metadata = committed_metadata(created(2), "x/00000-a.metadata.json", append(1, None, None))
    assert "next-row-id" not in metadata_dict(metadata)


def test_failed_requirements_are_commit_conflicts() -> None:
    base = created()
    wrong_uuid = {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}
    with pytest.raises(CommitConflict, match="Requirement failed"):
        committed_metadata(base, "x/00000-a.metadata.json", commit(requirements=(wrong_uuid,)))
    stale_ref = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42}
    with pytest.raises(CommitConflict) as conflict:
        committed_metadata(base, "x/00000-a.metadata.json", commit(requirements=(stale_ref,)))
    # Said once (pyiceberg's message starts with it; writers saw it twice in the fault soak).
    assert str(conflict.value).count("Requirement failed") == 1, conflict.value
    with pytest.raises(CommitConflict, match="already exists"):
        committed_metadata(base, "x/00000-a.metadata.json", commit(requirements=({"type": "assert-create"},)))


def test_a_commit_to_a_missing_table_needs_assert_create() -> None:
    with pytest.raises(NoSuchTable):
        committed_metadata(None, None, commit({"action": "set-properties", "updates": {"a": "b"}}))


def test_a_staged_create_builds_the_table_from_its_updates() -> None:
    staged = created(2)
    updates = (
        {"action": "assign-uuid", "uuid": str(staged.table_uuid)},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": json.loads(SCHEMA.model_dump_json())},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": LOCATION},
    )
    metadata = committed_metadata(None, None, commit(*updates, requirements=({"type": "assert-create"},)))
    assert metadata.location == LOCATION and metadata.format_version == 2
    assert metadata.schema().find_field("id").field_id == 1


def test_unknown_updates_and_malformed_bodies_are_400s() -> None:
    with pytest.raises(InvalidParameter, match="invalid commit"):
        commit({"action": "drop-everything"})
    with pytest.raises(InvalidParameter, match="invalid commit"):
        parse_model(CommitTableRequest, b"{not json", "commit")


def test_metadata_files_are_numbered_after_the_one_they_replace() -> None:
    assert next_file_version(None) == 0
    assert (
        next_file_version("s3://wh/t/metadata/00007-6c97e413-d51b-4538-ac70-12fe2a85cb83.metadata.json") == 8
    )
    location = metadata_file_location(created().location, 8)
    assert location.startswith(f"{LOCATION}/metadata/00008-") and location.endswith(".metadata.json")


def test_a_staged_create_at_v3_upgrades_the_empty_metadata_by_hand() -> None:
    """pyiceberg 0.12 refuses `upgrade-format-version` to 3; Spark's staged creates send it."""
    updates = (
        {"action": "assign-uuid", "uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1"},
        {"action": "upgrade-format-version", "format-version": 3},
        {"action": "add-schema", "schema": json.loads(SCHEMA.model_dump_json())},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": LOCATION},
        {"action": "add-snapshot", "snapshot": snapshot(3, 0, 6)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 3},
    )
    metadata = committed_metadata(None, None, commit(*updates, requirements=({"type": "assert-create"},)))
    assert metadata.format_version == 3
    written = json.loads(metadata_json(metadata))
    assert written["next-row-id"] == 6 and written["format-version"] == 3
    assert read_metadata(metadata_json(metadata)).current_snapshot().first_row_id == 0  # type: ignore[union-attr]


def test_an_existing_v2_table_upgraded_to_v3_alone_starts_its_lineage_at_zero() -> None:
    base = committed_metadata(created(2), "x/00000-a.metadata.json", append(1, None, None))
    upgrade = commit({"action": "upgrade-format-version", "format-version": 3})
    upgraded = committed_metadata(base, "x/00001-b.metadata.json", upgrade)
    assert upgraded.format_version == 3 and metadata_dict(upgraded)["next-row-id"] == 0
    assert len(upgraded.snapshots) == 1


@pytest.mark.parametrize(
    "updates",
    [
        [{"action": "set-statistics"}],
        [
            {
                "action": "add-schema",
                "schema": {"type": "struct", "fields": [{"id": 1, "name": "x", "type": None}]},
            }
        ],
    ],
)
def test_shapes_pyiceberg_does_not_expect_are_400s_not_500s(updates: list[dict[str, Any]]) -> None:
    with pytest.raises(InvalidParameter):
        parse_model(
            CommitTableRequest, {"identifier": {"namespace": ["ns"], "name": "t"}, "updates": updates}, "c"
        )


def properties(**updates: str) -> CommitTableRequest:
    return commit({"action": "set-properties", "updates": updates})


def versions(count: int, **table_properties: str) -> list[TableMetadata]:
    """A v2 table and `count` commits, metadata file `n` at `file(n)`."""
    chain = [created_metadata(SCHEMA, None, None, LOCATION, {"format-version": "2", **table_properties})]
    for n in range(count):
        chain.append(committed_metadata(chain[-1], file(n), properties(n=str(n))))
    return chain


def file(n: int) -> str:
    return f"{LOCATION}/metadata/{n:05d}-x.metadata.json"


def test_pyiceberg_trims_the_metadata_log_to_previous_versions_max() -> None:
    chain = versions(6, **{"write.metadata.previous-versions-max": "3"})
    assert [e.metadata_file for e in chain[-1].metadata_log] == [file(3), file(4), file(5)]
    assert len(versions(6)[-1].metadata_log) == 6  # the default keeps 100


def test_old_metadata_files_are_removed_unless_the_new_metadata_keeps_them() -> None:
    trimmed = {"write.metadata.previous-versions-max": "2"}
    off = versions(4, **trimmed, **{"write.metadata.delete-after-commit.enabled": "false"})
    assert removed_metadata_files(off[3], file(3), off[4], file(4)) == []
    unset = versions(4, **trimmed)  # this catalog's default (Iceberg's is false): trimmed
    assert removed_metadata_files(unset[3], file(3), unset[4], file(4)) == [file(1)]
    on = versions(4, **trimmed, **{"write.metadata.delete-after-commit.enabled": "true"})
    # Base file(3) was at version 3, logging file(1), file(2); the new logs file(2), file(3).
    assert removed_metadata_files(on[3], file(3), on[4], file(4)) == [file(1)]
    # Java's Boolean.parseBoolean: "TRUE" is true, anything but "true" is false.
    shouting = on[4].model_copy(update={"properties": {"write.metadata.delete-after-commit.enabled": "TRUE"}})
    assert removed_metadata_files(on[3], file(3), shouting, file(4)) == [file(1)]
    vague = on[4].model_copy(update={"properties": {"write.metadata.delete-after-commit.enabled": "yes"}})
    assert removed_metadata_files(on[3], file(3), vague, file(4)) == []


def test_the_base_file_goes_when_the_new_log_drops_it_and_the_new_file_never() -> None:
    on = versions(2, **{"write.metadata.delete-after-commit.enabled": "true"})
    # A commit that changed nothing logs nothing: the file it replaces is tracked no more.
    assert removed_metadata_files(on[2], file(2), on[2], file(3)) == [file(2)]
    logged_new = [*on[2].metadata_log, MetadataLogEntry(metadata_file=file(3), timestamp_ms=1)]
    naming_new = on[2].model_copy(update={"metadata_log": logged_new})
    assert file(3) not in removed_metadata_files(naming_new, file(2), on[2], file(3))
