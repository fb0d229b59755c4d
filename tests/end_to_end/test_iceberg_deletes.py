"""Iceberg tables with row-level deletes, written by Spark 3.5 + Iceberg, read through the server.

The oracle is Spark's own read of every snapshot (`tests/iceberg_writer.py`). The
tables are written once and kept under `.cache/iceberg-deletes/` (keyed by the
writer's source), since starting Spark 3.5 costs half a minute.
"""

from __future__ import annotations

import datetime
import io
import json
import math
import shutil
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from share_store.delta.deletion_vectors import DV_MAGIC, z85_decode
from share_store.errors import TableFilesMissing
from share_store.iceberg.deletes import CorruptDeleteFile
from share_store.iceberg.table import IcebergTableReader
from share_store.model import TableSpec
from share_store.storage.local import LocalStorage
from tests.conftest import Deployment, audit_record, deploy
from tests.dv import payload_positions

TABLES = ("pos_v2", "dv_v3", "cow_v2", "eq_v2", "upd_v2", "upd_v3", "partial_v3", "merge_v2", "merge_v3")
#: Tables whose later commits replace some deletes of earlier ones (v3: some vectors of a Puffin file).
REPLACING = ("upd_v2", "upd_v3", "partial_v3", "merge_v2", "merge_v3")
COLUMNS = {"eq_v2": ["id", "part", "name", "d", "v"]}  # the others: id, part, v
CAPABILITIES = "responseformat=delta;readerfeatures=deletionvectors,columnmapping"


@pytest.fixture(scope="module")
def expected(written: Path) -> dict[str, Any]:
    return json.loads((written / "expected.json").read_text())


def deploy_tables(
    tmp: Path,
    written: Path,
    expected: dict[str, Any],
    names: tuple[str, ...],
    env: dict[str, str] | None = None,
) -> Deployment:
    """A server sharing the written tables `names` as share `deletes`, schema `db`.

    Its cache of derived files goes to a bucket of its own, which `stop` removes: the
    tables are kept between runs, what a server derived from them is not.
    """
    env = {"SHARING_ICEBERG_CACHE_BUCKET": f"cache-{tmp.name}", **(env or {})}
    deployment = deploy(tmp, {"type": "local", "root": str(written / "buckets")}, env=env)
    catalog = deployment.catalogs.catalog("default")
    catalog.create_namespace("db")
    for name in names:
        catalog.register_table(("db", name), expected[name]["metadata"])
    specs = [TableSpec.parse(f"db:{name}:uniform:default:db:{name}") for name in names]
    deployment.store.create_share("deletes", specs)
    return deployment


def stop(deployment: Deployment) -> None:
    deployment.server.stop()
    deployment.store.close()
    bucket = deployment.config.options.iceberg.cache_bucket
    shutil.rmtree(Path(deployment.config.storage["root"]) / str(bucket), ignore_errors=True)


@pytest.fixture(scope="module")
def spark_tables_server(
    tmp_path_factory: pytest.TempPathFactory, written: Path, expected
) -> Iterator[Deployment]:
    deployment = deploy_tables(tmp_path_factory.mktemp("iceberg-deletes"), written, expected, TABLES)
    yield deployment
    stop(deployment)


@pytest.fixture(scope="module")
def profile(spark_tables_server: Deployment) -> str:
    return spark_tables_server.profile("deletes")


@pytest.fixture(scope="module")
def api(spark_tables_server: Deployment) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {spark_tables_server.token('deletes')}"}
    with httpx.Client(base_url=spark_tables_server.endpoint, headers=headers, timeout=60) as client:
        yield client


def spark_rows(expected: dict[str, Any], name: str, version: int) -> list[list[Any]]:
    return expected[name]["snapshots"][version]["rows"]


def row_order(row: list[Any]) -> list[tuple[bool, Any]]:
    """Nulls last in each column, as the writer sorts Spark's rows."""
    return [(value is None, value) for value in row]


