"""Iceberg tables with row-level deletes, written by Spark 3.5 + Iceberg, read through the server.

The oracle is Spark's own read of every snapshot (`tests/iceberg_writer.py`). The
tables are written once and kept under `.cache/iceberg-deletes/` (keyed by the
writer's source), since starting Spark 3.5 costs half a minute.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from share_store.delta.deletion_vectors import DV_MAGIC, z85_decode
from share_store.model import TableSpec
from tests.conftest import Deployment, deploy
from tests.dv import payload_positions

TABLES = ("pos_v2", "dv_v3", "cow_v2")
CAPABILITIES = "responseformat=delta;readerfeatures=deletionvectors,columnmapping"


@pytest.fixture(scope="module")
def expected(written: Path) -> dict[str, Any]:
    return json.loads((written / "expected.json").read_text())


def serve(
    tmp: Path, written: Path, expected: dict[str, Any], settings: dict[str, str] | None = None
) -> Deployment:
    """A server of the written tables; its cache of derived files goes to a bucket of its own."""
    cache_bucket = f"cache-{tmp.name}"
    env = {"SHARING_ICEBERG_CACHE_BUCKET": cache_bucket, **(settings or {})}
    deployment = deploy(tmp, {"type": "local", "root": str(written / "buckets")}, env=env)
    catalog = deployment.catalogs.catalog("default")
    catalog.create_namespace("db")
    for name in TABLES:
        catalog.register_table(("db", name), expected[name]["metadata"])
    specs = [TableSpec.parse(f"db:{name}:uniform:default:db:{name}") for name in TABLES]
    deployment.store.create_share("deletes", specs)
    return deployment


def stop(deployment: Deployment) -> None:
    deployment.server.stop()
    deployment.store.close()
    # The tables are cached between runs: what the server derived from them is not.
    bucket = deployment.config.options.iceberg.cache_bucket
    shutil.rmtree(Path(deployment.config.storage["root"]) / str(bucket), ignore_errors=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, written: Path, expected) -> Iterator[Deployment]:
    deployment = serve(tmp_path_factory.mktemp("iceberg-deletes"), written, expected)
    yield deployment
    stop(deployment)


@pytest.fixture(scope="module")
def profile(server: Deployment) -> str:
    return server.profile("deletes")


@pytest.fixture(scope="module")
def api(server: Deployment) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {server.token('deletes')}"}
    with httpx.Client(base_url=server.endpoint, headers=headers, timeout=60) as client:
        yield client


def spark_rows(expected: dict[str, Any], name: str, version: int) -> list[list[Any]]:
    return expected[name]["snapshots"][version]["rows"]


def frame_rows(frame: pd.DataFrame) -> list[list[Any]]:
    return sorted([int(r.id), r.part, r.v] for r in frame.itertuples())


def test_the_writer_made_the_deletes_it_promises(written: Path) -> None:
    files = [p.name for p in (written / "buckets" / "spark").rglob("*") if p.is_file()]
    assert any(name.endswith(".puffin") for name in files)  # v3 deletion vectors
    assert any(name.endswith("-deletes.parquet") for name in files)  # v2 position deletes


@pytest.mark.parametrize("name", TABLES)
def test_every_snapshot_reads_exactly_sparks_rows_in_the_delta_format(
    expected: dict[str, Any], profile: str, name: str
) -> None:
    snapshots = expected[name]["snapshots"]
    assert len(snapshots) == 5
    for version in range(len(snapshots)):
        frame = delta_sharing.load_as_pandas(
            f"{profile}#deletes.db.{name}", version=version, use_delta_format=True
        )
        assert frame_rows(frame) == spark_rows(expected, name, version), (name, version)
    latest = delta_sharing.load_as_pandas(f"{profile}#deletes.db.{name}", use_delta_format=True)
    assert frame_rows(latest) == spark_rows(expected, name, len(snapshots) - 1)


@pytest.mark.parametrize("name", ["pos_v2", "dv_v3"])
def test_the_parquet_format_refuses_snapshots_with_deletes_and_names_the_delta_format(
    expected: dict[str, Any], profile: str, api: httpx.Client, name: str
) -> None:
    # The two appends carry no deletes: the parquet format serves them as before.
    for version in (0, 1):
        frame = delta_sharing.load_as_pandas(f"{profile}#deletes.db.{name}", version=version)
        assert frame_rows(frame) == spark_rows(expected, name, version)
    response = api.post(f"/shares/deletes/schemas/db/tables/{name}/query", json={"version": 2})
    assert response.status_code == 400
    body = response.json()
    assert body["errorCode"] == "UNSUPPORTED_OPERATION"
    assert "deletion vectors" in body["message"] and "responseformat=delta" in body["message"]


def test_the_copy_on_write_control_reads_in_the_parquet_format(
    expected: dict[str, Any], profile: str
) -> None:
    frame = delta_sharing.load_as_pandas(f"{profile}#deletes.db.cow_v2")
    assert frame_rows(frame) == spark_rows(expected, "cow_v2", 4)


def query_lines(api: httpx.Client, name: str, version: int | None = None) -> list[dict[str, Any]]:
    body = {} if version is None else {"version": version}
    response = api.post(
        f"/shares/deletes/schemas/db/tables/{name}/query",
        json=body,
        headers={"delta-sharing-capabilities": CAPABILITIES},
    )
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def deleted_positions(descriptor: dict[str, Any]) -> set[int]:
    """Our own reading of a served (inline) deletion vector."""
    assert descriptor["storageType"] == "i"
    payload = z85_decode(descriptor["pathOrInlineDv"])[: descriptor["sizeInBytes"]]
    assert int.from_bytes(payload[:4], "little") == DV_MAGIC
    positions = payload_positions(payload)
    assert len(positions) == descriptor["cardinality"]
    return positions


@pytest.mark.parametrize(("name", "storage_type"), [("dv_v3", "i"), ("pos_v2", "i")])
def test_served_deletion_vectors_decode_to_sparks_rows(
    expected: dict[str, Any], api: httpx.Client, name: str, storage_type: str
) -> None:
    lines = query_lines(api, name)
    protocol = lines[0]["protocol"]["deltaProtocol"]
    assert "deletionVectors" in protocol["readerFeatures"]
    pieces: list[list[Any]] = []
    kinds = set()
    for line in lines[2:]:
        add = line["file"]["deltaSingleAction"]["add"]
        data = pq.read_table(pa.BufferReader(httpx.get(add["path"]).content), columns=["id", "part", "v"])
        descriptor = add.get("deletionVector")
        if descriptor:
            kinds.add(descriptor["storageType"])
            deleted = deleted_positions(descriptor)
            data = data.take([i for i in range(data.num_rows) if i not in deleted])
        pieces += [list(row.values()) for row in data.to_pylist()]
    assert kinds == {storage_type}
    rows = sorted(pieces)
    assert rows == spark_rows(expected, name, 4)


def test_a_v3_deletion_vector_is_served_as_the_puffin_blobs_own_bytes(
    written: Path, api: httpx.Client
) -> None:
    """Iceberg's `deletion-vector-v1` blob is Delta's layout: its payload is served as it is, inline.

    (Pointing at the blob inside the Puffin file would copy nothing, but delta-kernel
    checks that a deletion vector file starts with the version byte 1, not `PFA1`.)
    """
    descriptors = [
        line["file"]["deltaSingleAction"]["add"]["deletionVector"]
        for line in query_lines(api, "dv_v3")[2:]
        if line["file"]["deltaSingleAction"]["add"].get("deletionVector")
    ]
    assert descriptors
    puffins = [p.read_bytes() for p in (written / "buckets" / "spark" / "db" / "dv_v3").rglob("*.puffin")]
    for descriptor in descriptors:
        payload = z85_decode(descriptor["pathOrInlineDv"])[: descriptor["sizeInBytes"]]
        framed = len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
        assert any(framed in puffin for puffin in puffins)


def expected_changes(expected: dict[str, Any], name: str, version: int) -> list[list[Any]]:
    """Spark's rows of `version` against those of the version before, as change rows."""
    before = {tuple(row) for row in spark_rows(expected, name, version - 1)} if version else set()
    after = {tuple(row) for row in spark_rows(expected, name, version)}
    return sorted(
        [[*row, "delete", version] for row in before - after]
        + [[*row, "insert", version] for row in after - before]
    )


