"""Issue 39: a commit applies its updates without pyiceberg's deep copy, serialises the new metadata once
(the file and the answer are the same bytes, its unchanged snapshots' copied from the last file's), and
a load answers the kept JSON of the file the table's pointer names. Each must mean exactly what the
slower path meant: the same metadata, byte for byte, the same refusals, the same answers as JSON; and a
kept file must never stand in for another table's, nor for a newer version another replica committed."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import update_table_metadata
from pyiceberg.types import LongType, NestedField, StringType

from share_store.catalog import catalog as catalog_module
from share_store.catalog import commits
from share_store.catalog import metadata_text as metadata_text_module
from share_store.catalog.catalog import LoadedTable, NewTable, WarehouseCatalog
from share_store.catalog.commits import (
    applied_updates,
    created_metadata,
    metadata_json,
    parse_model,
    read_metadata,
)
from share_store.catalog.errors import CommitConflict
from share_store.catalog.metadata_text import MetadataText, metadata_text
from share_store.catalog.names import TableName
from share_store.errors import InvalidParameter
from sharing_server.catalog import codec

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "name", StringType()))
LOCATION = "s3://wh/ns/t-1"
NAME = TableName.of("whs", ("ns",), "t")


def request_of(*updates: dict[str, Any], requirements: tuple[dict[str, Any], ...] = ()) -> CommitTableRequest:
    body = {"identifier": {"namespace": ["ns"], "name": "t"}, "requirements": list(requirements),
            "updates": list(updates)}  # fmt: skip
    return parse_model(CommitTableRequest, body, "commit")  # type: ignore[no-any-return]


def snapshot(
    snapshot_id: int, parent: int | None, location: str = LOCATION, v3: bool = False
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": snapshot_id,
        "timestamp-ms": 1_700_000_000_000 + snapshot_id,
        "manifest-list": f"{location}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append", "added-records": "10", "total-records": str(10 * snapshot_id)},
        "schema-id": 0,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    if v3:  # row lineage: each snapshot adds 10 rows after the last one's
        body |= {"first-row-id": 10 * (snapshot_id - 1), "added-rows": 10}
    return body


def append(
    snapshot_id: int, parent: int | None, location: str = LOCATION, v3: bool = False
) -> list[dict[str, Any]]:
    return [
        {"action": "add-snapshot", "snapshot": snapshot(snapshot_id, parent, location, v3)},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]


def must_main_be(snapshot_id: int | None) -> dict[str, Any]:
    return {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot_id}


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """`last-updated-ms` of updates that set no time: the same instant on both paths."""
    import pyiceberg.table.update as pyiceberg_update

    monkeypatch.setattr(pyiceberg_update, "datetime_to_millis", lambda _: 1_800_000_000_000)
    monkeypatch.setattr(commits, "datetime_to_millis", lambda _: 1_800_000_000_000)


# The updates writers send, each applied to a base with a history and a metadata log.
COMMITS: dict[str, list[dict[str, Any]]] = {
    "append": append(4, 3),
    "set and remove properties": [
        {"action": "set-properties", "updates": {"a": "1", "b": "2"}},
        {"action": "remove-properties", "removals": ["kept"]},
    ],
    "evolve the schema": [
        {
            "action": "add-schema",
            "schema": {
                "type": "struct",
                "schema-id": 1,
                "fields": [
                    {"id": 1, "name": "id", "type": "long", "required": True},
                    {"id": 2, "name": "name", "type": "string", "required": False},
                    {"id": 3, "name": "extra", "type": "int", "required": False},
                ],
            },
            "last-column-id": 3,
        },
        {"action": "set-current-schema", "schema-id": -1},
    ],
    "partition and sort": [
        {
            "action": "add-spec",
            "spec": {
                "spec-id": 1,
                "fields": [{"source-id": 1, "field-id": 1000, "transform": "bucket[4]", "name": "id_bucket"}],
            },
        },
        {"action": "set-default-spec", "spec-id": -1},
        {
            "action": "add-sort-order",
            "sort-order": {
                "order-id": 1,
                "fields": [
                    {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
                ],
            },
        },
        {"action": "set-default-sort-order", "sort-order-id": -1},
    ],
    "tag and remove a snapshot": [
        {"action": "set-snapshot-ref", "ref-name": "v1", "type": "tag", "snapshot-id": 1},
        {"action": "remove-snapshots", "snapshot-ids": [2]},
    ],
    "nothing": [],
}


def entry_json(text: MetadataText, entry: Any) -> bytes | None:
    """`entry`'s bytes in `text`'s file, if this very object was serialised into it."""
    for entries in text.arrays.values():
        for index, item in enumerate(entries.items):
            if item is entry:
                start, end = entries.span(index)
                return text.data[start:end]
    return None


def base_with_history(version: int = 2, log_max: str = "2") -> tuple[TableMetadata, str]:
    """A table of three snapshots whose metadata log is full (`previous-versions-max` 2)."""
    properties = {"format-version": str(version), "kept": "x",
                  "write.metadata.previous-versions-max": log_max}  # fmt: skip
    metadata = created_metadata(SCHEMA, None, None, LOCATION, properties)
    location = f"{LOCATION}/metadata/00000-a.metadata.json"
    for n in (1, 2, 3):
        updates = append(n, n - 1 if n > 1 else None, v3=version == 3)
        metadata = commits.updated_metadata(metadata, location, request_of(*updates))
        location = f"{LOCATION}/metadata/0000{n}-a.metadata.json"
    # As read back from its file: how a commit meets its base.
    return read_metadata(metadata_json(metadata)), location


@pytest.mark.parametrize("what", list(COMMITS))
@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.usefixtures("fixed_clock")
def test_updates_applied_without_the_deep_copy_are_pyicebergs_byte_for_byte(what: str, version: int) -> None:
    base, location = base_with_history(version)
    asked = append(4, 3, v3=True) if version == 3 and what == "append" else COMMITS[what]
    updates = request_of(*asked).updates
    theirs = update_table_metadata(base, tuple(updates), metadata_location=location)
    ours = applied_updates(base, tuple(updates), location)
    assert metadata_json(ours) == metadata_json(theirs)
    assert ours == theirs


@pytest.mark.parametrize("what", list(COMMITS))
@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.usefixtures("fixed_clock")
def test_a_files_json_made_from_the_last_files_is_metadata_jsons(what: str, version: int) -> None:
    base, location = base_with_history(version)
    before = metadata_text(base)
    assert before.data == metadata_json(base)
    asked = append(4, 3, v3=True) if version == 3 and what == "append" else COMMITS[what]
    new = applied_updates(base, tuple(request_of(*asked).updates), location)

    made = metadata_text(new, before)

    assert made.data == metadata_json(new)
    shared = [s for s in new.snapshots if any(s is old for old in base.snapshots)]
    if version > 1:  # v1 is serialised whole: pyiceberg rewrites its snapshots as it does
        assert shared and all(entry_json(made, s) == entry_json(before, s) for s in shared)
    # Made again from the new one (a second commit), and from nothing (a file read from storage).
    assert metadata_text(new, made).data == metadata_text(new).data == metadata_json(new)


def test_a_snapshots_json_is_copied_only_for_that_very_object() -> None:
    base, _ = base_with_history()
    before = metadata_text(base)
    # The same metadata parsed again: equal entries, other objects, never copied.
    again = read_metadata(before.data)
    entries = [*again.snapshots, *again.snapshot_log, *again.metadata_log]
    assert all(entry_json(before, entry) is None for entry in entries)
    assert metadata_text(again, before).data == metadata_json(again)
    # Bounds kept for other objects (as if the first were freed and their ids reused) are not taken.
    stale = MetadataText(b"x" * len(before.data), before.arrays)
    assert metadata_text(again, stale).data == metadata_json(again)


def test_a_long_historys_json_made_from_the_last_files_matches_on_every_commit() -> None:
    """200 appends, the third from last expiring the oldest half: each file's JSON made from the last's
    is `metadata_json`'s, and copies every snapshot kept as it was. Expiring makes the oldest kept
    snapshot a new object without its parent: serialised again, never copied."""
    metadata = created_metadata(SCHEMA, None, None, LOCATION, {})
    text, location = metadata_text(metadata), f"{LOCATION}/metadata/00000-a.metadata.json"
    for n in range(1, 201):
        updates = append(n, n - 1 if n > 1 else None)
        if n == 198:
            updates.append({"action": "remove-snapshots", "snapshot-ids": list(range(1, 100))})
        new = applied_updates(metadata, tuple(request_of(*updates).updates), location)
        made = metadata_text(new, text)
        assert made.data == metadata_json(new), n
        kept = [s for s in new.snapshots if any(s is old for old in metadata.snapshots)]
        assert len(kept) == (len(new.snapshots) - 1 if n != 198 else len(new.snapshots) - 2), n
        assert all(entry_json(made, s) == entry_json(text, s) is not None for s in kept), n
        # The logs' entries too: each grows by one, the metadata log dropping its oldest once full.
        logs = ((new.snapshot_log, metadata.snapshot_log), (new.metadata_log, metadata.metadata_log))
        for logged, was in logs:
            copied = [e for e in logged if any(e is old for old in was)]
            assert len(copied) >= len(logged) - 1, n
            assert all(entry_json(made, e) == entry_json(text, e) is not None for e in copied), n
        if n == 198:
            oldest = entry_json(made, new.snapshots[0])
            assert oldest is not None and b"parent-snapshot-id" not in oldest
        metadata, text, location = new, made, f"{LOCATION}/metadata/{n:05d}-a.metadata.json"
    assert len(metadata.snapshots) == 200 - 99
    assert len(metadata.metadata_log) == 100  # full: each commit dropped its oldest entry


def test_an_append_on_a_long_history_serialises_only_what_it_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Of a 150-commit table, an append serialises its snapshot and the two logs' new entries: every
    other entry of the three arrays (the metadata log full, so shifted by one) is copied."""
    metadata = created_metadata(SCHEMA, None, None, LOCATION, {})
    text, location = metadata_text(metadata), f"{LOCATION}/metadata/00000-a.metadata.json"
    for n in range(1, 151):
        updates = tuple(request_of(*append(n, n - 1 if n > 1 else None)).updates)
        new = applied_updates(metadata, updates, location)
        metadata, text = new, metadata_text(new, text)
        location = f"{LOCATION}/metadata/{n:05d}-a.metadata.json"
    serialised: list[Any] = []
    real = metadata_text_module._serialised
    monkeypatch.setattr(metadata_text_module, "_serialised", lambda e: serialised.append(e) or real(e))
    new = applied_updates(metadata, tuple(request_of(*append(151, 150)).updates), location)

    made = metadata_text(new, text)

    assert made.data == metadata_json(new)
    added = [new.snapshots[-1], new.snapshot_log[-1], new.metadata_log[-1]]
    assert len(serialised) == 3 and all(any(entry is done for done in serialised) for entry in added)
    assert len(new.metadata_log) == 100 and new.metadata_log[0] is metadata.metadata_log[1]