def cell(value: Any) -> Any:
    """A value as Spark's rows in expected.json hold it: dates as ISO text, nulls as None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.date().isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    return int(value) if hasattr(value, "__index__") else value


def rows_of(records: list[dict[str, Any]], name: str) -> list[list[Any]]:
    columns = COLUMNS.get(name, ["id", "part", "v"])
    return sorted([[cell(record[column]) for column in columns] for record in records], key=row_order)


def frame_rows(frame: pd.DataFrame, name: str = "pos_v2") -> list[list[Any]]:
    return rows_of(frame.to_dict("records"), name)


def test_the_writer_made_the_deletes_it_promises(written: Path, spark_tables_server: Deployment) -> None:
    from share_store.iceberg.planning import plan_files

    files = [p.name for p in (written / "buckets" / "spark").rglob("*") if p.is_file()]
    assert any(name.endswith(".puffin") for name in files)  # v3 deletion vectors
    assert any(name.endswith("-deletes.parquet") for name in files)  # v2 position deletes
    table = spark_tables_server.catalogs.catalog("default").load_table(("db", "eq_v2"))
    plan = plan_files(table.scan())
    deletes = sorted((d.equality_ids, d.is_global) for d in plan.equality_deletes)
    # One column in a partition, two columns in another, one column everywhere.
    assert deletes == [((1,), False), ((1,), True), ((3, 4), False)]
    assert any(task.delete_files for task in plan.tasks)  # and position deletes on the same table
    assert len(set(plan.sequence_numbers.values())) > 1  # data older and newer than the deletes


SNAPSHOTS = {"pos_v2": 5, "dv_v3": 5, "cow_v2": 5, "eq_v2": 7, "partial_v3": 12}
SNAPSHOTS |= dict.fromkeys(("upd_v2", "upd_v3", "merge_v2", "merge_v3"), 5)


def test_a_puffin_file_partly_replaced_keeps_one_live_vector_and_names_ten(
    spark_tables_server: Deployment,
) -> None:
    """`partial_v3` has the shape that brought deleted rows back, by construction.

    The DELETE's Puffin file names a vector for each of the ten data files; the
    UPDATE's file replaces nine of them, and the tenth keeps the first file live.
    """
    from share_store.iceberg.deletes import puffin_blobs
    from share_store.iceberg.live_vectors import read_live_vectors

    table = spark_tables_server.catalogs.catalog("default").load_table(("db", "partial_v3"))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    live = read_live_vectors(snapshot.manifests(table.io), table.io)
    assert len(live) == 10
    by_file = Counter(vector.puffin_path for vector in live.values())
    assert sorted(by_file.values()) == [1, 9]
    (first,) = [path for path, count in by_file.items() if count == 1]
    with open(first.removeprefix("file:"), "rb") as puffin:
        named = {blob.data_file for blob in puffin_blobs(puffin.read(), first).values()}
    assert named == set(live)  # its footer still names the nine vectors the UPDATE replaced


@pytest.mark.parametrize("name", TABLES)
def test_every_snapshot_reads_exactly_sparks_rows_in_the_delta_format(
    expected: dict[str, Any], profile: str, name: str
) -> None:
    snapshots = expected[name]["snapshots"]
    assert len(snapshots) == SNAPSHOTS[name]
    for version in range(len(snapshots)):
        frame = delta_sharing.load_as_pandas(
            f"{profile}#deletes.db.{name}", version=version, use_delta_format=True
        )
        assert frame_rows(frame, name) == spark_rows(expected, name, version), (name, version)
    latest = delta_sharing.load_as_pandas(f"{profile}#deletes.db.{name}", use_delta_format=True)
    assert frame_rows(latest, name) == spark_rows(expected, name, len(snapshots) - 1)


@pytest.mark.parametrize(("name", "clean"), [("pos_v2", 2), ("dv_v3", 2), ("eq_v2", 1)])
def test_the_parquet_format_refuses_snapshots_with_deletes_and_names_the_delta_format(
    expected: dict[str, Any], profile: str, api: httpx.Client, name: str, clean: int
) -> None:
    # The appends before the first delete carry none: the parquet format serves them as before.
    for version in range(clean):
        frame = delta_sharing.load_as_pandas(f"{profile}#deletes.db.{name}", version=version)
        assert frame_rows(frame, name) == spark_rows(expected, name, version)
    response = api.post(f"/shares/deletes/schemas/db/tables/{name}/query", json={"version": clean})
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


def served_rows(lines: list[dict[str, Any]], name: str) -> tuple[list[list[Any]], set[str]]:
    """The rows the files of a delta-format response hold, less their deletion vectors; the DV kinds."""
    records: list[dict[str, Any]] = []
    kinds = set()
    for line in lines[2:]:
        add = line["file"]["deltaSingleAction"]["add"]
        data = pq.read_table(pa.BufferReader(httpx.get(add["path"]).content))
        descriptor = add.get("deletionVector")
        if descriptor:
            kinds.add(descriptor["storageType"])
            deleted = deleted_positions(descriptor)
            data = data.take(pa.array([i for i in range(data.num_rows) if i not in deleted], pa.int64()))
        partition = add["partitionValues"]
        records += [partition | row for row in data.to_pylist()]
    return rows_of(records, name), kinds


@pytest.mark.parametrize(
    ("name", "storage_type"),
    [("dv_v3", "i"), ("pos_v2", "i"), ("eq_v2", "i"), *((n, "i") for n in REPLACING)],
)
def test_served_deletion_vectors_decode_to_sparks_rows(
    expected: dict[str, Any], api: httpx.Client, name: str, storage_type: str
) -> None:
    lines = query_lines(api, name)
    protocol = lines[0]["protocol"]["deltaProtocol"]
    assert "deletionVectors" in protocol["readerFeatures"]
    rows, kinds = served_rows(lines, name)
    assert kinds == {storage_type}
    assert rows == spark_rows(expected, name, SNAPSHOTS[name] - 1)


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


def test_a_hint_keeps_the_whole_snapshots_deletion_vectors(api: httpx.Client) -> None:
    """Planning with a filter drops delete files by their own stats: the vectors must not change.

    `id >= 100` rules out the delete files on `id` (their keys are below 21), yet the
    data files kept hold rows with those keys, which a reader not filtering would see.
    """
    # Keyed by the URL without its query: the signature's expiry moves between two queries.
    full = {
        unsigned(line["file"]["deltaSingleAction"]["add"]["path"]): line["file"]["deltaSingleAction"]["add"]
        for line in query_lines(api, "eq_v2")[2:]
    }
    hint = {"op": "greaterThanOrEqual", "children": [
        {"op": "column", "name": "id", "valueType": "int"},
        {"op": "literal", "value": "100", "valueType": "int"},
    ]}  # fmt: skip
    response = api.post(
        "/shares/deletes/schemas/db/tables/eq_v2/query",
        json={"jsonPredicateHints": json.dumps(hint)},
        headers={"delta-sharing-capabilities": CAPABILITIES},
    )
    assert response.status_code == 200, response.text
    hinted = [json.loads(line)["file"]["deltaSingleAction"]["add"] for line in response.text.splitlines()[2:]]
    assert 0 < len(hinted) < len(full)  # the files of the later appends (ids 0, 3, 5) are pruned
    for add in hinted:
        assert add.get("deletionVector") == full[unsigned(add["path"])].get("deletionVector")
    # Among them, files whose rows with id 0, 3, 5, ... the deletes on `id` delete.
    assert (
        sum(bool(add.get("deletionVector")) for add in hinted)
        == sum(
            bool(add.get("deletionVector"))
            for path, add in full.items()
            if path in {unsigned(a["path"]) for a in hinted}
        )
        > 0
    )


def unsigned(url: str) -> str:
    return url.split("?")[0]


def client(deployment: Deployment) -> httpx.Client:
    token = deployment.token("deletes")
    headers = {"Authorization": f"Bearer {token}", "delta-sharing-capabilities": CAPABILITIES}
    return httpx.Client(base_url=deployment.endpoint, headers=headers, timeout=60)


def metric(deployment: Deployment, name: str) -> float:
    text = httpx.get(deployment.config.base_url + "/metrics").text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name)]
    return sum(values)


def test_resolution_is_audited_with_its_time_and_measured(
    tmp_path: Path, written: Path, expected: dict[str, Any]
) -> None:
    deployment = deploy_tables(tmp_path, written, expected, ("eq_v2",))
    try:
        api = client(deployment)
        responses = [api.post("/shares/deletes/schemas/db/tables/eq_v2/query", json={}) for _ in range(2)]
        assert [r.status_code for r in responses] == [200, 200]
        first, second = (audit_record(deployment, r.headers["x-request-id"]) for r in responses)
        assert "equality_deletes" not in second  # answered from the snapshot cache: nothing resolved
        resolved = first["equality_deletes"]
        assert resolved["outcome"] == "resolved" and resolved["seconds"] >= 0
        assert resolved["delete_files"] == 3 and resolved["data_files"] == 8
        assert resolved["bytes_scanned"] > 0 and resolved["rows_deleted"] > 0
        count = 'sharing_iceberg_equality_delete_resolution_seconds_count{outcome="resolved"}'
        assert metric(deployment, count) == 1
        scanned = metric(deployment, "sharing_iceberg_equality_delete_scanned_bytes_total")
        assert scanned == resolved["bytes_scanned"]
    finally:
        stop(deployment)


def test_a_snapshot_past_the_budget_is_refused_never_served_without_its_deletes(
    tmp_path: Path, written: Path, expected: dict[str, Any]
) -> None:
    # A budget nothing can be resolved within: every equality-deleted snapshot is refused.
    env = {"SHARING_ICEBERG_EQUALITY_DELETE_BUDGET_SECONDS": "1e-9"}
    deployment = deploy_tables(tmp_path, written, expected, ("eq_v2",), env=env)
    try:
        api = client(deployment)
        path = "/shares/deletes/schemas/db/tables/eq_v2/query"
        assert api.post(path, json={"version": 0}).status_code == 200  # no deletes yet
        responses = [api.post(path, json={}) for _ in range(2)]  # refused again from the cache, as clearly
        for response in responses:
            assert response.status_code == 400
            body = response.json()
            assert body["errorCode"] == "UNSUPPORTED_OPERATION"
            assert "equality deletes took longer than the configured 1e-09 s budget" in body["message"]
        records = [audit_record(deployment, r.headers["x-request-id"]) for r in responses]
        assert records[0]["equality_deletes"]["outcome"] == "over_budget"
        assert "equality_deletes" not in records[1]
        count = 'sharing_iceberg_equality_delete_resolution_seconds_count{outcome="over_budget"}'
        assert metric(deployment, count) == 1
    finally:
        stop(deployment)


class DamagedStorage(LocalStorage):
    """The test tables' storage, with the file named `damage` gone or garbled."""

    def __init__(self, storage: LocalStorage, damage: str, garble: bool) -> None:
        super().__init__(storage.root, storage.signer, storage.url_lifetime)
        self.damage, self.garble = damage, garble

    def _broken(self, key: str) -> bool:
        return key.rsplit("/", 1)[-1] == self.damage

    def read(self, bucket: str, key: str) -> bytes:
        if self._broken(key):
            if self.garble:
                return b"PAR1" + b"\0" * 64 + b"PAR1"
            raise FileNotFoundError(key)
        return super().read(bucket, key)

    def open(self, bucket: str, key: str) -> BinaryIO:
        if self._broken(key):
            if self.garble:
                return io.BytesIO(b"PAR1" + b"\0" * 64 + b"PAR1")
            raise FileNotFoundError(key)
        return super().open(bucket, key)


