"""Change data feed through the real client, both formats, against deltalake's `load_cdf`."""

from __future__ import annotations

import json
import shutil

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.conftest import TESTDATA_BUCKET, Deployment
from tests.end_to_end.test_client_local import canonical, table_name

SPARK_CDF_TABLES = ["cdf-table", "cdf-table-non-partitioned", "cdc_ict_table"]
CHANGE_COLUMNS = ["_change_type", "_commit_version"]


def write_cdf_table(root) -> None:
    """Appends, an update, a delete and a merge, with change data feed on (deltalake writes cdc files)."""
    uri = str(root)
    base = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "part": ["a", "a", "b", "b"],
            "value": [10.0, 20.0, 30.0, 40.0],
        }
    )
    write_deltalake(uri, base, partition_by=["part"], configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(
        uri, pa.table({"id": pa.array([5], pa.int64()), "part": ["c"], "value": [50.0]}), mode="append"
    )
    table = DeltaTable(uri)
    table.update(predicate="id = 2", updates={"value": "21.0"})
    table.delete(predicate="id = 3")
    source = pa.table({"id": pa.array([4, 6], pa.int64()), "part": ["b", "c"], "value": [41.0, 60.0]})
    (
        DeltaTable(uri)
        .merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )


@pytest.fixture(scope="module")
def profile(local: Deployment) -> str:
    write_cdf_table(local.storage.root / TESTDATA_BUCKET / "written_cdf")
    tables = {table_name(p): p for p in SPARK_CDF_TABLES} | {
        "written_cdf": "written_cdf",
        "no_cdf": "simple_table",
    }
    local.share_tables("cdf", tables)
    local.share_tables("cdf_nohistory", {"t": "cdf-table"}, history=False)
    return local.profile("cdf")


def expected_changes(local: Deployment, path: str, start: int, end: int | None) -> pd.DataFrame:
    table = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / path))
    reader = table.load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader).to_pandas().drop(columns=["_commit_timestamp"])


def compare(shared: pd.DataFrame, expected: pd.DataFrame) -> None:
    shared = shared.drop(columns=["_commit_timestamp"])
    assert sorted(shared.columns) == sorted(expected.columns)
    pd.testing.assert_frame_equal(
        canonical(shared[sorted(shared.columns)]), canonical(expected[sorted(expected.columns)])
    )


@pytest.mark.parametrize("use_delta_format", [False, True])
@pytest.mark.parametrize("path", [*SPARK_CDF_TABLES, "written_cdf"])
def test_changes_match_deltalake(local: Deployment, profile: str, path: str, use_delta_format: bool) -> None:
    url = f"{profile}#cdf.default.{table_name(path)}"
    latest = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / path)).version()
    for start, end in [(0, None), (1, latest), (latest, latest)]:
        shared = delta_sharing.load_table_changes_as_pandas(
            url, starting_version=start, ending_version=end, use_delta_format=use_delta_format
        )
        compare(shared, expected_changes(local, path, start, end))


def test_written_table_has_all_change_kinds(local: Deployment, profile: str) -> None:
    shared = delta_sharing.load_table_changes_as_pandas(
        f"{profile}#cdf.default.written_cdf", starting_version=0
    )
    assert set(shared["_change_type"]) == {"insert", "update_preimage", "update_postimage", "delete"}


def test_changes_by_timestamp(local: Deployment, profile: str) -> None:
    from share_store.tables.commit_times import format_ms

    table = local.store.get_table("cdf", "default", "cdf_table")
    reader = local.server.app.state.services.readers.reader(table)
    commits = reader.commits(reader.listing())
    shared = delta_sharing.load_table_changes_as_pandas(
        f"{profile}#cdf.default.cdf_table",
        starting_timestamp=format_ms(commits[1].timestamp),
        ending_timestamp=format_ms(commits[2].timestamp),
    )
    assert set(shared["_commit_version"]) == {1, 2}
    stamps = shared.groupby("_commit_version")["_commit_timestamp"].first()
    assert list(stamps.astype("int64") // 10**6 if stamps.dtype.kind == "M" else stamps) == [
        commits[1].timestamp,
        commits[2].timestamp,
    ]


