"""`spark.readStream.format("deltaSharing")` on the real server, deltalake writing commits between batches.

Every stream's rows are checked against the Python client's read of the same
table (its snapshot, or its change feed).
"""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import delta_sharing
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.conftest import Deployment
from tests.end_to_end.test_client_local import table_name

BUCKET = "streaming"
_names = itertools.count()


def batch(ids: range) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": pa.array([f"row {i}" for i in ids])})


def new_table(local: Deployment, change_feed: bool = False) -> tuple[Path, str]:
    """A new Delta table of two appends (ids 0-9 and 10-19), shared; its root and URL."""
    name = f"t{next(_names)}"
    root = local.storage.root / BUCKET / name
    cdf = {"delta.enableChangeDataFeed": "true"} if change_feed else None
    write_deltalake(str(root), batch(range(0, 10)), configuration=cdf)
    write_deltalake(str(root), batch(range(10, 20)), mode="append")
    local.share_tables(f"stream_{name}", {name: name}, bucket=BUCKET)
    return root, f"{local.profile(f'stream_{name}')}#stream_{name}.default.{name}"


@pytest.fixture
def table(local: Deployment) -> tuple[Path, str]:
    return new_table(local)


@pytest.fixture
def cdf_table(local: Deployment) -> tuple[Path, str]:
    return new_table(local, change_feed=True)


def sorted_ids(rows: Any) -> list[int]:
    return sorted(int(row["id"]) for row in rows)


def run_available_now(spark, url: str, checkpoint: Path, out: Path, **options: str) -> list[dict[str, Any]]:
    """One `Trigger.AvailableNow` run into a parquet directory; every row the sink holds after it."""
    reader = spark.readStream.format("deltaSharing")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load(url)
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    if query.exception():
        raise RuntimeError(str(query.exception()))
    return [row.asDict() for row in spark.read.parquet(str(out)).collect()]


def test_available_now_reads_the_snapshot_then_new_commits_after_a_restart(
    spark, table, tmp_path: Path
) -> None:
    root, url = table
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    first = run_available_now(spark, url, checkpoint, out)
    assert sorted_ids(first) == list(range(20))
    write_deltalake(str(root), batch(range(20, 25)), mode="append")  # the provider's next commit
    again = run_available_now(spark, url, checkpoint, out)  # restarted from the checkpoint
    expected = delta_sharing.load_as_pandas(url)
    assert sorted_ids(again) == sorted(expected["id"]) == list(range(25))  # no loss, no duplicate
    assert {row["v"] for row in again} == set(expected["v"])
    assert sorted_ids(run_available_now(spark, url, checkpoint, out)) == list(range(25))  # nothing new