@pytest.mark.parametrize(
    ("kind", "garble", "error", "message"),
    [
        ("delete", False, TableFilesMissing, "table files"),
        ("delete", True, CorruptDeleteFile, r"equality delete file eq-.*\.parquet cannot be read"),
        ("data", False, TableFilesMissing, "table files"),
        ("data", True, CorruptDeleteFile, r"data file .* cannot be read to apply its equality deletes"),
    ],
)
def test_a_vanished_or_damaged_file_is_an_error_never_rows_that_should_be_gone(
    spark_tables_server: Deployment, kind: str, garble: bool, error: type[Exception], message: str
) -> None:
    from share_store.iceberg.planning import plan_files

    iceberg = spark_tables_server.catalogs.catalog("default").load_table(("db", "eq_v2"))
    plan = plan_files(iceberg.scan())
    if kind == "delete":
        path = next(d.path for d in plan.equality_deletes if d.equality_ids == (1,) and not d.is_global)
    else:  # a data file of the first append, in the partition of the first delete
        oldest = min(plan.sequence_numbers.values())
        path = next(p for p, n in plan.sequence_numbers.items() if n == oldest and "/part=0/" in p)
    table = spark_tables_server.store.get_table("deletes", "db", "eq_v2")
    assert isinstance(spark_tables_server.storage, LocalStorage)
    storage = DamagedStorage(spark_tables_server.storage, path.rsplit("/", 1)[-1], garble)
    reader = IcebergTableReader(table, spark_tables_server.catalogs, spark_tables_server.store, storage)
    with pytest.raises(error, match=message):
        reader.snapshot()
    assert reader.snapshot(0).adds.count > 0  # before any delete: nothing to resolve, all readable


