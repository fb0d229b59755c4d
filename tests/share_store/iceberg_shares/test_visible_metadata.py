"""What an Iceberg REST recipient may see and read (`iceberg_shares.visible_metadata`): grants, files."""

from __future__ import annotations

from share_store.iceberg_shares.visible_metadata import ReadableFiles, shared_metadata


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
