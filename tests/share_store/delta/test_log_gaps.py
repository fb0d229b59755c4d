"""A Delta log whose versions are not contiguous (Delta's golden table `versions-not-contiguous`).

The table is made here by hand as that golden table is: three commits of the
same file, the middle one deleted. Every endpoint answers what a damaged log
answers (500, the table's log cannot be read), and the server's log names the
missing commit for the provider. Commits missing before a checkpoint were
cleaned up, and are no gap.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from share_store.delta.log_listing import list_log
from share_store.delta.reader import DeltaTableReader
from share_store.errors import TableLogDamaged
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from tests.conftest import TESTDATA_BUCKET, Deployment

DAMAGED = {
    "errorCode": "INTERNAL_ERROR",
    "message": "The table's log cannot be read: commit 1 is missing from the log (a gap in its commits, "
    "between versions 0 and 2): its latest version, 2, cannot be read.",
}


def write_not_contiguous(table: Path, versions: tuple[int, ...] = (0, 2)) -> None:
    """Delta's `versions-not-contiguous`: the same file added at versions 0, 1 and 2, then 1 removed."""
    log = table / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    for version in versions:
        actions: list[dict] = [
            {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE"}}
        ]
        if version == 0:
            actions += [
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                {
                    "metaData": {
                        "id": "versions-not-contiguous",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": json.dumps(schema),
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": 1_700_000_000_000,
                    }
                },
            ]
        add = {"path": "foo", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}
        actions.append({"add": add})
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def local_storage(root: Path) -> LocalStorage:
    return LocalStorage(root, UrlSigner(b"k" * 32, "http://unused/files"))


def test_a_gap_is_found_in_the_listing_and_named(tmp_path: Path) -> None:
    write_not_contiguous(tmp_path / "bucket" / "t", versions=(0, 2, 5, 6))
    listing = list_log(local_storage(tmp_path), "bucket", "t/_delta_log/")
    assert listing.gap == (1, 2)
    with pytest.raises(TableLogDamaged) as raised:
        listing.check_contiguous()
    assert raised.value.detail == (
        "commit 1 is missing from the log (a gap in its commits, between versions 0 and 2): "
        "its latest version, 6, cannot be read"
    )
    assert raised.value.message == f"The table's log cannot be read: {raised.value.detail}."
    write_not_contiguous(tmp_path / "bucket" / "u", versions=(0, 1, 4))
    with pytest.raises(TableLogDamaged) as raised:
        list_log(local_storage(tmp_path), "bucket", "u/_delta_log/").check_contiguous()
    assert raised.value.detail.startswith("commits 2 to 3 are missing from the log")


def test_the_reader_refuses_every_version_of_a_log_with_a_gap(tmp_path: Path) -> None:
    table = tmp_path / "bucket" / "t"
    write_not_contiguous(table)
    reader = DeltaTableReader(local_storage(tmp_path), "bucket", "t")
    for read in (reader.listing, reader.latest_version, reader.snapshot, lambda: reader.snapshot(0)):
        with pytest.raises(TableLogDamaged, match="cannot be read"):
            read()
    # The commit restored: the next request lists the log in full and reads it.
    (table / "_delta_log" / f"{2:020d}.json").rename(table / "_delta_log" / f"{1:020d}.json")
    assert reader.latest_version() == 1


def test_commits_cleaned_up_before_a_checkpoint_are_no_gap(tmp_path: Path) -> None:
    location = tmp_path / "bucket" / "t"
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    for _ in range(4):
        write_deltalake(str(location), rows, mode="append")
    DeltaTable(str(location), version=2).create_checkpoint()
    for version in (0, 1):  # cleaned up on the strength of the checkpoint at 2
        (location / "_delta_log" / f"{version:020d}.json").unlink()
    reader = DeltaTableReader(local_storage(tmp_path), "bucket", "t")
    assert reader.listing().gap is None
    assert reader.snapshot().version == 3 and reader.snapshot().num_files == 4


def test_every_endpoint_answers_a_damaged_log(local: Deployment, caplog: pytest.LogCaptureFixture) -> None:
    root = local.storage.root / TESTDATA_BUCKET  # type: ignore[attr-defined]
    shutil.rmtree(root / "versions_not_contiguous", ignore_errors=True)
    write_not_contiguous(root / "versions_not_contiguous")
    local.share_tables("gap", {"t": "versions_not_contiguous"})
    api = httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token('gap')}"})
    path = "/shares/gap/schemas/default/tables/t"
    requests = [
        ("GET", "/version", None),
        ("GET", "/version?startingTimestamp=2023-11-14T22:13:20Z", None),
        ("GET", "/metadata", None),
        ("GET", "/metadata?version=0", None),
        ("POST", "/query", {}),
        ("POST", "/query", {"version": 0}),
        ("POST", "/query", {"startingVersion": 0}),
        ("GET", "/changes?startingVersion=0", None),
    ]
    for method, suffix, body in requests:
        with caplog.at_level(logging.ERROR, logger="sharing_server"):
            caplog.clear()
            answer = api.request(method, path + suffix, json=body)
        assert answer.status_code == 500, (method, suffix, answer.status_code, answer.text)
        assert answer.json() == DAMAGED
        logged = [record.getMessage() for record in caplog.records]
        assert any("commit 1 is missing from the log" in line for line in logged), (suffix, logged)


def test_metadata_without_a_schema_is_a_damaged_log_naming_the_version(tmp_path: Path) -> None:
    """Delta's golden `versions-not-contiguous` also has a `metaData` with no `schemaString`."""
    table = tmp_path / "bucket" / "t"
    write_not_contiguous(table, versions=(0, 1))
    first = table / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        action.get("metaData", {}).pop("schemaString", None)
    first.write_text("".join(json.dumps(a) + "\n" for a in actions))
    reader = DeltaTableReader(local_storage(tmp_path), "bucket", "t")
    for version in (0, 1):
        with pytest.raises(TableLogDamaged) as raised:
            reader.snapshot(version)
        assert raised.value.message == (
            f"The table's log cannot be read: the table's metadata at version {version} "
            "has no schema (schemaString)."
        )
