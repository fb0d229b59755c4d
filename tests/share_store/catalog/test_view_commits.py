"""View metadata transitions (`share_store.catalog.view_commits`), as pure functions: a new
view, and commits applied to it as Iceberg's Java `ViewMetadata.Builder` applies them."""

from __future__ import annotations

from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewMetadata, ViewVersion

from share_store.catalog.errors import CommitConflict
from share_store.catalog.view_commits import ViewCommit, committed_view, created_view
from share_store.errors import InvalidParameter

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
WIDER = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False)
)
LOCATION = "s3://whs/ns/v-1"


def version(sql: str, schema_id: int = 0, dialect: str = "spark", at: int = 1_700_000_000_000) -> ViewVersion:
    representation = SQLViewRepresentation(type="sql", sql=sql, dialect=dialect)
    return ViewVersion(version_id=1, schema_id=schema_id, timestamp_ms=at, summary={},
                       representations=[representation], default_namespace=["ns"])  # fmt: skip


def as_json(model: Any) -> dict[str, Any]:
    return dict(model.model_dump(mode="json", by_alias=True, exclude_none=True))


def added(sql: str, schema_id: int = -1, at: int = 1_700_000_001_000) -> dict[str, Any]:
    return {"action": "add-view-version", "view-version": {**as_json(version(sql, schema_id, at=at)),
                                                           "version-id": -1}}  # fmt: skip


@pytest.fixture
def view() -> ViewMetadata:
    return created_view(SCHEMA, version("SELECT 1"), LOCATION, {"owner": "me"})


def test_a_new_view_has_schema_0_and_version_1_current(view: ViewMetadata) -> None:
    assert view.format_version == 1 and view.location == LOCATION
    assert [s.schema_id for s in view.schemas] == [0]
    assert view.current_version_id == 1 and [v.version_id for v in view.versions] == [1]
    assert [entry.version_id for entry in view.version_log] == [1]
    assert view.properties == {"owner": "me"}


def test_a_replace_adds_a_schema_and_a_version_and_makes_it_current(view: ViewMetadata) -> None:
    commit = ViewCommit.of({
        "requirements": [{"type": "assert-view-uuid", "uuid": str(view.view_uuid)}],
        "updates": [
            {"action": "add-schema", "schema": {**as_json(WIDER), "schema-id": -1}},
            added("SELECT id, name FROM t"),
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"comment": "wider"}},
            {"action": "remove-properties", "removals": ["owner"]},
        ],
    })  # fmt: skip
    replaced = committed_view(view, commit)
    assert [s.schema_id for s in replaced.schemas] == [0, 1]
    assert replaced.current_version_id == 2
    current = next(v for v in replaced.versions if v.version_id == 2)
    assert current.schema_id == 1  # -1: the schema this commit added
    assert [entry.version_id for entry in replaced.version_log] == [1, 2]
    assert replaced.properties == {"comment": "wider"}
    assert replaced.view_uuid == view.view_uuid


def test_a_version_identical_to_one_the_view_has_reuses_its_id(view: ViewMetadata) -> None:
    again = committed_view(view, ViewCommit.of({"updates": [
        added("SELECT 1", schema_id=0, at=1_700_000_000_000),
        {"action": "set-current-view-version", "view-version-id": -1},
    ]}))  # fmt: skip
    assert [v.version_id for v in again.versions] == [1] and again.current_version_id == 1


def test_only_the_newest_versions_are_kept(view: ViewMetadata) -> None:
    current = view.model_copy(update={"properties": {"version.history.num-entries": "3"}})
    for n in range(6):
        current = committed_view(current, ViewCommit.of({"updates": [
            added(f"SELECT {n + 2}", schema_id=0, at=1_700_000_001_000 + n),
            {"action": "set-current-view-version", "view-version-id": -1},
        ]}))  # fmt: skip
    assert len(current.versions) == 3
    assert current.current_version_id == max(v.version_id for v in current.versions)


def test_a_wrong_uuid_is_a_conflict_and_unknown_requirements_or_updates_are_refused(
    view: ViewMetadata,
) -> None:
    with pytest.raises(CommitConflict, match="uuid"):
        committed_view(view, ViewCommit.of({"requirements": [{"type": "assert-view-uuid", "uuid": "other"}]}))
    with pytest.raises(InvalidParameter, match="requirement"):
        ViewCommit.of({"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}]})
    with pytest.raises(InvalidParameter, match="update"):
        ViewCommit.of({"updates": [{"action": "add-snapshot"}]})
    with pytest.raises(InvalidParameter):
        ViewCommit.of({"updates": "not a list"})


def test_a_version_needs_one_sql_representation_per_dialect() -> None:
    two = version("SELECT 1")
    twice = two.model_copy(update={"representations": [*two.representations, *two.representations]})
    with pytest.raises(InvalidParameter):
        created_view(SCHEMA, twice, LOCATION, {})
