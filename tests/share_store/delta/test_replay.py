"""Our log replay agrees with deltalake on every version of every test table."""

from __future__ import annotations

import gc
import logging
import shutil
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from share_store.delta import collector, replay
from share_store.delta.replay import LogReader
from share_store.errors import InvalidParameter, TableLogDamaged
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.tables.active_files import struct_rows
from tests.conftest import TESTDATA, TESTDATA_BUCKET, Deployment

TABLES = [
    "cdc_ict_table",
    "cdf-table",
    "cdf-table-non-partitioned",
    "checkpoint-v2-table",
    "checkpoints",
    "checkpoints_vacuumed",
    "delta-0.8.0-null-partition",
    "delta-0.8.0-partitioned",
    "delta-0.8.0-special-partition",
    "delta-1.2.1-only-struct-stats",
    "delta-2.2.0-partitioned-types",
    "delta-stats-optional",
    "latest_not_checkpointed",
    "partition-type-primitives",
    "simple_table",
    "simple_table_with_cdc",
    "simple_table_with_checkpoint",
    "spark-variant-stable-feature-checkpoint",
    "table-with-domain-metadata",
    "table-with-dv-small",
    "table_with_column_mapping",
    "table_with_deletion_logs",
    "table_with_edge_timestamps",
    "with_checkpoint_no_last_checkpoint",
]


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> LocalStorage:
    root = tmp_path_factory.mktemp("replay")
    shutil.copytree(testdata, root / "bucket")
    return LocalStorage(root, UrlSigner(b"k" * 32, "http://unused/files"))


@pytest.mark.parametrize("table", TABLES)
def test_replay_matches_deltalake(storage: LocalStorage, table: str) -> None:
    reader = LogReader(storage, "bucket", table)
    listing = reader.listing()
    compared = 0
    for version in range(listing.latest_version + 1):
        try:
            state = reader.replay(listing, version)
        except InvalidParameter as error:  # log cleaned before a checkpoint: not reconstructable by anyone
            assert f"Versions {listing.earliest_version} to {listing.latest_version}" in error.message
            assert version < listing.earliest_version
            continue
        expected = DeltaTable(str(storage.root / "bucket" / table), version=version)
        paths = sorted(pa.table(expected.get_add_actions(flatten=True))["path"].to_pylist())
        assert sorted(path for path, _ in state.active) == paths, f"version {version}"
        assert state.metadata["id"] == expected.metadata().id
        assert state.protocol["minReaderVersion"] == expected.protocol().min_reader_version
        compared += 1
    assert compared >= 1


@pytest.mark.parametrize("table", ["table-with-dv-small", "table_with_deletion_logs"])
def test_deletion_vector_descriptors_are_kept(storage: LocalStorage, table: str) -> None:
    reader = LogReader(storage, "bucket", table)
    listing = reader.listing()
    state = reader.replay(listing, listing.latest_version)
    with_dv = [add for add in state.active.values() if add.get("deletionVector")]
    assert with_dv and all(add["deletionVector"]["storageType"] == "u" for add in with_dv)
    assert all(isinstance(add.get("partitionValues"), dict) for add in state.active.values())