def test_max_files_per_trigger_splits_batches_of_a_running_stream(spark, table) -> None:
    root, url = table
    query = (
        spark.readStream.format("deltaSharing")
        .option("maxFilesPerTrigger", "1")
        .option("queryTableVersionIntervalSeconds", "0")  # see the provider's commit at once
        .load(url)
        .writeStream.format("memory")
        .queryName("split_batches")
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        write_deltalake(str(root), batch(range(20, 23)), mode="append")
        query.processAllAvailable()
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert sizes == [10, 10, 3]  # one file a batch: the snapshot's two, then the new commit's
    got = spark.sql("select id from split_batches").collect()
    assert sorted_ids(got) == sorted(delta_sharing.load_as_pandas(url)["id"]) == list(range(23))


def test_available_now_with_a_limit_reads_one_batch_a_run_and_the_next_run_goes_on(
    spark, table, tmp_path: Path
) -> None:
    root, url = table
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    # PySpark 4.1 runs a Python source's AvailableNow query as one batch: one file a run here.
    first = run_available_now(spark, url, checkpoint, out, maxFilesPerTrigger="1")
    assert len(first) == 10  # half the snapshot: the checkpoint stands inside it
    write_deltalake(str(root), batch(range(20, 25)), mode="append")
    second = run_available_now(spark, url, checkpoint, out, maxFilesPerTrigger="1")
    assert sorted_ids(second) == list(range(20))  # the snapshot's other file, not the new commit yet
    third = run_available_now(spark, url, checkpoint, out, maxFilesPerTrigger="1")
    assert sorted_ids(third) == list(range(25))


def test_starting_version_or_timestamp_reads_commits_from_there(spark, table, tmp_path: Path) -> None:
    root, url = table
    got = run_available_now(spark, url, tmp_path / "c", tmp_path / "o", startingVersion="1")
    assert sorted_ids(got) == list(range(10, 20))
    # The server dates a commit by its log file.
    committed = (root / "_delta_log" / f"{1:020}.json").stat().st_mtime
    stamp = dt.datetime.fromtimestamp(committed, dt.UTC).isoformat(timespec="milliseconds")
    by_time = run_available_now(spark, url, tmp_path / "c2", tmp_path / "o2", startingTimestamp=stamp)
    assert sorted_ids(by_time) == list(range(10, 20))


def test_starting_version_latest_reads_only_later_commits(spark, table, tmp_path: Path) -> None:
    root, url = table
    checkpoint, out = tmp_path / "c", tmp_path / "o"
    run_available_now(spark, url, checkpoint, out, startingVersion="latest")  # nothing yet
    write_deltalake(str(root), batch(range(20, 25)), mode="append")
    got = run_available_now(spark, url, checkpoint, out, startingVersion="latest")
    assert sorted_ids(got) == list(range(20, 25))


def test_a_commit_that_removes_files_fails_the_stream_unless_an_option_says_otherwise(
    spark, table, tmp_path: Path
) -> None:
    root, url = table
    DeltaTable(str(root)).delete("id < 5")  # rewrites the first file: a remove and an add
    with pytest.raises(Exception, match=r"version 2 removed 1 data file.*skipChangeCommits=true"):
        run_available_now(spark, url, tmp_path / "c1", tmp_path / "o1", startingVersion="0")
    skipped = run_available_now(
        spark, url, tmp_path / "c2", tmp_path / "o2", startingVersion="0", skipChangeCommits="true"
    )
    assert sorted_ids(skipped) == list(range(20))  # the appends; the delete's commit left out
    changed = run_available_now(
        spark, url, tmp_path / "c3", tmp_path / "o3", startingVersion="0", ignoreChanges="true"
    )
    assert sorted_ids(changed) == sorted([*range(20), *range(5, 10)])  # the rewritten file's rows again
    DeltaTable(str(root)).delete("id >= 10")  # the second file gone whole: a remove alone
    with pytest.raises(Exception, match=r"version 3 removed 1 data file.*without adding.*ignoreDeletes=true"):
        run_available_now(spark, url, tmp_path / "c4", tmp_path / "o4", startingVersion="3")
    deleted = run_available_now(
        spark, url, tmp_path / "c5", tmp_path / "o5", startingVersion="3", ignoreDeletes="true"
    )
    assert deleted == []


def test_change_feed_stream_matches_the_clients_change_feed(spark, cdf_table, tmp_path: Path) -> None:
    root, url = cdf_table
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    first = run_available_now(spark, url, checkpoint, out, readChangeFeed="true", startingVersion="0")
    assert len(first) == 20
    DeltaTable(str(root)).update(updates={"v": "'updated'"}, predicate="id = 3")
    DeltaTable(str(root)).delete("id >= 15")
    got = run_available_now(spark, url, checkpoint, out, readChangeFeed="true", startingVersion="0")
    expected = delta_sharing.load_table_changes_as_pandas(url, starting_version=0)
    key = ["_commit_version", "_change_type", "id", "v"]

    def triples(rows: list[dict[str, Any]]) -> list[tuple]:
        return sorted(tuple(row[k] for k in key) for row in rows)

    assert triples(got) == triples(expected[key].to_dict("records"))
    assert {"update_preimage", "update_postimage", "delete"} <= {row["_change_type"] for row in got}
    assert all(row["_commit_timestamp"] is not None for row in got)


def test_change_feed_stream_without_a_start_begins_with_the_snapshot_as_inserts(
    spark, cdf_table, tmp_path: Path
) -> None:
    _, url = cdf_table
    got = run_available_now(spark, url, tmp_path / "c", tmp_path / "o", readChangeFeed="true")
    assert sorted_ids(got) == list(range(20))
    assert {(row["_change_type"], row["_commit_version"]) for row in got} == {("insert", 1)}


def test_a_deletion_vector_table_streams_its_snapshot(spark, local: Deployment, tmp_path: Path) -> None:
    path = "table-with-dv-small"
    local.share_tables("stream_dv", {table_name(path): path})
    url = f"{local.profile('stream_dv')}#stream_dv.default.{table_name(path)}"
    got = run_available_now(spark, url, tmp_path / "c", tmp_path / "o")
    expected = spark.read.format("deltaSharing").load(url).collect()
    assert sorted(map(str, got)) == sorted(str(row.asDict()) for row in expected) and got


def test_an_added_column_streams_on_and_a_retyped_one_stops_a_stream_of_older_commits(
    spark, table, tmp_path: Path
) -> None:
    root, url = table
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    run_available_now(spark, url, checkpoint, out)
    wider = batch(range(20, 22)).append_column("extra", pa.array(["a", "b"]))
    write_deltalake(str(root), wider, mode="append", schema_mode="merge")
    got = run_available_now(spark, url, checkpoint, out)
    assert sorted_ids(got) == list(range(22))  # the restarted stream's schema has `extra` too
    retyped = pa.table({"id": pa.array(["x"]), "v": pa.array(["y"])})
    write_deltalake(str(root), retyped, mode="overwrite", schema_mode="overwrite")
    # A stream takes the table's schema when it starts: older commits must still read by it.
    with pytest.raises(Exception, match="schema changed between versions 0 and 3: column 'id' is now"):
        run_available_now(spark, url, tmp_path / "c2", tmp_path / "o2", startingVersion="0")