@pytest.mark.usefixtures("fixed_clock")
def test_a_v3_append_keeps_its_row_lineage() -> None:
    base, location = base_with_history(3)
    first = base.next_row_id or 0
    assert first == 30
    added = snapshot(4, 3, v3=True)
    ref = {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 4}
    request = request_of({"action": "add-snapshot", "snapshot": added}, ref)
    updated = commits.updated_metadata(base, location, request)
    assert updated.next_row_id == first + 10
    assert updated.metadata_log[-1].metadata_file == location


@pytest.mark.parametrize(
    "updates",
    [
        append(3, 2),  # a snapshot id the table has
        [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 99}],
        [{"action": "set-current-schema", "schema-id": 7}],
        [{"action": "set-default-spec", "spec-id": 7}],
        [{"action": "remove-statistics", "snapshot-id": 99}],
        [{"action": "upgrade-format-version", "format-version": 1}],  # a downgrade
    ],
)
def test_updates_pyiceberg_refuses_are_refused_the_same(updates: list[dict[str, Any]]) -> None:
    base, location = base_with_history()
    request = request_of(*updates)
    with pytest.raises(Exception) as theirs:
        update_table_metadata(base, tuple(request.updates), metadata_location=location)
    with pytest.raises(type(theirs.value)) as ours:
        applied_updates(base, tuple(request.updates), location)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(InvalidParameter, match="invalid commit"):  # and the catalog's 400 for it
        commits.updated_metadata(base, location, request)


