"""Snapshot expiry: which snapshots and refs go (Iceberg's `RemoveSnapshots` rules with S3 Tables'
settings), and the guarded commit that drops them on SQLite and PostgreSQL, racing a writer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.types import LongType, NestedField

from share_store.catalog.catalog import LoadedTable, NewTable, WarehouseCatalog
from share_store.catalog.commits import created_metadata, metadata_dict, parse_model
from share_store.catalog.errors import CommitConflict
from share_store.catalog.maintenance.configuration import SnapshotManagement
from share_store.catalog.maintenance.expiry import (
    MAX_REF_AGE_MS,
    MAX_SNAPSHOT_AGE_MS,
    MIN_SNAPSHOTS_TO_KEEP,
    Expiry,
    expire_snapshots,
    expired,
    expiry_commit,
)
from share_store.catalog.names import TableName

SCHEMA = Schema(NestedField(1, "id", LongType()))
LOCATION = "s3://wh/ns/t-1"
NOW = 1_800_000_000_000
HOUR = 3_600_000
#: S3 Tables' defaults: keep 1, expire after 120 hours.
DEFAULTS = SnapshotManagement()


# -- expired: the pure decision ----------------------------------------------------------------------


def snap(snapshot_id: int, age_hours: float, parent: int | None = None) -> dict[str, Any]:
    """A snapshot `age_hours` before NOW; ids double as sequence numbers (they only grow)."""
    body: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": snapshot_id,
        "timestamp-ms": NOW - int(age_hours * HOUR),
        "manifest-list": f"{LOCATION}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    return body


def chain(*ages: float, first: int = 1, parent: int | None = None) -> list[dict[str, Any]]:
    """Snapshots `first`, `first + 1`, ... each the parent of the next, oldest first."""
    out: list[dict[str, Any]] = []
    for offset, age in enumerate(ages):
        out.append(snap(first + offset, age, parent))
        parent = first + offset
    return out


def branch(snapshot_id: int, **own: int) -> dict[str, Any]:
    return {"snapshot-id": snapshot_id, "type": "branch", **{k.replace("_", "-"): v for k, v in own.items()}}


def tag(snapshot_id: int, **own: int) -> dict[str, Any]:
    return {"snapshot-id": snapshot_id, "type": "tag", **{k.replace("_", "-"): v for k, v in own.items()}}


def table(
    snapshots: list[dict[str, Any]], refs: dict[str, dict[str, Any]], **properties: str
) -> TableMetadata:
    """A v2 table's metadata holding `snapshots` and `refs`, its current snapshot main's head."""
    body = metadata_dict(created_metadata(SCHEMA, None, None, LOCATION, {"format-version": "2"}))
    body["properties"] = body["properties"] | properties
    body["snapshots"] = snapshots
    body["refs"] = refs
    body["current-snapshot-id"] = refs["main"]["snapshot-id"] if "main" in refs else None
    body["last-sequence-number"] = max((s["sequence-number"] for s in snapshots), default=0)
    return TableMetadataUtil.parse_obj(body)


def ids(*snapshot_ids: int) -> frozenset[int]:
    return frozenset(snapshot_ids)


def test_the_newest_min_snapshots_to_keep_stay_when_all_are_old() -> None:
    metadata = table(chain(500, 400, 300, 200, 150), {"main": branch(5)})
    assert expired(metadata, DEFAULTS, NOW) == Expiry(ids(1, 2, 3, 4), frozenset())
    keep_three = SnapshotManagement(min_snapshots_to_keep=3)
    assert expired(metadata, keep_three, NOW) == Expiry(ids(1, 2), frozenset())


def test_snapshots_younger_than_the_max_age_stay_beyond_the_minimum() -> None:
    metadata = table(chain(300, 200, 100, 50, 10), {"main": branch(5)})
    assert expired(metadata, DEFAULTS, NOW).snapshot_ids == ids(1, 2)
    assert expired(metadata, SnapshotManagement(max_snapshot_age_hours=60), NOW).snapshot_ids == ids(1, 2, 3)
    # The boundary: exactly max age old is young enough (Java's `>=`).
    assert expired(metadata, SnapshotManagement(max_snapshot_age_hours=300), NOW).snapshot_ids == ids()


def test_the_tables_history_properties_win_over_the_settings() -> None:
    snapshots = chain(300, 200, 100, 50, 10)
    assert expired(table(snapshots, {"main": branch(5)}, **{MIN_SNAPSHOTS_TO_KEEP: "4"}), DEFAULTS, NOW) == (
        Expiry(ids(1), frozenset())
    )
    day = str(24 * HOUR)
    assert expired(table(snapshots, {"main": branch(5)}, **{MAX_SNAPSHOT_AGE_MS: day}), DEFAULTS, NOW) == (
        Expiry(ids(1, 2, 3, 4), frozenset())
    )
    # Even against settings asking to keep more: the table's writers chose its history.
    lenient = SnapshotManagement(min_snapshots_to_keep=10, max_snapshot_age_hours=1000)
    both = {MIN_SNAPSHOTS_TO_KEEP: "2", MAX_SNAPSHOT_AGE_MS: "0"}
    assert expired(table(snapshots, {"main": branch(5)}, **both), lenient, NOW).snapshot_ids == ids(1, 2, 3)


def test_a_branch_keeps_by_its_own_minimum_and_max_age() -> None:
    # main: 1 <- 2 <- 3; dev forks from 1: 21 <- 22 <- 23, all of dev old.
    snapshots = chain(300, 200, 10) + chain(250, 240, 230, first=21, parent=1)
    plain = table(snapshots, {"main": branch(3), "dev": branch(23)})
    assert expired(plain, DEFAULTS, NOW).snapshot_ids == ids(1, 2, 21, 22)
    own_minimum = table(snapshots, {"main": branch(3), "dev": branch(23, min_snapshots_to_keep=3)})
    assert expired(own_minimum, DEFAULTS, NOW).snapshot_ids == ids(1, 2)
    own_age = table(snapshots, {"main": branch(3), "dev": branch(23, max_snapshot_age_ms=1000 * HOUR)})
    assert expired(own_age, DEFAULTS, NOW).snapshot_ids == ids(2)  # dev reaches back to main's 1
    # A branch's own values win over the table's properties too.
    strict = {MIN_SNAPSHOTS_TO_KEEP: "1", MAX_SNAPSHOT_AGE_MS: "1"}
    own_over_table = table(
        snapshots, {"main": branch(3), "dev": branch(23, min_snapshots_to_keep=2)}, **strict
    )
    assert expired(own_over_table, DEFAULTS, NOW).snapshot_ids == ids(1, 2, 21)


def test_a_tag_keeps_its_snapshot_and_nothing_before_it() -> None:
    metadata = table(chain(500, 400, 300, 200), {"main": branch(4), "v1": tag(2)})
    assert expired(metadata, DEFAULTS, NOW) == Expiry(ids(1, 3), frozenset())


def test_a_ref_older_than_its_max_ref_age_goes_and_then_protects_nothing() -> None:
    snapshots = chain(500, 400, 300, 40, 10)
    refs = {"main": branch(5), "old": tag(2), "recent": tag(4), "stale-dev": branch(3)}
    metadata = table(snapshots, refs, **{MAX_REF_AGE_MS: str(24 * HOUR)})
    # "old" and "stale-dev" are past 24 hours: gone, and their snapshots old enough to go with them;
    # "recent"'s snapshot (40 hours) is past it too, so the tag goes, yet its snapshot is young:
    # main's own history keeps it (younger than 120 hours).
    assert expired(metadata, DEFAULTS, NOW) == Expiry(ids(1, 2, 3), frozenset({"old", "recent", "stale-dev"}))
    # A ref's own max-ref-age wins over the table's, and a tag's snapshot off main's history, once its
    # tag is gone, stays while younger than the table's max snapshot age.
    forked = [*chain(500, 400, 10), snap(7, 100, parent=1), snap(8, 200, parent=1)]
    refs = {"main": branch(3), "young-orphan": tag(7), "kept": tag(8, max_ref_age_ms=1000 * HOUR)}
    metadata = table(forked, refs, **{MAX_REF_AGE_MS: str(24 * HOUR)})
    assert expired(metadata, DEFAULTS, NOW) == Expiry(ids(1, 2), frozenset({"young-orphan"}))
    # Without a max ref age anywhere, refs live for ever.
    assert (
        expired(table(snapshots, refs={"main": branch(5), "old": tag(1)}), DEFAULTS, NOW).refs == frozenset()
    )


def test_main_is_never_removed_and_its_head_never_expires() -> None:
    metadata = table(chain(900, 800), {"main": branch(2)}, **{MAX_REF_AGE_MS: "1", MAX_SNAPSHOT_AGE_MS: "0"})
    assert expired(metadata, DEFAULTS, NOW) == Expiry(ids(1), frozenset())
    none_to_keep = table(chain(900, 800), {"main": branch(2)}, **{MIN_SNAPSHOTS_TO_KEEP: "0"})
    assert expired(none_to_keep, DEFAULTS, NOW).snapshot_ids == ids(1)


def test_the_current_snapshot_never_expires_even_with_no_ref_on_it() -> None:
    metadata = table(chain(900, 800, 700), {"main": branch(3)}, **{MIN_SNAPSHOTS_TO_KEEP: "0"})
    # Metadata some writer left with no refs at all (pyiceberg would add main on parsing: bypassed).
    no_refs = metadata.model_copy(update={"refs": {}})
    assert expired(no_refs, DEFAULTS, NOW).snapshot_ids == ids(1, 2)
    rolled_back = metadata.model_copy(update={"refs": {}, "current_snapshot_id": 2})
    assert expired(rolled_back, DEFAULTS, NOW).snapshot_ids == ids(1, 3)


def test_snapshots_no_ref_reaches_expire_by_the_tables_max_age() -> None:
    # main rolled back from 4 and 5 (descendants of 2) to 3, then moved on; 4 and 5 are orphans.
    snapshots = [*chain(300, 250, 10), snap(4, 200, parent=2), snap(5, 50, parent=4)]
    metadata = table(snapshots, {"main": branch(3)})
    assert expired(metadata, DEFAULTS, NOW).snapshot_ids == ids(1, 2, 4)
    with_property = table(snapshots, {"main": branch(3)}, **{MAX_SNAPSHOT_AGE_MS: str(24 * HOUR)})
    assert expired(with_property, DEFAULTS, NOW).snapshot_ids == ids(1, 2, 4, 5)


def test_disabled_expires_nothing() -> None:
    metadata = table(chain(900, 800, 700), {"main": branch(3), "old": tag(1)}, **{MAX_REF_AGE_MS: "1"})
    nothing = expired(metadata, SnapshotManagement(enabled=False), NOW)
    assert nothing == Expiry() and not nothing
    assert expired(table([], {}), DEFAULTS, NOW) == Expiry()  # a table without snapshots


@pytest.mark.parametrize("bad", ["abc", "-1", "1.5", " 3", "", "1e3", "٣", "3_000"])
@pytest.mark.parametrize("key", [MIN_SNAPSHOTS_TO_KEEP, MAX_SNAPSHOT_AGE_MS, MAX_REF_AGE_MS])
def test_bad_property_values_fall_back_to_the_settings(key: str, bad: str) -> None:
    snapshots = chain(300, 200, 100, 50, 10)
    refs = {"main": branch(5), "v1": tag(1)}
    assert expired(table(snapshots, refs, **{key: bad}), DEFAULTS, NOW) == expired(
        table(snapshots, refs), DEFAULTS, NOW
    )
    assert expired(table(snapshots, refs), DEFAULTS, NOW) == Expiry(ids(2), frozenset())


def test_the_commit_asserts_the_table_and_every_ref_and_removes_refs_first() -> None:
    metadata = table(chain(300, 200, 10), {"main": branch(3), "old": tag(1), "dev": branch(2)})
    request = expiry_commit(
        TableName.of("whs", ("a", "b"), "t"), metadata, Expiry(ids(1), frozenset({"old"}))
    )
    body = request.model_dump(mode="json", by_alias=True)
    assert body["identifier"] == {"namespace": ["a", "b"], "name": "t"}
    assert body["requirements"] == [
        {"type": "assert-table-uuid", "uuid": str(metadata.table_uuid)},
        {"type": "assert-ref-snapshot-id", "ref": "dev", "snapshot-id": 2},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 3},
        {"type": "assert-ref-snapshot-id", "ref": "old", "snapshot-id": 1},
    ]
    assert [update["action"] for update in body["updates"]] == ["remove-snapshot-ref", "remove-snapshots"]
    assert body["updates"][1]["snapshot-ids"] == [1]


# -- expire_snapshots: through the catalog, on both stores ----------------------------------------


NAME = TableName.of("whs", ("ns",), "t")


def commit(*updates: dict[str, Any]) -> CommitTableRequest:
    body = {"identifier": {"namespace": ["ns"], "name": "t"}, "updates": list(updates)}
    return parse_model(CommitTableRequest, body, "commit")


Commit = Callable[[TableName, CommitTableRequest], LoadedTable]


def add_snapshot(
    catalog: WarehouseCatalog, snapshot_id: int, age_hours: float, ref: str = "main",
    parent: int | None = None, commit_with: Commit | None = None,
) -> None:  # fmt: skip
    """A writer's commit: snapshot `snapshot_id` (its manifest list written inside the table, so that
    the test sees it outlive the expiry) made the head of branch `ref`, on main's head by default."""
    loaded = catalog.load_table(NAME)
    assert loaded.location is not None
    manifest_list = f"{loaded.location.uri}/metadata/snap-{snapshot_id}.avro"
    on_disk = Path(manifest_list.removeprefix("file://"))
    on_disk.parent.mkdir(parents=True, exist_ok=True)
    on_disk.write_bytes(b"not really avro")
    body = snap(snapshot_id, age_hours, parent if parent is not None else loaded.metadata.current_snapshot_id)
    body["sequence-number"] = getattr(loaded.metadata, "last_sequence_number", 0) + 1  # v2 and v3 have one
    body["manifest-list"] = manifest_list
    (commit_with or catalog.commit)(
        NAME,
        commit({"action": "add-snapshot", "snapshot": body},
               {"action": "set-snapshot-ref", "ref-name": ref, "type": "branch", "snapshot-id": snapshot_id}),
    )  # fmt: skip