@pytest.mark.parametrize("table", [t for t in TABLES if t != "checkpoint-v2-table"])
def test_streamed_checkpoints_give_the_same_actions(
    storage: LocalStorage, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every checkpoint streamed, each version lists exactly the actions held replays do."""
    reader = LogReader(storage, "bucket", table)
    listing = reader.listing()
    streamed = 0
    for version in range(listing.latest_version + 1):
        if version < listing.earliest_version:
            continue  # cleaned out of the log
        held = reader.replay(listing, version).files()
        monkeypatch.setattr(replay, "STREAM_THRESHOLD_BYTES", -1)
        state = reader.replay(listing, version)
        monkeypatch.undo()
        files = state.files()
        streamed += bool(state.streamed_parts)
        # In the held replay's order too: a paged answer may be read part from each.
        assert list(files) == list(held), f"version {version}"
        assert (files.count, files.total_size, files.has_deletion_vectors) == (
            held.count,
            held.total_size,
            held.has_deletion_vectors,
        )
        assert list(files) == list(files)  # iterable again, same order
    if listing.checkpoints:
        assert streamed


CHECKPOINTS = sorted(TESTDATA.glob("*/_delta_log/*.parquet"))


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=lambda p: f"{p.parts[-3]}/{p.name[:24]}")
def test_checkpoint_rows_built_by_column_match_to_pylist(checkpoint: Path) -> None:
    """The column-wise row builder that replays use gives what pyarrow's own conversion gives."""
    table = pq.read_table(checkpoint)
    if "add" not in table.column_names:
        pytest.skip("no add column")
    adds = table.column("add").combine_chunks()
    built = {index: replay._normalize(row) for index, row in struct_rows(adds)}
    expected = {i: replay._normalize(row) for i, row in enumerate(adds.to_pylist()) if row is not None}
    assert built == expected
    assert expected  # every test checkpoint has some adds


def test_the_collector_pause_nests_and_restores() -> None:
    assert gc.isenabled()
    with collector.collector_paused():
        assert not gc.isenabled()
        with collector.collector_paused():  # another replay, as from another thread
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first one still runs
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.collector_paused():
            pass
        assert not gc.isenabled()  # a collector turned off by someone else stays off
    finally:
        gc.enable()


def test_a_version_cleaned_out_of_the_log_is_named_with_those_available(storage: LocalStorage) -> None:
    reader = LogReader(storage, "bucket", "checkpoints_vacuumed")
    listing = reader.listing()
    assert listing.earliest_version > 0
    with pytest.raises(InvalidParameter, match=r"Cannot load table version 0: .* cleaned up") as raised:
        reader.replay(listing, 0)
    assert f"Versions {listing.earliest_version} to {listing.latest_version} are available" in (
        raised.value.message
    )


def test_a_gap_in_the_commits_is_a_damaged_log_not_missing_files(storage: LocalStorage, tmp_path) -> None:
    table = storage.root / "bucket" / "simple_table_gap"
    shutil.copytree(storage.root / "bucket" / "simple_table", table)
    commits = sorted((table / "_delta_log").glob("*.json"))
    assert len(commits) >= 3
    commits[1].unlink()
    reader = LogReader(storage, "bucket", "simple_table_gap")
    with pytest.raises(TableLogDamaged) as raised:
        reader.replay(reader.listing(), len(commits) - 1)
    assert "commit 1 is missing" in raised.value.detail
    assert raised.value.message.endswith(f"{raised.value.detail}.")  # the recipient hears which commit


def test_a_commit_that_is_not_json_is_a_damaged_log_naming_its_version(storage: LocalStorage) -> None:
    table = storage.root / "bucket" / "simple_table_corrupt"
    shutil.copytree(storage.root / "bucket" / "simple_table", table)
    last = sorted((table / "_delta_log").glob("*.json"))[-1]
    last.write_bytes(last.read_bytes()[:40])
    reader = LogReader(storage, "bucket", "simple_table_corrupt")
    listing = reader.listing()
    with pytest.raises(TableLogDamaged, match="cannot be read") as raised:
        reader.replay(listing, listing.latest_version)
    assert f"unreadable at version {listing.latest_version}" in raised.value.detail


def test_recipients_hear_each_situation_precisely(
    local: Deployment, caplog: pytest.LogCaptureFixture
) -> None:
    """Cleaned-up versions, a corrupt commit and vacuumed files: three answers, not one."""
    root = local.storage.root / TESTDATA_BUCKET  # type: ignore[attr-defined]
    shutil.copytree(root / "simple_table", root / "corrupt_log")
    last = sorted((root / "corrupt_log" / "_delta_log").glob("*.json"))[-1]
    last.write_bytes(b'{"add": {"path": "broken')
    local.share_tables("precise", {"vacuumed": "checkpoints_vacuumed", "corrupt": "corrupt_log"})
    headers = {"Authorization": f"Bearer {local.token('precise')}"}
    url = f"{local.endpoint}/shares/precise/schemas/default/tables"
    cleaned = httpx.post(f"{url}/vacuumed/query", json={"version": 0}, headers=headers)
    assert cleaned.status_code == 400
    assert "Cannot load table version 0" in cleaned.json()["message"]
    assert "are available" in cleaned.json()["message"]
    with caplog.at_level(logging.ERROR, logger="sharing_server"):
        corrupt = httpx.post(f"{url}/corrupt/query", json={}, headers=headers)
    assert corrupt.status_code == 500
    assert corrupt.json() == {
        "errorCode": "INTERNAL_ERROR",
        "message": "The table's log cannot be read: the log is unreadable at version 4: not JSON.",
    }
    assert any("unreadable at version" in record.getMessage() for record in caplog.records)


def test_a_checkpoint_missing_a_part_is_a_damaged_log(storage: LocalStorage) -> None:
    source = TESTDATA.parent / "golden" / "multi-part-checkpoint" / "delta"
    table = storage.root / "bucket" / "multipart_damaged"
    shutil.copytree(source, table)
    log = table / "_delta_log"
    (log / "00000000000000000000.json").unlink()  # cleaned up: the checkpoint at 1 stands for it
    reader = LogReader(storage, "bucket", "multipart_damaged")
    listing = reader.listing()
    assert listing.earliest_version == 1 and reader.replay(listing, 1).protocol is not None
    with pytest.raises(InvalidParameter, match="Versions 1 to 1 are available"):
        reader.replay(listing, 0)
    next(log.glob("*.checkpoint.0000000002.0000000002.parquet")).unlink()
    listing = reader.listing()
    with pytest.raises(TableLogDamaged) as raised:
        reader.replay(listing, 1)
    assert "checkpoint is missing parts" in raised.value.detail
