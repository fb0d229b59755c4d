"""Planning a deltaSharing stream's micro-batches (pyspark_delta_sharing.offsets), without Spark."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pyspark_delta_sharing.offsets import (
    ChangeCommitError,
    Limits,
    Offset,
    appended_files,
    between,
    by_version,
    end_offset,
    indexed,
    parse_bytes,
)
from pyspark_delta_sharing.source import ReadOptions
from pyspark_delta_sharing.streaming import DeltaSharingStreamReader, StreamOptions, schema_change


def file(
    file_id: str, size: int = 10, version: int | None = None, kind: str | None = "insert"
) -> dict[str, Any]:
    out: dict[str, Any] = {"id": file_id, "key": f"{kind}:{file_id}:{version}", "size": size}
    if version is not None:
        out["change"] = {"_change_type": kind, "_commit_version": version, "_commit_timestamp": None}
    return out


def ids(entries: list) -> list[str]:
    return [e.file["id"] for e in entries]


def test_offsets_round_trip_and_refuse_other_layouts() -> None:
    offset = Offset(7, 3, snapshot=True)
    assert Offset.from_json(offset.to_json()) == offset
    with pytest.raises(ValueError, match="new checkpoint"):
        Offset.from_json({"tableVersion": 7, "index": 3, "isStartingVersion": True})


def test_a_version_lists_by_id_whatever_order_the_server_answers_in() -> None:
    entries = indexed(4, [file("c"), file("a"), file("b")], snapshot=True)
    assert ids(entries) == ["a", "b", "c"]
    assert [e.index for e in entries] == [0, 1, 2]
    assert [e.last for e in entries] == [False, False, True]
    assert entries[-1].after() == Offset(5)  # the snapshot read whole: the next version's commit is next
    assert entries[0].after() == Offset(4, 0, snapshot=True)


def test_without_limits_a_batch_takes_every_version_up_to_the_latest() -> None:
    start = Offset(3, snapshot=True)
    entries = indexed(3, [file("a"), file("b")], snapshot=True) + by_version(
        [file("c", version=5), file("d", version=6)]
    )
    end = end_offset(start, entries, latest=8, limits=Limits())
    assert end == Offset(9)  # versions 7 and 8 have no files: passed all the same
    assert ids(between(entries, start, end)) == ["a", "b", "c", "d"]
    assert end_offset(end, [], latest=8, limits=Limits()) == end  # nothing new: no batch


def test_max_files_cuts_batches_and_they_join_up_without_gaps_or_overlaps() -> None:
    start = Offset(3, snapshot=True)
    entries = indexed(3, [file(x) for x in "abc"], snapshot=True) + by_version(
        [file("d", version=4), file("e", version=4), file("f", version=6)]
    )
    seen, offsets = [], [start]
    while offsets[-1] != Offset(7):
        offsets.append(end_offset(offsets[-1], entries, latest=6, limits=Limits(max_files=2)))
        seen.append(ids(between(entries, offsets[-2], offsets[-1])))
    assert seen == [["a", "b"], ["c", "d"], ["e", "f"]]
    assert offsets[1] == Offset(3, 1, snapshot=True)
    assert offsets[2] == Offset(4, 0)  # the snapshot done, the stream is in commit 4


def test_max_bytes_admits_one_file_even_when_it_is_larger() -> None:
    entries = by_version([file("a", 500, 1), file("b", 5, 1), file("c", 5, 1)])
    first = end_offset(Offset(1), entries, latest=1, limits=Limits(max_bytes=100))
    assert ids(between(entries, Offset(1), first)) == ["a"]
    second = end_offset(first, entries, latest=1, limits=Limits(max_bytes=100))
    assert ids(between(entries, first, second)) == ["b", "c"] and second == Offset(2)


def test_a_versions_cdc_files_stay_in_one_batch() -> None:
    entries = by_version(
        [file("a", version=2, kind=None), file("b", version=2, kind=None), file("c", version=3)]
    )
    end = end_offset(Offset(2), entries, latest=3, limits=Limits(max_files=1))
    assert ids(between(entries, Offset(2), end)) == ["a", "b"] and end == Offset(3)


def test_appends_pass_and_removing_commits_fail_naming_the_options() -> None:
    appends = [file("a", version=1), file("b", version=2)]
    assert ids_of(appended_files(appends)) == ["a", "b"]
    update = [*appends, file("a", version=3, kind="delete"), file("c", version=3)]
    with pytest.raises(ChangeCommitError, match=r"version 3 .*skipChangeCommits=true.*ignoreChanges=true"):
        appended_files(update)
    with pytest.raises(ChangeCommitError, match="version 3"):
        appended_files(update, ignore_deletes=True)  # deletes only: an update is not let by
    assert ids_of(appended_files(update, ignore_changes=True)) == ["a", "b", "c"]
    assert ids_of(appended_files(update, skip_change_commits=True)) == ["a", "b"]
    delete = [*appends, file("a", version=3, kind="delete")]
    with pytest.raises(ChangeCommitError, match=r"version 3 .*without adding.*ignoreDeletes=true"):
        appended_files(delete)
    for option in ("ignore_deletes", "ignore_changes", "skip_change_commits"):
        assert ids_of(appended_files(delete, **{option: True})) == ["a", "b"]


def ids_of(files: list[dict[str, Any]]) -> list[str]:
    return [f["id"] for f in files]


def test_stream_options() -> None:
    options = StreamOptions.parse(
        {"maxFilesPerTrigger": "5", "MAXBYTESPERTRIGGER": "1m", "ignoreChanges": "TRUE"}
    )
    assert options.limits == Limits(5, 1024 * 1024) and options.ignore_changes and not options.ignore_deletes
    assert StreamOptions.parse({"startingVersion": "latest"}).from_latest
    assert StreamOptions.parse({"startingVersion": "4"}).starting_version == 4
    with pytest.raises(ValueError, match="not both"):
        StreamOptions.parse({"startingVersion": "4", "startingTimestamp": "2024-01-01T00:00:00Z"})
    with pytest.raises(ValueError, match="positive"):
        StreamOptions.parse({"maxFilesPerTrigger": "0"})
    assert [parse_bytes(t) for t in ("100", "2k", "3m", "1g", "1tb")] == [
        100,
        2048,
        3 << 20,
        1 << 30,
        1 << 40,
    ]
    with pytest.raises(ValueError, match="byte count"):
        parse_bytes("lots")


class CountingReader(DeltaSharingStreamReader):
    """A stream reader whose server is a counter: how often it would ask for the latest version."""

    asked = 0

    def _query_latest(self) -> int:
        self.asked += 1
        return 3


def test_an_idle_stream_asks_for_the_latest_version_once_per_interval() -> None:
    read = ReadOptions(profile=None, table=None)  # type: ignore[arg-type]  # never used: no server
    patient = CountingReader(read, StreamOptions(), None)  # type: ignore[arg-type]
    assert [patient._latest_version() for _ in range(5)] == [3] * 5 and patient.asked == 1
    eager = CountingReader(read, StreamOptions.parse({"queryTableVersionIntervalSeconds": "0"}), None)  # type: ignore[arg-type]
    assert [eager._latest_version() for _ in range(5)] == [3] * 5 and eager.asked == 5


def test_a_schema_change_that_drops_or_retypes_a_streamed_column_is_named() -> None:
    stream = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "_commit_version", "type": "long", "nullable": True, "metadata": {}},
        ],
    }

    def table(*fields: tuple[str, str]) -> str:
        columns = [{"name": n, "type": t, "nullable": False, "metadata": {"delta.x": 1}} for n, t in fields]
        return json.dumps({"type": "struct", "fields": columns})

    assert schema_change(stream, table(("id", "long"), ("added", "string"))) is None
    assert schema_change(stream, table(("other", "long"))) == "column 'id' is gone"
    assert schema_change(stream, table(("id", "string"))) == 'column \'id\' is now "string", not "long"'