def test_in_commit_timestamps_are_used(local: Deployment, profile: str) -> None:
    shared = delta_sharing.load_table_changes_as_pandas(
        f"{profile}#cdf.default.cdc_ict_table", starting_version=0
    )
    log = local.storage.root / TESTDATA_BUCKET / "cdc_ict_table" / "_delta_log"
    ict = {}
    for version in range(4):
        first = json.loads((log / f"{version:020d}.json").read_text().splitlines()[0])
        ict[version] = first["commitInfo"].get("inCommitTimestamp")
    stamps = shared.groupby("_commit_version")["_commit_timestamp"].first()
    for version, value in stamps.items():
        millis = int(pd.Timestamp(value).value // 10**6) if not isinstance(value, int) else value
        assert millis == ict[version]


def api(local: Deployment, share: str) -> httpx.Client:
    return httpx.Client(base_url=local.endpoint, headers={"Authorization": f"Bearer {local.token(share)}"})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "No startingVersion or startingTimestamp provided for CDF read."),
        ({"startingVersion": 0, "startingTimestamp": "2020-01-01T00:00:00Z"}, "Multiple starting arguments"),
        (
            {"startingVersion": 0, "endingVersion": 1, "endingTimestamp": "2020-01-01T00:00:00Z"},
            "Multiple ending arguments",
        ),
        ({"startingVersion": "x"}, "startingVersion is not a valid number."),
        ({"startingVersion": 0, "endingVersion": "y"}, "endingVersion is not a valid number."),
        ({"startingTimestamp": "nope"}, "Invalid startingTimestamp: nope"),
        (
            {"startingVersion": 9},
            "Provided Start version(9) for reading change data is invalid. Start version "
            "cannot be greater than the latest version of the table(3).",
        ),
        (
            {"startingVersion": 2, "endingVersion": 1},
            "CDF range from start 2 to end 1 was invalid. End cannot be before start.",
        ),
        ({"startingVersion": 0, "maxFiles": 0}, "maxFiles must be positive."),
        ({"startingVersion": 0, "maxFiles": "z"}, "expected a number"),
        ({"startingTimestamp": "2999-01-01T00:00:00Z"}, "is after the latest available version"),
        ({"startingVersion": 0, "endingTimestamp": "2000-01-01T00:00:00Z"}, "Please use a timestamp greater"),
        (
            {"startingVersion": 0, "includeHistoricalMetadata": "maybe"},
            "includeHistoricalMetadata must be true or false",
        ),
    ],
)
def test_changes_validation(local: Deployment, profile: str, params: dict, message: str) -> None:
    response = api(local, "cdf").get("/shares/cdf/schemas/default/tables/cdf_table/changes", params=params)
    assert response.status_code == 400, response.text
    assert response.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert message in response.json()["message"]


def test_changes_need_history_and_cdf(local: Deployment, profile: str) -> None:
    response = api(local, "cdf_nohistory").get(
        "/shares/cdf_nohistory/schemas/default/tables/t/changes", params={"startingVersion": 0}
    )
    assert (
        response.status_code == 400 and "cdf is not enabled on table cdf_nohistory.default.t" in response.text
    )
    response = api(local, "cdf").get(
        "/shares/cdf/schemas/default/tables/no_cdf/changes", params={"startingVersion": 0}
    )
    assert response.status_code == 400
    assert "as change data was not recorded for version [0" in response.json()["message"]


def test_changes_lines_and_paging(local: Deployment, profile: str) -> None:
    client = api(local, "cdf")
    path = "/shares/cdf/schemas/default/tables/cdf_table/changes"
    full = client.get(path, params={"startingVersion": 0, "includeHistoricalMetadata": "True"})
    assert full.headers["delta-table-version"] == "0"
    lines = [json.loads(line) for line in full.text.splitlines()]
    assert lines[1]["metaData"]["version"] == 0
    assert lines[1]["metaData"]["configuration"] == {"enableChangeDataFeed": "true"}
    kinds = {next(iter(line)) for line in lines[2:]}
    assert kinds <= {"add", "cdf", "remove", "metaData"} and "cdf" in kinds
    for line in lines[2:]:
        body = next(iter(line.values()))
        if "url" in body:
            assert {"version", "timestamp", "expirationTimestamp", "id", "size"} <= set(body)
    files = [line for line in lines[2:] if "metaData" not in line]
    paged, token = [], None
    while True:
        params = {"startingVersion": 0, "includeHistoricalMetadata": "true", "maxFiles": 4}
        response = client.get(path, params=params | ({"pageToken": token} if token else {}))
        page = [json.loads(line) for line in response.text.splitlines()]
        assert page[:2] == lines[:2]
        paged += [line for line in page[2:-1] if "metaData" not in line]
        token = page[-1]["endStreamAction"].get("nextPageToken")
        if not token:
            break

    def strip(line):
        return {k: v for k, v in next(iter(line.values())).items() if k not in ("url", "expirationTimestamp")}

    assert [strip(line) for line in paged] == [strip(line) for line in files]


def test_vacuumed_change_files(local: Deployment, profile: str, tmp_path) -> None:
    source = local.storage.root / TESTDATA_BUCKET / "cdf-table"
    target = local.storage.root / TESTDATA_BUCKET / "cdf-vacuumed"
    shutil.copytree(source, target)
    shutil.rmtree(target / "_change_data")
    local.store.create_share("vacuumed", [])
    from share_store.model import TableSpec

    local.store.update_share(
        "vacuumed", add=[TableSpec.parse(f"default:t:delta:{TESTDATA_BUCKET}:cdf-vacuumed")]
    )
    response = api(local, "vacuumed").get(
        "/shares/vacuumed/schemas/default/tables/t/changes", params={"startingVersion": 0}
    )
    assert response.status_code == 400
    removed = sum(1 for path in (source / "_change_data").rglob("*.parquet"))
    assert response.json() == {
        "errorCode": "RESOURCE_DOES_NOT_EXIST",
        "message": f"table files missing: {removed} files are no longer in storage (vacuumed or lost)",
    }
