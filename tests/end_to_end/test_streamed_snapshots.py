"""Tables whose checkpoints are streamed (as for million-file tables) read the same, end to end.

The threshold is lowered so the small test tables stream; the real client
reads them in both response formats, on local storage and on SeaweedFS, and
paging through `maxFiles` still covers every file once.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import delta_sharing
import httpx
import pandas as pd
import pytest
from deltalake import DeltaTable

from share_store.delta import replay
from share_store.delta.replay import LogReader
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from testbed.seaweed import SeaweedS3, upload_tree
from tests.conftest import TESTDATA_BUCKET, Deployment, deploy
from tests.dv import read_with_deletion_vectors
from tests.end_to_end.test_client_local import canonical, table_name

CHECKPOINTED = ["simple_table_with_checkpoint", "delta-1.2.1-only-struct-stats", "table_with_deletion_logs"]


@pytest.fixture(scope="module")
def streaming() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "STREAM_THRESHOLD_BYTES", -1)
        yield


@pytest.fixture(scope="module")
def local_streamed(
    streaming: None, tmp_path_factory: pytest.TempPathFactory, testdata: Path
) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("streamed")
    for table in CHECKPOINTED:
        shutil.copytree(testdata / table, tmp / "buckets" / TESTDATA_BUCKET / table)
    deployment = deploy(tmp, {"type": "local", "root": str(tmp / "buckets")})
    deployment.share_tables("streamed", {table_name(t): t for t in CHECKPOINTED})
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def direct(path: Path) -> pd.DataFrame:
    if path.name == "table_with_deletion_logs":  # deltalake cannot apply deletion vectors
        storage = LocalStorage(path.parent.parent, UrlSigner(b"k" * 32, "http://unused"))
        reader = LogReader(storage, path.parent.name, path.name)
        listing = reader.listing()
        adds = list(reader.replay(listing, listing.latest_version).files())
        return canonical(read_with_deletion_vectors(path, adds).to_pandas())
    return canonical(DeltaTable(str(path)).to_pandas())


def file_id(line: str) -> str:
    return json.loads(line)["file"]["id"]


@pytest.mark.parametrize("table", CHECKPOINTED)
def test_client_reads_streamed_snapshots(local_streamed: Deployment, testdata: Path, table: str) -> None:
    url = f"{local_streamed.profile('streamed')}#streamed.default.{table_name(table)}"
    expected = direct(testdata / table)
    assert canonical(delta_sharing.load_as_pandas(url, use_delta_format=True)).equals(expected)
    if table != "table_with_deletion_logs":  # no deletion vectors: the parquet format too
        assert canonical(delta_sharing.load_as_pandas(url)).equals(expected)


def test_paging_a_streamed_snapshot(local_streamed: Deployment) -> None:
    token = local_streamed.token("streamed")
    table = "/shares/streamed/schemas/default/tables/delta_1_2_1_only_struct_stats"
    url = f"{local_streamed.endpoint}{table}/query"
    headers = {"Authorization": f"Bearer {token}"}
    files = [line for line in httpx.post(url, json={}, headers=headers).text.splitlines() if '"file"' in line]
    paged: list[str] = []
    body: dict = {"maxFiles": 2}
    while True:
        lines = httpx.post(url, json=body, headers=headers).text.splitlines()
        paged += [line for line in lines if line.startswith('{"file"')]
        end = json.loads(lines[-1]).get("endStreamAction", {})
        if "nextPageToken" not in end:
            break
        body = {"maxFiles": 2, "pageToken": end["nextPageToken"]}
    assert len(files) > 2
    assert sorted(map(file_id, paged)) == sorted(map(file_id, files))


def test_streamed_snapshot_on_s3(streaming: None, s3: Deployment, seaweed: SeaweedS3, testdata: Path) -> None:
    upload_tree(seaweed.client(), testdata / "simple_table_with_checkpoint", TESTDATA_BUCKET, "streamed/t")
    s3.share_tables("s3streamed", {"t": "streamed/t"})
    frame = delta_sharing.load_as_pandas(f"{s3.profile('s3streamed')}#s3streamed.default.t")
    assert canonical(frame).equals(direct(testdata / "simple_table_with_checkpoint"))