def test_the_base_kept_is_not_changed_by_a_commit_on_it() -> None:
    base, location = base_with_history()
    before = metadata_json(base)
    commits.updated_metadata(base, location, request_of(*append(4, 3)))
    commits.updated_metadata(
        base, location, request_of({"action": "set-properties", "updates": {"kept": "y"}})
    )
    assert metadata_json(base) == before


# -- through the catalog -------------------------------------------------------------------------


def on_disk(location: str) -> bytes:
    return Path(location.removeprefix("file://")).read_bytes()


def grown(catalog: WarehouseCatalog, snapshots: int = 3) -> LoadedTable:
    created = catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2"}))
    where = created.metadata.location
    loaded = created
    for n in range(1, snapshots + 1):
        request = request_of(*append(n, n - 1 or None, where), requirements=(must_main_be(n - 1 or None),))
        loaded = catalog.commit(NAME, request)
    return loaded


def replica(catalog: WarehouseCatalog) -> WarehouseCatalog:
    """Another server on the same store and storage, with caches of its own."""
    return WarehouseCatalog(catalog.transactions, catalog.storage)


@pytest.mark.usefixtures("fixed_clock")
def test_a_commit_on_a_kept_base_writes_what_one_on_a_base_read_from_storage_writes(
    catalog: WarehouseCatalog,
) -> None:
    last = grown(catalog)
    where = last.metadata.location
    request = request_of(*append(4, 3, where), {"action": "set-properties", "updates": {"k": "v"}},
                         requirements=(must_main_be(3),))  # fmt: skip
    # The slower path: the base read from its file, pyiceberg's update with its deep copy.
    base = read_metadata(on_disk(last.metadata_location))
    expected = update_table_metadata(base, tuple(request.updates), metadata_location=last.metadata_location)

    committed = catalog.commit(NAME, request)  # its base is the one the catalog kept

    assert on_disk(committed.metadata_location) == metadata_json(expected) == committed.text
    assert json.loads(codec.commit_answer(committed)) == codec.commit_result(committed)
    assert json.loads(codec.commit_answer(committed))["metadata"] == json.loads(metadata_json(expected))