def set_ref(catalog: WarehouseCatalog, name: str, ref: dict[str, Any]) -> None:
    own = {k: v for k, v in ref.items() if k not in ("snapshot-id", "type")}
    update = {"action": "set-snapshot-ref", "ref-name": name, "type": ref["type"],
              "snapshot-id": ref["snapshot-id"], **own}  # fmt: skip
    catalog.commit(NAME, commit(update))


def manifest_lists(catalog: WarehouseCatalog) -> list[str]:
    root: Path = catalog.storage.root  # type: ignore[attr-defined]
    return sorted(path.name for path in root.glob("whs/ns/*/metadata/snap-*.avro"))


def snapshot_ids(catalog: WarehouseCatalog) -> list[int]:
    return sorted(snapshot.snapshot_id for snapshot in catalog.load_table(NAME).metadata.snapshots)


def test_expiry_commits_and_the_table_loads_without_what_expired(catalog: WarehouseCatalog) -> None:
    catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2"}))
    for snapshot_id, age in ((1, 300), (2, 200), (3, 150), (4, 10)):
        add_snapshot(catalog, snapshot_id, age)
    set_ref(catalog, "v1", tag(1))
    set_ref(catalog, "stale", tag(3, max_ref_age_ms=100 * HOUR))

    done = expire_snapshots(catalog, NAME, DEFAULTS, NOW)

    assert done == Expiry(ids(2, 3), frozenset({"stale"}))
    loaded = catalog.load_table(NAME).metadata
    assert snapshot_ids(catalog) == [1, 4]
    assert sorted(loaded.refs) == ["main", "v1"] and loaded.current_snapshot_id == 4
    assert {entry.snapshot_id for entry in loaded.snapshot_log} <= {1, 4}
    # No file is deleted: unreferenced-file removal does that later.
    assert manifest_lists(catalog) == [f"snap-{n}.avro" for n in (1, 2, 3, 4)]
    # Once done, nothing is left to expire, and nothing is committed for it.
    location = catalog.load_table(NAME).metadata_location
    assert expire_snapshots(catalog, NAME, DEFAULTS, NOW) == Expiry()
    assert catalog.load_table(NAME).metadata_location == location


