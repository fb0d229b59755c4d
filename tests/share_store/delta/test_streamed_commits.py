"""A version with no checkpoint, streamed from its commits, lists exactly what a held replay holds.

Checked on every version of every test table (each replayed from its commits alone),
on random logs of adds, removes, files added again and deletion vectors, and on logs
the scan cannot read, which are replayed the usual way (and fail as they did).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from share_store.delta import replay, streamed_commits
from share_store.delta.replay import LogReader
from share_store.delta.streamed_commits import StreamedCommits
from share_store.errors import TableLogDamaged
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from tests.share_store.delta.test_replay import TABLES

PROTOCOL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"]}}
METADATA = {
    "metaData": {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": '{"type":"struct","fields":[]}',
        "partitionColumns": [],
        "configuration": {"a": "b"},
    }
}


@pytest.fixture
def stream_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "COLD_STREAM_BYTES", -1)


def storage_of(root: Path) -> LocalStorage:
    return LocalStorage(root, UrlSigner(b"k" * 32, "http://unused/files"))


def assert_same(reader: LogReader, version: int) -> StreamedCommits:
    listing = reader.listing()
    held = reader.replay(listing, version)
    state = reader.replay(listing, version, first_reader=True)
    files = state.files()
    assert isinstance(files, StreamedCommits)
    # In the held replay's order too: a paged answer may be read part from each.
    assert list(files) == list(held.files()), f"version {version}"
    expected = held.files()
    assert (files.count, files.total_size, files.has_deletion_vectors) == (
        expected.count,
        expected.total_size,
        expected.has_deletion_vectors,
    )
    assert (state.protocol, state.metadata) == (held.protocol, held.metadata)
    assert list(files) == list(files)  # iterable again, same order
    assert files.listed.is_set()
    return files


@pytest.mark.parametrize("table", TABLES)
def test_every_version_replayed_from_its_commits_alone_lists_the_same(
    tmp_path: Path, testdata: Path, table: str, stream_all: None
) -> None:
    shutil.copytree(testdata / table, tmp_path / "b" / table)
    for checkpoint in (tmp_path / "b" / table / "_delta_log").glob("*checkpoint*"):
        checkpoint.unlink()  # every version from its commits
    (tmp_path / "b" / table / "_delta_log" / "_last_checkpoint").unlink(missing_ok=True)
    reader = LogReader(storage_of(tmp_path), "b", table)
    listing = reader.listing()
    if 0 not in listing.commits:
        pytest.skip("commits cleaned out of the log: only a checkpoint tells the state")
    for version in range(listing.latest_version + 1):
        assert_same(reader, version)


def write_log(root: Path, commits: list[list[dict[str, Any]]], spacing: str = "") -> LogReader:
    log = root / "b" / "t" / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    separators = (",", ": ") if spacing else (",", ":")
    for version, actions in enumerate(commits):
        lines = [spacing + json.dumps(action, separators=separators) for action in actions]
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    return LogReader(storage_of(root), "b", "t")


def random_commits(seed: int) -> list[list[dict[str, Any]]]:
    """Adds, removes, files added again (with and without a remove between) and deletion vectors."""
    rng = random.Random(seed)
    commits: list[list[dict[str, Any]]] = [[PROTOCOL, METADATA]]
    known: list[str] = []
    for version in range(1, rng.randint(2, 12)):
        actions: list[dict[str, Any]] = []
        touched: set[str] = set()
        for _ in range(rng.randint(0, 30)):
            roll = rng.random()
            if roll < 0.55 or not known:
                path = f"part-{len(known)}.parquet" if rng.random() < 0.8 or not known else rng.choice(known)
                if path not in known:
                    known.append(path)
            else:
                path = rng.choice(known)
            if path in touched:
                continue  # within a commit a file appears once
            touched.add(path)
            descriptor = None
            if rng.random() < 0.2:
                descriptor = {
                    "storageType": "u",
                    "pathOrInlineDv": f"dv{rng.randint(0, 3)}",
                    "sizeInBytes": 4,
                }
                if rng.random() < 0.5:
                    descriptor["offset"] = rng.randint(1, 3)
                descriptor["cardinality"] = 1
            file: dict[str, Any] = {"path": path}
            if descriptor:
                file["deletionVector"] = descriptor
            if roll < 0.8:
                size = rng.choice([rng.randint(1, 10_000), None])
                add = file | {"partitionValues": {}, "modificationTime": version, "dataChange": True}
                if size is not None:
                    add["size"] = size
                actions.append({"add": add})
            else:
                actions.append({"remove": file | {"deletionTimestamp": version, "dataChange": True}})
        if rng.random() < 0.1:
            actions.append({"metaData": METADATA["metaData"] | {"configuration": {"v": str(version)}}})
        actions.append({"commitInfo": {"operation": "WRITE", "version": version}})
        commits.append(actions)
    return commits


@pytest.mark.parametrize("seed", range(60))
def test_random_logs_list_what_a_held_replay_holds(tmp_path: Path, seed: int, stream_all: None) -> None:
    reader = write_log(tmp_path, random_commits(seed), spacing=" " if seed % 3 == 0 else "")
    listing = reader.listing()
    for version in range(listing.latest_version + 1):
        assert_same(reader, version)


def test_a_file_added_again_is_listed_where_a_held_replay_keeps_it(tmp_path: Path, stream_all: None) -> None:
    add = {"partitionValues": {}, "modificationTime": 1, "dataChange": True}
    commits = [
        [
            PROTOCOL,
            METADATA,
            {"add": {"path": "a", "size": 1} | add},
            {"add": {"path": "b", "size": 2} | add},
        ],
        [{"add": {"path": "a", "size": 10} | add}],  # again, no remove: keeps its place, new action
        [{"remove": {"path": "b"}}],
        [{"add": {"path": "c", "size": 3} | add}, {"add": {"path": "b", "size": 20} | add}],  # at the end
    ]
    files = assert_same(write_log(tmp_path, commits), 3)
    assert [(a["path"], a["size"]) for a in files] == [("a", 10), ("c", 3), ("b", 20)]
    assert (files.count, files.total_size) == (3, 33)


def test_small_commits_are_held_and_only_first_readers_stream(tmp_path: Path) -> None:
    reader = write_log(tmp_path, random_commits(1))
    listing = reader.listing()
    assert reader.replay(listing, listing.latest_version, first_reader=True).streamed_commits is None
    replay.COLD_STREAM_BYTES, saved = -1, replay.COLD_STREAM_BYTES
    try:
        assert reader.replay(listing, listing.latest_version).streamed_commits is None
    finally:
        replay.COLD_STREAM_BYTES = saved


@pytest.mark.parametrize(
    "lines",
    [
        ['{"add":{"path":"a","size":1.5}}'],  # a size that is not an integer
        ['{"add":{"path":"a","size":1}}{"add":{"path":"b","size":1}}'],  # two objects on a line
        ['{"add":{"path":"a","size":1}}\r{"add":{"path":"b","size":1}}'],  # a carriage return between
        ['{"add":{"size":1}}'],  # no path
        ['{"add":{"path":"a","deletionVector":{"offset":1}}}'],  # a vector without its fields
        ["[1]"],
        ['{"add":{"path":"a","stats":"{\\"numRecords\\":NaN}","size":NaN}}'],
    ],
)
def test_what_the_scan_cannot_read_is_replayed_the_usual_way(tmp_path: Path, lines: list[str]) -> None:
    raw = "\n".join([json.dumps(PROTOCOL), json.dumps(METADATA), *lines]).encode()
    assert streamed_commits.scan([raw], replay._loads, replay.file_identity) is None
    log = tmp_path / "b" / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_bytes(raw)
    reader = LogReader(storage_of(tmp_path), "b", "t")
    replay.COLD_STREAM_BYTES, saved = -1, replay.COLD_STREAM_BYTES
    try:
        try:
            held = list(reader.replay(reader.listing(), 0).files())
        except Exception as error:  # the streamed read must fail the same way
            with pytest.raises(type(error)):
                reader.replay(reader.listing(), 0, first_reader=True).files()
            return
        state = reader.replay(reader.listing(), 0, first_reader=True)
        assert state.streamed_commits is None
        assert list(state.files()) == held
    finally:
        replay.COLD_STREAM_BYTES = saved


def test_blank_lines_and_windows_line_ends_are_skipped_as_a_replay_skips_them(
    tmp_path: Path, stream_all: None
) -> None:
    add = '{"add":{"path":"%s","size":1,"partitionValues":{},"modificationTime":0,"dataChange":true}}'
    raw = "\r\n".join(["", json.dumps(PROTOCOL), "   ", json.dumps(METADATA), "", add % "a", "\t", add % "b"])
    log = tmp_path / "b" / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text(raw + "\r\n\r\n")
    files = assert_same(LogReader(storage_of(tmp_path), "b", "t"), 0)
    assert [a["path"] for a in files] == ["a", "b"]


def test_a_line_only_pyarrow_reads_fails_as_damaged_when_listed(tmp_path: Path) -> None:
    lines = [PROTOCOL, METADATA, {"add": {"path": "a", "size": 1}}]
    raw = "\n".join(json.dumps(line) for line in lines).encode()
    with pytest.raises(TableLogDamaged):  # the head lines are parsed by the scan itself
        streamed_commits.scan([raw], lambda line: _refuse(), replay.file_identity)
    files = streamed_commits.scan([raw], replay._loads, replay.file_identity)
    assert files is not None
    files.files._loads = lambda line: _refuse()  # as if orjson and json both refused the line
    with pytest.raises(TableLogDamaged):
        list(files.files)


def _refuse() -> dict[str, Any]:
    raise ValueError("not JSON")


def test_a_v2_checkpoint_streams_its_sidecars_to_a_first_reader(
    tmp_path: Path, testdata: Path, stream_all: None
) -> None:
    shutil.copytree(testdata / "checkpoint-v2-table", tmp_path / "b" / "t")
    reader = LogReader(storage_of(tmp_path), "b", "t")
    listing = reader.listing()
    for version in range(min(listing.checkpoints), listing.latest_version + 1):
        held = reader.replay(listing, version)
        state = reader.replay(listing, version, stream_above=-1, first_reader=True)
        assert state.streamed_parts and all(
            "_sidecars" not in str(p) or p.exists() for p in state.streamed_parts
        )
        files = state.files()
        assert list(files) == list(held.files()), f"version {version}"
        assert (files.count, files.total_size) == (held.files().count, held.files().total_size)
        assert (state.protocol, state.metadata) == (held.protocol, held.metadata)
