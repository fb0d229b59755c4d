"""Delta's change-feed rules (`share_store.tables.changes`) on plain commits: no storage, no server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.tables import changes
from share_store.tables.changes import FileChange, MetadataChange, ProtocolChange
from share_store.tables.commit_times import Commit
from share_store.tables.snapshot import TableSnapshot

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True}]})
PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 4}


def meta(cdf: bool = True, partitions: tuple[str, ...] = ()) -> dict[str, Any]:
    configuration = {"delta.enableChangeDataFeed": "true"} if cdf else {}
    return {
        "id": "t",
        "format": {"provider": "parquet"},
        "schemaString": SCHEMA,
        "partitionColumns": list(partitions),
        "configuration": configuration,
    }


def add(path: str, size: int = 10, data_change: bool = True) -> dict[str, Any]:
    return {"add": {"path": path, "size": size, "partitionValues": {}, "dataChange": data_change}}


def remove(path: str, **extra: Any) -> dict[str, Any]:
    return {"remove": {"path": path, "dataChange": True, **extra}}


def cdc(path: str) -> dict[str, Any]:
    return {"cdc": {"path": path, "size": 5, "partitionValues": {}, "dataChange": False}}


def merge(inserted: int, updated: int, deleted: int) -> dict[str, Any]:
    metrics = {
        "numTargetRowsInserted": str(inserted),
        "numTargetRowsUpdated": str(updated),
        "numTargetRowsDeleted": str(deleted),
    }
    return {"commitInfo": {"operation": "MERGE", "operationMetrics": metrics}}


class Log:
    """A table's commits in memory; snapshots replay them as far as these tests need."""

    def __init__(self, *commits: list[dict[str, Any]]) -> None:
        self.commits = list(commits)
        self.snapshots_read: list[int] = []

    def commit(self, version: int) -> list[dict[str, Any]]:
        return self.commits[version]

    def snapshot(self, version: int) -> TableSnapshot:
        self.snapshots_read.append(version)
        protocol, metadata, files = PROTOCOL, meta(), {}
        for commit in self.commits[: version + 1]:
            for action in commit:
                protocol = action.get("protocol", protocol)
                metadata = action.get("metaData", metadata)
                if "add" in action:
                    files[action["add"]["path"]] = action["add"]
                if "remove" in action:
                    files.pop(action["remove"]["path"], None)
        return TableSnapshot(version, protocol, metadata, list(files.values()))

    def changes(self, start: int, end: int, **options: Any) -> list[changes.Change]:
        times = {v: 1000 + v for v in range(len(self.commits))}
        options = {"use_cdc": True, "include_metadata": False} | options
        return list(changes.version_changes(self.commit, self.snapshot, start, end, times, **options))


CREATE = [{"protocol": PROTOCOL}, {"metaData": meta()}, add("a.parquet")]


def kinds(found: list[changes.Change]) -> list[tuple[str, int, str]]:
    out = []
    for change in found:
        if isinstance(change, FileChange):
            out.append((change.kind, change.version, change.action["path"]))
        else:
            out.append((type(change).__name__, change.version, ""))
    return out


def test_adds_and_removes_in_version_order_with_their_commit_times() -> None:
    log = Log(CREATE, [add("b.parquet")], [remove("a.parquet", size=10)])
    found = log.changes(0, 2, use_cdc=False)
    assert kinds(found) == [("add", 0, "a.parquet"), ("add", 1, "b.parquet"), ("remove", 2, "a.parquet")]
    assert [c.timestamp for c in found if isinstance(c, FileChange)] == [1000, 1001, 1002]


def test_cdc_files_replace_a_versions_adds_and_removes_only_when_asked() -> None:
    log = Log(CREATE, [add("b.parquet"), remove("a.parquet", size=1), cdc("c1.parquet")])
    assert kinds(log.changes(1, 1)) == [("cdc", 1, "c1.parquet")]
    assert kinds(log.changes(1, 1, use_cdc=False)) == [("add", 1, "b.parquet"), ("remove", 1, "a.parquet")]


def test_files_that_change_no_data_are_left_out() -> None:
    log = Log(CREATE, [add("compacted.parquet", data_change=False)])
    assert kinds(log.changes(1, 1, use_cdc=False)) == []


