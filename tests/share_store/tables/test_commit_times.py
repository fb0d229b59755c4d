"""Commit timestamps against times the test knows, on local storage and S3.

A Delta commit's timestamp is its log file's modification time. Here every
commit gets a distinct time the test chose (local: set on the file, with
milliseconds; S3: the moment it was uploaded, a second apart), and `timestamp`
time travel, `/version?startingTimestamp`, `startingTimestamp` in `/changes`
and `_commit_timestamp` are checked against those times, not against what the
server's own listing says.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from testbed.seaweed import SeaweedS3
from tests.conftest import Deployment, deploy

COMMITS = 3
#: Local commit times: distinct days, each with its own milliseconds.
LOCAL_TIMES_MS = [1_704_067_200_123, 1_704_153_600_456, 1_704_240_000_789]


def write_table(location: Path) -> None:
    """Three commits of one row each (ids 0, 1, 2), with the change data feed on."""
    for version in range(COMMITS):
        write_deltalake(
            str(location),
            pa.table({"id": pa.array([version], pa.int64())}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"} if version == 0 else None,
        )


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def commit_files(location: Path) -> list[Path]:
    return sorted((location / "_delta_log").glob("*.json"))


@pytest.fixture(scope="module")
def local_times(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Deployment, list[int]]]:
    tmp = tmp_path_factory.mktemp("commit-times")
    table = tmp / "buckets" / "timed" / "t"
    write_table(table)
    for path, ms in zip(commit_files(table), LOCAL_TIMES_MS, strict=True):
        os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))
    deployment = deploy(tmp, {"type": "local", "root": str(tmp / "buckets")})
    deployment.share_tables("timed", {"t": "t"}, bucket="timed")
    yield deployment, LOCAL_TIMES_MS
    deployment.server.stop()
    deployment.store.close()


@pytest.fixture(scope="module")
def s3_times(
    tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3
) -> Iterator[tuple[Deployment, list[tuple[int, int]]]]:
    """The table uploaded commit by commit, each commit's upload window (ms) recorded."""
    tmp = tmp_path_factory.mktemp("commit-times-s3")
    table = tmp / "table"
    write_table(table)
    client = seaweed.client()
    client.create_bucket(Bucket="timed")
    for path in sorted(table.glob("*.parquet")):
        client.upload_file(str(path), "timed", f"t/{path.name}")
    windows = []
    for path in commit_files(table):
        time.sleep(1.1)  # S3 times have whole seconds: a second apart keeps the commits apart
        before = int(time.time() * 1000)
        client.upload_file(str(path), "timed", f"t/_delta_log/{path.name}")
        windows.append((before, int(time.time() * 1000)))
    deployment = deploy(tmp, seaweed.storage_config(path_style="true"))
    deployment.share_tables("timed", {"t": "t"}, bucket="timed")
    yield deployment, windows
    deployment.server.stop()
    deployment.store.close()


def answered_version(deployment: Deployment, timestamp: str, starting: bool = False) -> int:
    """The version `/query` time-travels to at `timestamp`; `starting`: `/version`'s first at or after."""
    url = f"{deployment.endpoint}/shares/timed/schemas/default/tables/t"
    headers = {"Authorization": f"Bearer {deployment.token('timed')}"}
    if starting:
        response = httpx.get(f"{url}/version", params={"startingTimestamp": timestamp}, headers=headers)
    else:
        response = httpx.post(f"{url}/query", json={"timestamp": timestamp}, headers=headers)
    assert response.status_code == 200, response.text
    return int(response.headers["delta-table-version"])


def query_version(deployment: Deployment, timestamp: str) -> int:
    return answered_version(deployment, timestamp)


def version_from(deployment: Deployment, timestamp: str) -> int:
    return answered_version(deployment, timestamp, starting=True)


def test_local_commit_times_are_the_files_to_the_millisecond(local_times) -> None:
    deployment, times = local_times
    profile = deployment.profile("timed")
    changes = delta_sharing.load_table_changes_as_pandas(f"{profile}#timed.default.t", starting_version=0)
    stamps = {
        int(row["_commit_version"]): int(row["_commit_timestamp"]) for row in changes.to_dict("records")
    }
    assert stamps == dict(enumerate(times))
    for version, ms in enumerate(times):
        assert query_version(deployment, iso(ms)) == version  # exactly at the commit
        assert query_version(deployment, iso(ms + 1)) == version  # a millisecond later
        assert version_from(deployment, iso(ms)) == version
        if version:
            # A millisecond before a commit is still the version before it.
            assert query_version(deployment, iso(ms - 1)) == version - 1
            assert version_from(deployment, iso(ms - 1)) == version
    later = delta_sharing.load_table_changes_as_pandas(
        f"{profile}#timed.default.t", starting_timestamp=iso(times[1] - 1)
    )
    assert sorted(later["id"].tolist()) == [1, 2]


def test_s3_commit_times_are_the_upload_times(s3_times) -> None:
    deployment, windows = s3_times
    profile = deployment.profile("timed")
    changes = delta_sharing.load_table_changes_as_pandas(f"{profile}#timed.default.t", starting_version=0)
    stamps = {
        int(row["_commit_version"]): int(row["_commit_timestamp"]) for row in changes.to_dict("records")
    }
    assert sorted(stamps) == list(range(COMMITS))
    for version, (before, after) in enumerate(windows):
        # S3 keeps whole seconds: the time is the upload's second, in milliseconds since the epoch.
        assert before // 1000 * 1000 <= stamps[version] <= after, (version, stamps[version], before)
    for version, (_, after) in enumerate(windows):
        assert query_version(deployment, iso(after)) == version
        assert version_from(deployment, iso(stamps[version])) == version
    frame = delta_sharing.load_as_pandas(f"{profile}#timed.default.t", timestamp=iso(windows[1][1]))
    assert sorted(frame["id"].tolist()) == [0, 1]
