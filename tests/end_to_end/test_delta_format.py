"""`responseformat=delta`: the Python client's delta-kernel-rs path on DV, column-mapping and plain tables."""

from __future__ import annotations

import json
from urllib.parse import unquote

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from share_store.delta.replay import LogReader
from tests.conftest import TESTDATA_BUCKET, Deployment
from tests.dv import read_with_deletion_vectors
from tests.end_to_end.test_client_local import READABLE, canonical, table_name

DV_TABLES = ["table-with-dv-small", "table_with_deletion_logs"]
DELTA_HEADER = "responseformat=delta;readerfeatures=deletionvectors,columnmapping,timestampntz"


@pytest.fixture(scope="module")
def profile(local: Deployment) -> str:
    paths = [*DV_TABLES, "table_with_column_mapping", "checkpoint-v2-table", *READABLE]
    local.share_tables("deltafmt", {table_name(p): p for p in paths})
    return local.profile("deltafmt")


def latest_adds(local: Deployment, path: str) -> list[dict]:
    reader = LogReader(local.storage, TESTDATA_BUCKET, path)
    listing = reader.listing()
    return list(reader.replay(listing, listing.latest_version).active.values())


@pytest.mark.parametrize("path", DV_TABLES)
def test_deletion_vectors_applied_by_the_client(local: Deployment, profile: str, path: str) -> None:
    root = local.storage.root / TESTDATA_BUCKET / path
    expected = read_with_deletion_vectors(root, latest_adds(local, path)).to_pandas()
    shared = delta_sharing.load_as_pandas(
        f"{profile}#deltafmt.default.{table_name(path)}", use_delta_format=True
    )
    assert len(shared) == len(expected)
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected[list(shared.columns)]))


def test_deletion_vectors_autoresolve_to_delta(local: Deployment, profile: str) -> None:
    url = f"{profile}#deltafmt.default.table_with_dv_small"
    shared = delta_sharing.load_as_pandas(url)  # the client negotiates the format itself
    assert sorted(shared["value"]) == list(range(1, 9))


def test_column_mapping_table(local: Deployment, profile: str) -> None:
    path = "table_with_column_mapping"
    root = local.storage.root / TESTDATA_BUCKET / path
    reader = LogReader(local.storage, TESTDATA_BUCKET, path)
    state = reader.replay(reader.listing(), 0)
    schema = json.loads(state.metadata["schemaString"])
    physical = {f["metadata"]["delta.columnMapping.physicalName"]: f["name"] for f in schema["fields"]}
    pieces = []
    for add in state.active.values():
        data = pq.read_table(root / unquote(add["path"]))
        data = data.rename_columns([physical.get(name, name) for name in data.column_names])
        for key, value in add["partitionValues"].items():
            data = data.append_column(physical[key], pa.array([value] * data.num_rows))
        pieces.append(data)
    expected = pa.concat_tables(pieces, promote_options="default").to_pandas()
    shared = delta_sharing.load_as_pandas(
        f"{profile}#deltafmt.default.{table_name(path)}", use_delta_format=True
    )
    assert sorted(shared.columns) == sorted(f["name"] for f in schema["fields"])
    assert len(shared) == len(expected) == 5
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected[list(shared.columns)].astype(str)))


@pytest.mark.parametrize("path", READABLE)
def test_plain_tables_in_delta_format(local: Deployment, profile: str, path: str) -> None:
    shared = delta_sharing.load_as_pandas(
        f"{profile}#deltafmt.default.{table_name(path)}", use_delta_format=True
    )
    expected = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / path)).to_pandas()
    assert len(shared) == len(expected)
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected[list(shared.columns)]))


def test_delta_format_time_travel_and_limit(local: Deployment, profile: str) -> None:
    url = f"{profile}#deltafmt.default.simple_table"
    for version in range(5):
        shared = delta_sharing.load_as_pandas(url, version=version, use_delta_format=True)
        expected = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / "simple_table"), version=version)
        assert sorted(shared["id"]) == sorted(expected.to_pandas()["id"])
    assert len(delta_sharing.load_as_pandas(url, limit=2, use_delta_format=True)) == 2


def test_delta_lines_on_the_wire(local: Deployment, profile: str) -> None:
    token = json.loads(open(profile).read())["bearerToken"]
    api = httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {token}"})
    base = "/shares/deltafmt/schemas/default/tables/table_with_dv_small"
    response = api.post(f"{base}/query", json={}, headers={"delta-sharing-capabilities": DELTA_HEADER})
    assert response.headers["delta-sharing-capabilities"] == "responseformat=delta"
    protocol, metadata, file = (json.loads(line) for line in response.text.splitlines())
    assert protocol["protocol"]["deltaProtocol"]["readerFeatures"] == ["deletionVectors"]
    meta = metadata["metaData"]
    assert meta["size"] == 635 and meta["numFiles"] == 1 and "version" not in meta
    assert meta["deltaMetadata"]["configuration"]["delta.enableDeletionVectors"] == "true"
    add = file["file"]["deltaSingleAction"]["add"]
    assert len(file["file"]["id"]) == 64 and file["file"]["deletionVectorFileId"]
    dv = add["deletionVector"]
    assert dv["storageType"] == "p" and "X-Amz-Signature=" in dv["pathOrInlineDv"]
    assert httpx.get(dv["pathOrInlineDv"]).content[:1] == b"\x01"
    assert httpx.get(add["path"]).content[:4] == b"PAR1"
    metadata_line = api.get(f"{base}/metadata", headers={"delta-sharing-capabilities": DELTA_HEADER})
    assert metadata_line.text.splitlines() == response.text.splitlines()[:2]
    no_features = api.post(
        f"{base}/query", json={}, headers={"delta-sharing-capabilities": "responseformat=delta"}
    )
    assert no_features.status_code == 400 and no_features.json()["errorCode"] == "UNSUPPORTED_OPERATION"


def test_v2_checkpoint_table_in_delta_format(local: Deployment, profile: str) -> None:
    table = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / "checkpoint-v2-table"))
    expected = pa.concat_tables([pq.read_table(uri.removeprefix("file://")) for uri in table.file_uris()])
    shared = delta_sharing.load_as_pandas(
        f"{profile}#deltafmt.default.checkpoint_v2_table", use_delta_format=True
    )
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected.to_pandas()[list(shared.columns)]))