def test_loads_answer_the_file_the_pointer_names_as_json(catalog: WarehouseCatalog) -> None:
    last = grown(catalog)
    loaded = catalog.load_table(NAME)
    assert loaded.text == on_disk(last.metadata_location)
    fresh = replica(catalog).load_table(NAME)  # read from storage, not kept from the commit
    assert fresh.text == loaded.text
    delegations: list[tuple[dict[str, str], list[dict[str, Any]]]] = [
        ({}, []),
        ({"s3.remote-signing-enabled": "true", "s3.signer.uri": "http://x/é"},
         [{"prefix": "s3://whs/ns/", "config": {"s3.access-key-id": "AK"}}]),
    ]  # fmt: skip
    for table in (loaded, fresh):
        for delegation in delegations:
            for mode in ("all", "refs"):
                answer = codec.load_answer(table, mode, delegation)
                assert json.loads(answer) == codec.load_result(table, mode, delegation)
                # What Starlette's JSONResponse wrote for it, as JSON.
                assert json.loads(answer) == json.loads(
                    json.dumps(codec.load_result(table, mode, delegation))
                )
    without_text = LoadedTable(loaded.metadata_location, loaded.metadata, loaded.location)
    assert codec.load_answer(without_text) == codec.load_answer(loaded)
    assert codec.commit_answer(without_text) == codec.commit_answer(loaded)


def test_a_staged_create_answers_without_a_metadata_location(catalog: WarehouseCatalog) -> None:
    staged = catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2"}, stage=True))
    answer = json.loads(codec.load_answer(staged))
    assert "metadata-location" not in answer
    assert answer == codec.load_result(staged)


def test_a_registered_file_is_answered_as_the_catalog_understood_it(catalog: WarehouseCatalog) -> None:
    """Not its stored bytes: a field pyiceberg does not keep is not passed on to readers."""
    last = grown(catalog)
    raw = json.loads(on_disk(last.metadata_location))
    raw["not-iceberg"] = {"planted": True}
    folder = Path(last.metadata.location.removeprefix("file://")).parent / "registered"
    (folder / "metadata").mkdir(parents=True)
    registered = folder / "metadata" / "00009-r.metadata.json"
    registered.write_text(json.dumps(raw | {"location": folder.as_uri()}))
    other = TableName.of("whs", ("ns",), "r")
    catalog.register_table(other, registered.as_uri())
    loaded = catalog.load_table(other)
    assert b"planted" not in codec.load_answer(loaded)
    assert loaded.text == metadata_json(read_metadata(registered.read_bytes()))