@pytest.mark.parametrize("name", TABLES)
def test_the_change_data_feed_of_every_snapshot_matches_sparks_rows(
    expected: dict[str, Any], profile: str, name: str
) -> None:
    """A snapshot that only adds deletes reads as `remove` (old vector) + `add` (new vector).

    Merge-on-read tables change exactly the rows Spark changed. A copy-on-write
    rewrite has no change files, so (as in Delta without them) the rows it carries
    over read as deleted and inserted again: they cancel out of its net change.
    """
    for version in range(len(expected[name]["snapshots"])):
        frame = delta_sharing.load_table_changes_as_pandas(
            f"{profile}#deletes.db.{name}",
            starting_version=version,
            ending_version=version,
            use_delta_format=True,
        )
        rows = sorted(
            [int(r["id"]), r["part"], r["v"], r["_change_type"], int(r["_commit_version"])]
            for r in frame.to_dict("records")
        )
        if name == "cow_v2":
            rows = net_changes(rows)
        assert rows == expected_changes(expected, name, version), (name, version)


def net_changes(rows: list[list[Any]]) -> list[list[Any]]:
    deleted = Counter(tuple(row[:3]) for row in rows if row[3] == "delete")
    inserted = Counter(tuple(row[:3]) for row in rows if row[3] == "insert")
    versions = {row[4] for row in rows}
    version = versions.pop() if versions else 0
    return sorted(
        [[*row, "delete", version] for row in (deleted - inserted).elements()]
        + [[*row, "insert", version] for row in (inserted - deleted).elements()]
    )


