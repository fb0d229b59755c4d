"""Issue 39 over HTTP: a commit's answer carries the bytes of the metadata file it wrote, a load the
bytes the catalog keeps for the file the table's pointer names, each the same JSON the answers held
when they were made from dictionaries; old metadata files a commit stops tracking go once its answer
is sent; a commit decided on a version another commit replaced is a 409."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from share_store.catalog.commits import metadata_json, read_metadata
from tests.sharing_server.catalog.served import Served, set_properties, table_path

T = table_path("ns", "t")


def on_disk(location: str) -> bytes:
    return Path(location.removeprefix("file://")).read_bytes()


def append(snapshot_id: int, parent: int | None, location: str) -> dict[str, Any]:
    snapshot: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": snapshot_id,
        "timestamp-ms": 1_700_000_000_000 + snapshot_id,
        "manifest-list": f"{location}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append", "note": "é ☃"},  # non-ASCII, as JSONResponse wrote it
        "schema-id": 0,
    }
    if parent is not None:
        snapshot["parent-snapshot-id"] = parent
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ],
    }


def test_a_commit_answers_the_bytes_it_wrote_and_a_load_the_same(catalog: Served) -> None:
    where = catalog.call("GET", T).json()["metadata"]["location"]
    committed = catalog.call("POST", T, append(1, None, where))
    assert committed.status_code == 200, committed.text
    assert committed.headers["content-type"] == "application/json"
    answer = committed.json()
    assert set(answer) == {"metadata-location", "metadata"}
    written = on_disk(answer["metadata-location"])
    assert answer["metadata"] == json.loads(written)
    assert written in committed.content  # spliced as written, not serialised again
    assert answer["metadata"]["snapshots"][0]["summary"]["note"] == "é ☃"

    loaded = catalog.call("GET", T)
    assert loaded.status_code == 200, loaded.text
    assert set(loaded.json()) == {"metadata", "config", "metadata-location"}
    assert loaded.json()["metadata-location"] == answer["metadata-location"]
    assert loaded.json()["metadata"] == answer["metadata"] and loaded.json()["config"] == {}
    refs = catalog.call("GET", T + "?snapshots=refs").json()
    assert refs["metadata"] == answer["metadata"]  # its one snapshot is main's


def test_a_commit_on_a_replaced_version_is_a_conflict_and_the_winner_stays(catalog: Served) -> None:
    where = catalog.call("GET", T).json()["metadata"]["location"]
    assert catalog.call("POST", T, append(1, None, where)).status_code == 200
    winner = catalog.call("POST", T, append(2, 1, where))
    assert winner.status_code == 200, winner.text
    stale = catalog.call("POST", T, append(3, 1, where))  # decided on snapshot 1
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["type"] == "CommitFailedException"
    loaded = catalog.call("GET", T).json()
    assert loaded["metadata-location"] == winner.json()["metadata-location"]
    assert [s["snapshot-id"] for s in loaded["metadata"]["snapshots"]] == [1, 2]


def test_superseded_metadata_files_go_once_the_answer_is_sent(catalog: Served) -> None:
    keep_one = catalog.call("POST", T, set_properties(**{"write.metadata.previous-versions-max": "1"}))
    assert keep_one.status_code == 200, keep_one.text
    locations = [keep_one.json()["metadata-location"]]
    for n in range(3):
        committed = catalog.call("POST", T, set_properties(n=str(n)))
        assert committed.status_code == 200, committed.text
        locations.append(committed.json()["metadata-location"])
    # The newest file and the one its log keeps; every older one went.
    exists = [Path(location.removeprefix("file://")).exists() for location in locations]
    assert exists == [False, False, True, True]


def test_the_answer_of_a_transaction_commit_and_its_files(catalog: Served) -> None:
    changes = {"table-changes": [{"identifier": {"namespace": ["ns"], "name": "t"}, **set_properties(k="v")}]}
    done = catalog.call("POST", "/whs/transactions/commit", changes)
    assert done.status_code == 204, done.text
    loaded = catalog.call("GET", T).json()
    assert loaded["metadata"]["properties"]["k"] == "v"
    # A load answers the file as the catalog writes it, and the catalog wrote it so.
    written = on_disk(loaded["metadata-location"])
    assert written == metadata_json(read_metadata(written))
    assert loaded["metadata"] == json.loads(written)