def test_a_writer_committing_meanwhile_makes_the_expiry_decide_again_and_keeps_its_snapshot(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2"}))
    for snapshot_id, age in ((1, 300), (2, 200), (3, 150), (4, 140)):
        add_snapshot(catalog, snapshot_id, age)
    commit_directly = catalog.commit
    requests: list[CommitTableRequest] = []

    def writer_first(
        table: TableName, request: CommitTableRequest, based_on: str | None = None
    ) -> LoadedTable:
        requests.append(request)
        if len(requests) == 1:
            # Between the expiry's load and its commit, a writer rolls main back to 2 (which the
            # expiry loaded as expired) and appends 5 onto it.
            add_snapshot(catalog, 5, 0, parent=2, commit_with=commit_directly)
        return commit_directly(table, request, based_on)

    monkeypatch.setattr(catalog, "commit", writer_first)
    settings = SnapshotManagement(min_snapshots_to_keep=2)

    done = expire_snapshots(catalog, NAME, settings, NOW)

    assert len(requests) == 2  # the first lost the race on main's snapshot, the second was decided again
    first = requests[0].model_dump(mode="json", by_alias=True)
    assert first["updates"] == [{"action": "remove-snapshots", "snapshot-ids": [1, 2]}]
    # Decided on the writer's table: main is 5 <- 2 <- 1, its newest two stay (2 among them, which
    # the first attempt would have dropped); 3 and 4 are old orphans now.
    assert done == Expiry(ids(1, 3, 4), frozenset())
    assert snapshot_ids(catalog) == [2, 5]
    assert catalog.load_table(NAME).metadata.current_snapshot_id == 5


def test_an_expiry_losing_every_race_gives_up_with_the_conflict(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2"}))
    for snapshot_id, age in ((1, 300), (2, 200)):
        add_snapshot(catalog, snapshot_id, age)
    commit_directly = catalog.commit
    writes = iter(range(10, 20))

    def writer_always(
        table: TableName, request: CommitTableRequest, based_on: str | None = None
    ) -> LoadedTable:
        add_snapshot(catalog, next(writes), 0, commit_with=commit_directly)
        return commit_directly(table, request, based_on)

    monkeypatch.setattr(catalog, "commit", writer_always)
    with pytest.raises(CommitConflict, match="Requirement failed"):
        expire_snapshots(catalog, NAME, DEFAULTS, NOW, attempts=3)
    # Three attempts, each beaten by a writer's snapshot; nothing expired.
    assert snapshot_ids(catalog) == [1, 2, 10, 11, 12]


def test_a_tag_made_meanwhile_on_a_snapshot_the_expiry_would_drop_keeps_it(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No requirement can name a ref the expiry never saw: its commit asserts the metadata it was
    decided on, so a writer's new tag makes it decide again, and the tagged snapshot stays."""
    catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2"}))
    for snapshot_id, age in ((1, 300), (2, 200), (3, 1)):
        add_snapshot(catalog, snapshot_id, age)
    commit_directly = catalog.commit
    tagged: list[bool] = []

    def tag_first(table: TableName, request: CommitTableRequest, based_on: str | None = None) -> LoadedTable:
        if not tagged:
            tagged.append(True)
            set_ref(catalog, "release", {"type": "tag", "snapshot-id": 1})
        return commit_directly(table, request, based_on)

    monkeypatch.setattr(catalog, "commit", tag_first)
    done = expire_snapshots(catalog, NAME, DEFAULTS, NOW)
    assert done == Expiry(ids(2), frozenset())
    assert snapshot_ids(catalog) == [1, 3]
    assert catalog.load_table(NAME).metadata.refs["release"].snapshot_id == 1
