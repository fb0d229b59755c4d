"""Deletion vector files and materialized data files, derived from Iceberg deletes and cached.

Served with `inline_dv_bytes = 0`, every vector becomes a Delta deletion vector
file in the cache, and with `deletes_in_parquet = "materialize"` the parquet
format reads copies of the data files without their deleted rows. Spark's rows
of every snapshot are the oracle, as in `test_iceberg_deletes.py`.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from share_store.delta.deletion_vectors import DV_MAGIC
from share_store.iceberg.materialized import COPIES, COPIES_MEMO
from share_store.iceberg.table import IcebergTableReader
from share_store.storage import LocalStorage
from share_store.tables.options import DeleteOptions, IcebergOptions
from tests.conftest import Deployment
from tests.dv import payload_positions
from tests.end_to_end.test_iceberg_deletes import (
    CAPABILITIES,
    REPLACING,
    TABLES,
    deploy_tables,
    expected_changes,
    frame_rows,
    spark_rows,
    stop,
)


def serve(
    tmp: Path, written: Path, expected: dict[str, Any], settings: dict[str, str] | None = None
) -> Deployment:
    return deploy_tables(tmp, written, expected, TABLES, settings)


FILED = {"SHARING_ICEBERG_INLINE_DV_BYTES": "0", "SHARING_ICEBERG_DELETES_IN_PARQUET": "materialize"}


@pytest.fixture(scope="module")
def expected(written: Path) -> dict[str, Any]:
    return json.loads((written / "expected.json").read_text())


@pytest.fixture(scope="module")
def filed(tmp_path_factory: pytest.TempPathFactory, written: Path, expected) -> Iterator[Deployment]:
    deployment = serve(tmp_path_factory.mktemp("filed"), written, expected, FILED)
    yield deployment
    stop(deployment)


def cache_root(deployment: Deployment) -> Path:
    return Path(deployment.config.storage["root"]) / str(deployment.config.options.iceberg.cache_bucket)


def query_adds(deployment: Deployment, name: str, version: int | None = None) -> list[dict[str, Any]]:
    response = httpx.post(
        f"{deployment.endpoint}/shares/deletes/schemas/db/tables/{name}/query",
        json={} if version is None else {"version": version},
        headers={
            "Authorization": f"Bearer {deployment.token('deletes')}",
            "delta-sharing-capabilities": CAPABILITIES,
        },
    )
    assert response.status_code == 200, response.text
    return [json.loads(line)["file"]["deltaSingleAction"]["add"] for line in response.text.splitlines()[2:]]


@pytest.mark.parametrize("name", ["pos_v2", "dv_v3", *REPLACING])
def test_every_snapshot_reads_sparks_rows_through_deletion_vector_files(
    expected: dict[str, Any], filed: Deployment, name: str
) -> None:
    profile = filed.profile("deletes")
    for version in range(len(expected[name]["snapshots"])):
        frame = delta_sharing.load_as_pandas(
            f"{profile}#deletes.db.{name}", version=version, use_delta_format=True
        )
        assert frame_rows(frame) == spark_rows(expected, name, version), (name, version)


@pytest.mark.parametrize("name", ["pos_v2", "dv_v3"])
def test_a_deletion_vector_file_holds_the_vector_in_delta_s_layout(filed: Deployment, name: str) -> None:
    vectors = [add["deletionVector"] for add in query_adds(filed, name) if add.get("deletionVector")]
    assert vectors
    for descriptor in vectors:
        assert descriptor["storageType"] == "p" and descriptor["offset"] == 1
        content = httpx.get(descriptor["pathOrInlineDv"]).content  # the signed URL
        assert content[0] == 1  # Delta's DV file format version
        size = int.from_bytes(content[1:5], "big")
        payload, crc = content[5 : 5 + size], content[5 + size : 9 + size]
        assert size == descriptor["sizeInBytes"] and zlib.crc32(payload).to_bytes(4, "big") == crc
        assert int.from_bytes(payload[:4], "little") == DV_MAGIC
        assert len(payload_positions(payload)) == descriptor["cardinality"]


@pytest.mark.parametrize("name", ["pos_v2", "dv_v3", *REPLACING])
def test_the_parquet_format_reads_materialized_copies_with_sparks_rows(
    expected: dict[str, Any], filed: Deployment, name: str
) -> None:
    profile = filed.profile("deletes")
    for version in range(len(expected[name]["snapshots"])):
        frame = delta_sharing.load_as_pandas(f"{profile}#deletes.db.{name}", version=version)
        assert frame_rows(frame) == spark_rows(expected, name, version), (name, version)


def test_materialized_files_count_only_the_rows_left_and_are_written_once(filed: Deployment) -> None:
    token = filed.token("deletes")
    url = f"{filed.endpoint}/shares/deletes/schemas/db/tables/pos_v2/query"

    def files() -> list[dict[str, Any]]:
        response = httpx.post(url, json={}, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
        lines = [json.loads(line) for line in response.text.splitlines()]
        assert lines[0]["protocol"] == {"minReaderVersion": 1}
        return [line["file"] for line in lines[2:]]

    first = files()
    # The copies and their lines stay with the held snapshot: the next response only signs them.
    cache = filed.server.app.state.services.readers.snapshots  # type: ignore[attr-defined]
    (held,) = [snapshot for snapshot in cache._entries.values() if COPIES_MEMO in snapshot.memo]
    (templates,) = held.memo[COPIES_MEMO].values()
    made = dict(templates)
    assert len(made) == len(first) and len(held.memo[COPIES]) == len(first) - sum(
        "deletionVector" not in add for add in held.adds
    )
    copies = sorted((cache_root(filed) / ".delta-sharing-cache" / "data").iterdir())
    assert copies and len(copies) <= len(first)
    stamps = [path.stat().st_mtime_ns for path in copies]
    second = files()
    assert [path.stat().st_mtime_ns for path in copies] == stamps  # served again, not rewritten
    assert dict(held.memo[COPIES_MEMO][next(iter(held.memo[COPIES_MEMO]))]) == made  # none made anew
    assert sum(json.loads(f["stats"])["numRecords"] for f in second) == sum(
        json.loads(f["stats"])["numRecords"] for f in first
    )
    for entry in second:
        rows = pq.read_metadata(pa.BufferReader(httpx.get(entry["url"]).content)).num_rows
        assert json.loads(entry["stats"])["numRecords"] == rows


class CountingStorage(LocalStorage):
    """Local storage that remembers which files were read."""

    def __init__(self, root: Path, signer: Any) -> None:
        super().__init__(root, signer)
        self.reads: list[str] = []

    def read(self, bucket: str, key: str) -> bytes:
        self.reads.append(key)
        return super().read(bucket, key)


@pytest.mark.parametrize("name", ["pos_v2", "dv_v3"])
def test_a_restarted_server_answers_from_the_index_without_reading_delete_files(
    filed: Deployment, name: str
) -> None:
    served = query_adds(filed, name)  # the running server built the snapshot and recorded its vectors
    table = filed.store.get_table("deletes", "db", name)
    storage = CountingStorage(Path(filed.config.storage["root"]), filed.storage.signer)  # type: ignore[attr-defined]
    options = IcebergOptions(filed.config.options.iceberg)
    reader = IcebergTableReader(table, filed.catalogs, filed.store, storage, options)
    snapshot = reader.snapshot()
    vectors = {add["path"]: add["deletionVector"] for add in snapshot.adds if add.get("deletionVector")}
    assert vectors
    assert not [key for key in storage.reads if key.endswith(("-deletes.parquet", ".puffin"))]
    assert [key for key in storage.reads if "/index2/" in key]
    # The same files carry the same vectors as the server that computed them served.
    served_vectors = {
        add["path"].split("?")[0].rsplit("/", 1)[-1]: add["deletionVector"]["cardinality"]
        for add in served
        if add.get("deletionVector")
    }
    assert {path.rsplit("/", 1)[-1]: v["cardinality"] for path, v in vectors.items()} == served_vectors


def test_without_a_writable_cache_small_vectors_are_inlined_and_materializing_is_refused(
    tmp_path: Path,
    written: Path,
    expected: dict[str, Any],
) -> None:
    blocker = f"blocked-{tmp_path.name}"
    (written / "buckets" / blocker).write_text("a file where the cache bucket would be")
    deployment = serve(tmp_path, written, expected, FILED | {"SHARING_ICEBERG_CACHE_BUCKET": blocker})
    try:
        adds = query_adds(deployment, "dv_v3")
        assert {add["deletionVector"]["storageType"] for add in adds if add.get("deletionVector")} == {"i"}
        response = httpx.post(
            f"{deployment.endpoint}/shares/deletes/schemas/db/tables/dv_v3/query",
            json={},
            headers={"Authorization": f"Bearer {deployment.token('deletes')}"},
        )
        assert response.status_code == 400
        body = response.json()
        assert body["errorCode"] == "UNSUPPORTED_OPERATION" and "cache" in body["message"]
    finally:
        deployment.server.stop()
        deployment.store.close()
        (written / "buckets" / blocker).unlink()


def test_delete_options_refuse_bad_settings() -> None:
    with pytest.raises(ValueError, match="deletes_in_parquet"):
        DeleteOptions(deletes_in_parquet="sometimes")
    with pytest.raises(ValueError, match="cache_prefix"):
        DeleteOptions(cache_prefix="../outside")
    # A first segment an own-warehouse table could be located in: its writers would hold the cache.
    with pytest.raises(ValueError, match="start with a dot"):
        DeleteOptions(cache_prefix="cache/")
    with pytest.raises(ValueError, match="inline_dv_bytes"):
        DeleteOptions(inline_dv_bytes=10**9)


@pytest.mark.parametrize("name", ["pos_v2", "dv_v3", *REPLACING])
def test_the_parquet_change_data_feed_reads_materialized_change_rows(
    expected: dict[str, Any], filed: Deployment, name: str
) -> None:
    """Each version's deleted rows arrive as `delete` rows of change files, as Spark's rows say."""
    profile = filed.profile("deletes")
    for version in range(len(expected[name]["snapshots"])):
        frame = delta_sharing.load_table_changes_as_pandas(
            f"{profile}#deletes.db.{name}", starting_version=version, ending_version=version
        )
        rows = sorted(
            [int(r["id"]), r["part"], r["v"], r["_change_type"], int(r["_commit_version"])]
            for r in frame.to_dict("records")
        )
        assert rows == expected_changes(expected, name, version), (name, version)


def test_a_parquet_stream_over_delete_snapshots_hands_out_materialized_copies(filed: Deployment) -> None:
    response = httpx.post(
        f"{filed.endpoint}/shares/deletes/schemas/db/tables/dv_v3/query",
        json={"startingVersion": 2, "endingVersion": 3},
        headers={"Authorization": f"Bearer {filed.token('deletes')}"},
    )
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines()]
    kinds = [next(iter(line)) for line in lines[2:]]
    assert "remove" in kinds and "add" in kinds
    for line in lines[2:]:
        body = next(iter(line.values()))
        assert "deletionVector" not in body
        assert pq.read_metadata(pa.BufferReader(httpx.get(body["url"]).content)).num_rows >= 0