def test_a_delete_snapshot_streams_as_remove_with_the_old_vector_and_add_with_the_new(
    api: httpx.Client,
) -> None:
    """dv_v3's version 3 replaces version 2's vectors of the same files."""
    response = api.post(
        "/shares/deletes/schemas/db/tables/dv_v3/query",
        json={"startingVersion": 3, "endingVersion": 3},
        headers={"delta-sharing-capabilities": CAPABILITIES},
    )
    assert response.status_code == 200, response.text
    actions = [json.loads(line)["file"]["deltaSingleAction"] for line in response.text.splitlines()[2:]]
    removed = {a["remove"]["path"].split("?")[0]: a["remove"] for a in actions if "remove" in a}
    added = {a["add"]["path"].split("?")[0]: a["add"] for a in actions if "add" in a}
    assert removed and removed.keys() <= added.keys()
    for path, remove in removed.items():
        old, new = (
            deleted_positions(remove["deletionVector"]),
            deleted_positions(added[path]["deletionVector"]),
        )
        assert old < new  # the second DELETE deletes more rows of the same file


def test_the_parquet_change_data_feed_of_delete_snapshots_is_refused_naming_the_delta_format(
    api: httpx.Client,
) -> None:
    response = api.get(
        "/shares/deletes/schemas/db/tables/pos_v2/changes",
        params={"startingVersion": 2, "endingVersion": 2},
    )
    assert response.status_code == 400
    assert "responseformat=delta" in response.json()["message"]


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("changes", {"startingVersion": 0, "endingVersion": 2, "includeHistoricalMetadata": "true"}),
        ("query", {"startingVersion": 1, "endingVersion": 2}),
    ],
)
def test_a_parquet_read_starting_before_the_deletes_is_refused_not_served_without_them(
    api: httpx.Client, path: str, params: dict[str, Any]
) -> None:
    """Starting at a version without deletes, the head says parquet is fine; version 2 is not.

    Files handed out without their deletion vectors would bring deleted rows back.
    """
    url = f"/shares/deletes/schemas/db/tables/pos_v2/{path}"
    response = api.get(url, params=params) if path == "changes" else api.post(url, json=params)
    assert response.status_code == 400, response.text[:300]
    body = response.json()
    assert body["errorCode"] == "UNSUPPORTED_OPERATION"
    assert "Version 2" in body["message"] and "responseformat=delta" in body["message"]