@pytest.mark.parametrize(
    ("metrics", "emitted"),
    [((0, 0, 0), False), ((1, 0, 0), True), ((0, 1, 0), True), ((0, 0, 1), True)],
)
def test_a_merge_that_changed_no_row_emits_nothing(metrics: tuple[int, int, int], emitted: bool) -> None:
    commit = [merge(*metrics), add("m.parquet")]
    assert changes.is_noop_merge(commit) is not emitted
    assert bool(Log(CREATE, commit).changes(1, 1, use_cdc=False)) is emitted


def test_metadata_and_protocol_changes_after_the_start_only_when_asked() -> None:
    v3 = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": []}
    log = Log(CREATE, [{"metaData": meta()}, {"protocol": v3}, add("b.parquet")])
    files = [("add", 0, "a.parquet"), ("add", 1, "b.parquet")]
    assert kinds(log.changes(0, 1, use_cdc=False)) == files
    found = log.changes(0, 1, use_cdc=False, include_metadata=True, include_protocol=True)
    assert kinds(found) == [files[0], ("ProtocolChange", 1, ""), ("MetadataChange", 1, ""), files[1]]
    assert isinstance(found[1], ProtocolChange) and found[1].snapshot.min_reader_version == 3
    assert isinstance(found[2], MetadataChange)


def test_every_changed_snapshot_is_checked_and_partition_columns_follow_metadata() -> None:
    log = Log(CREATE, [{"metaData": meta(partitions=("p",))}, add("b.parquet")])
    checked: list[int] = []
    found = log.changes(0, 1, use_cdc=False, check=lambda s: checked.append(s.version))
    assert checked == [0, 1]
    assert [c.partition_columns for c in found if isinstance(c, FileChange)] == [(), ("p",)]

    def refuse(snapshot: TableSnapshot) -> None:
        if snapshot.partition_columns:
            raise UnsupportedOperation("no")

    with pytest.raises(UnsupportedOperation):
        log.changes(0, 1, check=refuse)


def test_a_remove_without_size_takes_it_from_the_previous_versions_add() -> None:
    log = Log(CREATE, [remove("a.parquet")])
    (change,) = log.changes(1, 1, use_cdc=False)
    assert isinstance(change, FileChange) and change.action["size"] == 10
    with pytest.raises(UnsupportedOperation, match="size of a file removed in version 2"):
        changes.removed_size(log.snapshot(1), "a.parquet", 2)


def test_changes_are_made_lazily() -> None:
    log = Log(CREATE, [add("b.parquet")], [add("c.parquet")])
    lazy = changes.version_changes(log.commit, log.snapshot, 0, 2, {0: 0, 1: 1, 2: 2}, use_cdc=False,
                                   include_metadata=False)  # fmt: skip
    assert log.snapshots_read == []
    next(lazy)
    assert set(log.snapshots_read) == {0}  # later versions wait for their turn


def test_cdf_must_be_recorded_in_every_version_of_the_range() -> None:
    log = Log(CREATE, [{"metaData": meta(cdf=False)}], [{"metaData": meta()}], [add("b.parquet")])
    changes.check_cdf_recorded(log.snapshot(2), log.commit, 2, 3)
    with pytest.raises(InvalidParameter, match=r"range \[0, 3\] .* for version \[1\]"):
        changes.check_cdf_recorded(log.snapshot(0), log.commit, 0, 3)
    with pytest.raises(InvalidParameter, match=r"range \[1, 2\] .* for version \[1\]$"):
        changes.check_cdf_recorded(log.snapshot(1), log.commit, 1, 2)


def test_changed_paths_are_cdc_files_where_a_version_has_them() -> None:
    log = Log(
        CREATE, [add("b.parquet"), cdc("c.parquet")], [remove("a.parquet"), add("x", data_change=False)]
    )
    assert list(changes.changed_paths(log.commit, 0, 2)) == ["a.parquet", "c.parquet", "a.parquet"]


def test_commit_times_refuse_a_range_the_log_no_longer_holds() -> None:
    commits = [Commit(3, 30), Commit(4, 40)]
    assert changes.commit_times(commits, 3, 4) == {3: 30, 4: 40}
    with pytest.raises(InvalidParameter, match="since version 3"):
        changes.commit_times(commits, 2, 4)