def expected_changes(expected: dict[str, Any], name: str, version: int) -> list[list[Any]]:
    """Spark's rows of `version` against those of the version before, as change rows."""
    before = {tuple(row) for row in spark_rows(expected, name, version - 1)} if version else set()
    after = {tuple(row) for row in spark_rows(expected, name, version)}
    return sorted(
        [[*row, "delete", version] for row in before - after]
        + [[*row, "insert", version] for row in after - before],
        key=row_order,
    )


def change_rows(frame: pd.DataFrame, name: str) -> list[list[Any]]:
    """A change data feed read's rows as `expected_changes` gives them."""
    columns = COLUMNS.get(name, ["id", "part", "v"])
    return sorted(
        [
            [*(cell(r[c]) for c in columns), r["_change_type"], int(r["_commit_version"])]
            for r in frame.to_dict("records")
        ],
        key=row_order,
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
        rows = change_rows(frame, name)
        if name == "cow_v2":
            rows = net_changes(rows)
        assert rows == expected_changes(expected, name, version), (name, version)


def net_changes(rows: list[list[Any]]) -> list[list[Any]]:
    deleted = Counter(tuple(row[:-2]) for row in rows if row[-2] == "delete")
    inserted = Counter(tuple(row[:-2]) for row in rows if row[-2] == "insert")
    versions = {row[-1] for row in rows}
    version = versions.pop() if versions else 0
    return sorted(
        [[*row, "delete", version] for row in (deleted - inserted).elements()]
        + [[*row, "insert", version] for row in (inserted - deleted).elements()],
        key=row_order,
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