def test_a_replica_never_answers_a_version_another_replica_replaced(catalog: WarehouseCatalog) -> None:
    last = grown(catalog)
    where = last.metadata.location
    other = replica(catalog)
    assert other.load_table(NAME).metadata_location == last.metadata_location  # kept by the replica

    newer = catalog.commit(NAME, request_of(*append(4, 3, where), requirements=(must_main_be(3),)))

    seen = other.load_table(NAME)
    assert seen.metadata_location == newer.metadata_location
    assert seen.metadata.current_snapshot_id == 4
    assert json.loads(codec.load_answer(seen))["metadata"]["current-snapshot-id"] == 4
    # A commit the replica decided on the older version is a conflict, not a commit on its copy.
    with pytest.raises(CommitConflict, match="Requirement failed"):
        other.commit(NAME, request_of(*append(5, 3, where), requirements=(must_main_be(3),)))
    after = other.commit(NAME, request_of(*append(5, 4, where), requirements=(must_main_be(4),)))
    assert catalog.load_table(NAME).metadata_location == after.metadata_location
    assert [s.snapshot_id for s in catalog.load_table(NAME).metadata.snapshots] == [1, 2, 3, 4, 5]


def test_two_commits_on_the_same_kept_base_one_wins_one_conflicts(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both decided on the same base (kept by each replica); the pointer's compare-and-swap decides."""
    last = grown(catalog)
    where = last.metadata.location
    replicas = [catalog, replica(catalog)]
    for each in replicas:
        each.load_table(NAME)
    both_checked = threading.Barrier(2, timeout=30)
    check_files = catalog_module.check_files

    def wait_for_the_other(*args: Any) -> None:
        check_files(*args)
        both_checked.wait()  # both have read the pointer and their base: neither has swapped

    monkeypatch.setattr(catalog_module, "check_files", wait_for_the_other)
    outcomes: dict[int, LoadedTable | Exception] = {}

    def commit(n: int) -> None:
        request = request_of(*append(4 + n, 3, where), requirements=(must_main_be(3),))
        try:
            outcomes[n] = replicas[n].commit(NAME, request)
        except Exception as error:  # the outcome is the test's
            outcomes[n] = error

    threads = [threading.Thread(target=commit, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    conflicts = [o for o in outcomes.values() if isinstance(o, CommitConflict)]
    won = [o for o in outcomes.values() if isinstance(o, LoadedTable)]
    assert len(conflicts) == 1 and len(won) == 1, outcomes
    for each in replicas:
        final = each.load_table(NAME)
        assert final.metadata_location == won[0].metadata_location
        assert final.text == on_disk(won[0].metadata_location)
        assert [s.snapshot_id for s in final.metadata.snapshots] == [
            1,
            2,
            3,
            won[0].metadata.current_snapshot_id,
        ]


def test_kept_files_are_each_tables_own(catalog: WarehouseCatalog) -> None:
    first = catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2", "who": "t"}))
    other = TableName.of("whs", ("ns",), "u")
    catalog.create_table(other, NewTable(SCHEMA, properties={"format-version": "2", "who": "u"}))
    assert catalog.load_table(NAME).metadata.properties["who"] == "t"
    assert json.loads(codec.load_answer(catalog.load_table(other)))["metadata"]["properties"]["who"] == "u"
    # Dropped and made again under the same name: the new table, never the old one's file.
    catalog.drop_table(NAME)
    catalog.create_table(NAME, NewTable(SCHEMA, properties={"format-version": "2", "who": "t2"}))
    again = catalog.load_table(NAME)
    assert again.metadata_location != first.metadata_location
    assert json.loads(codec.load_answer(again))["metadata"]["properties"]["who"] == "t2"


def test_look_alike_keys_and_values_a_caller_commits_cannot_move_what_is_spliced() -> None:
    """A caller may name properties, refs and summary values after the arrays the file is spliced
    around ('"snapshot-log":[]' and the like, with '#', '?', '..' and '%2F' besides): the file is
    still `metadata_json`'s, byte for byte, and its location the table's."""
    base, location = base_with_history()
    text = metadata_text(base)
    lookalike = '"snapshots":[] "snapshot-log":[] "metadata-log":[] ../#?%2F'
    properties = {"snapshots": "[]", "snapshot-log": lookalike, "metadata-log": '"location":"s3://other/t"'}
    updates = [
        {"action": "set-properties", "updates": properties},
        {"action": "set-snapshot-ref", "ref-name": "snapshot-log", "type": "tag", "snapshot-id": 3},
        *append(4, 3),
    ]
    updates[-2]["snapshot"]["summary"]["metadata-log"] = lookalike
    new = applied_updates(base, tuple(request_of(*updates).updates), location)

    made = metadata_text(new, text)

    assert made.data == metadata_json(new)
    assert read_metadata(made.data).location == base.location == LOCATION
    assert metadata_text(new, made).data == made.data
