"""The real `delta-sharing` Python client reads Spark-written tables from local storage."""

from __future__ import annotations

import json

import delta_sharing
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.conftest import TESTDATA_BUCKET, Deployment

# Tables whose data files are all present and that deltalake itself can read:
# the reference rows come from deltalake.
READABLE = [
    "cdc_ict_table",
    "cdf-table",
    "cdf-table-non-partitioned",
    "delta-0.8.0-date",
    "delta-0.8.0-null-partition",
    "delta-0.8.0-numeric-partition",
    "delta-0.8.0-partitioned",
    "delta-0.8.0-special-partition",
    "delta-1.2.1-only-struct-stats",
    "delta-2.2.0-partitioned-types",
    "delta-stats-optional",
    "partition-type-primitives",
    "simple_table",
    "simple_table_with_cdc",
    "simple_table_with_checkpoint",
    "table-without-dv-small",
    "table_with_null_stats_in_notnull_struct",
]
MISSING_FILES = [
    "checkpoints",
    "checkpoints_vacuumed",
    "latest_not_checkpointed",
    "with_checkpoint_no_last_checkpoint",
]
NEEDS_DELTA_FORMAT = [
    "table-with-dv-small",
    "table_with_column_mapping",
    "table_with_deletion_logs",
    "spark-variant-stable-feature-checkpoint",
]
# deltalake cannot read this one's rows (v2 checkpoints), but lists its files.
V2_CHECKPOINT = "checkpoint-v2-table"


def table_name(path: str) -> str:
    return path.replace("-", "_").replace(".", "_").lower()


@pytest.fixture(scope="module")
def profile(local: Deployment) -> str:
    tables = {table_name(p): p for p in READABLE + MISSING_FILES + NEEDS_DELTA_FORMAT + [V2_CHECKPOINT]}
    local.share_tables("testdata", tables)
    return local.profile("testdata")


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:
        # deltalake returns Delta `timestamp` as UTC-aware, the client's parquet
        # path as naive UTC: compare the instants.
        if isinstance(frame[column].dtype, pd.DatetimeTZDtype):
            frame[column] = frame[column].dt.tz_convert(None)
        if frame[column].dtype == object:
            frame[column] = frame[column].map(
                lambda v: json.dumps(v, default=str) if isinstance(v, dict | list) else v
            )
    frame = frame.astype({c: "string" for c in frame.columns}) if len(frame.columns) else frame
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def direct(local: Deployment, path: str, version: int | None = None) -> pd.DataFrame:
    table = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / path), version=version)
    return table.to_pandas()


@pytest.mark.parametrize("path", READABLE)
def test_load_as_pandas_matches_deltalake(local: Deployment, profile: str, path: str) -> None:
    shared = delta_sharing.load_as_pandas(f"{profile}#testdata.default.{table_name(path)}")
    expected = direct(local, path)
    assert list(shared.columns) == list(expected.columns)
    assert len(shared) == len(expected)
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected))


def test_list_all_tables(profile: str) -> None:
    client = delta_sharing.SharingClient(profile)
    names = {t.name for t in client.list_all_tables()}
    assert names == {table_name(p) for p in READABLE + MISSING_FILES + NEEDS_DELTA_FORMAT + [V2_CHECKPOINT]}
    assert [s.name for s in client.list_shares()] == ["testdata"]
    assert [s.name for s in client.list_schemas(client.list_shares()[0])] == ["default"]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_time_travel_by_version(local: Deployment, profile: str, version: int) -> None:
    shared = delta_sharing.load_as_pandas(f"{profile}#testdata.default.simple_table", version=version)
    pd.testing.assert_frame_equal(canonical(shared), canonical(direct(local, "simple_table", version)))


def test_time_travel_by_timestamp(local: Deployment, profile: str) -> None:
    from share_store.tables.commit_times import format_ms

    # Commit times come from the copied log files' modification times.
    reader = local.server.app.state.services.readers.reader(
        local.store.get_table("testdata", "default", "simple_table")
    )
    commits = reader.commits(reader.listing())
    assert [c.version for c in commits] == [0, 1, 2, 3, 4]
    for commit in commits:
        shared = delta_sharing.load_as_pandas(
            f"{profile}#testdata.default.simple_table", timestamp=format_ms(commit.timestamp)
        )
        expected = direct(local, "simple_table", commit.version)
        pd.testing.assert_frame_equal(canonical(shared), canonical(expected))


def test_limit(profile: str) -> None:
    url = f"{profile}#testdata.default.simple_table_with_checkpoint"
    assert len(delta_sharing.load_as_pandas(url, limit=3)) == 3
    assert len(delta_sharing.load_as_pandas(url, limit=0)) == 0


def test_json_predicate_hints_prune_partitions(local: Deployment, profile: str) -> None:
    hint = json.dumps(
        {
            "op": "equal",
            "children": [
                {"op": "column", "name": "year", "valueType": "string"},
                {"op": "literal", "value": "2020", "valueType": "string"},
            ],
        }
    )
    url = f"{profile}#testdata.default.delta_0_8_0_partitioned"
    shared = delta_sharing.load_as_pandas(url, jsonPredicateHints=hint)
    expected = direct(local, "delta-0.8.0-partitioned")
    assert set(shared["year"]) == {"2020"}
    assert len(shared) == int((expected["year"] == "2020").sum())


@pytest.mark.parametrize("path", MISSING_FILES)
def test_missing_files_are_reported(profile: str, path: str) -> None:
    with pytest.raises(Exception, match="table files missing"):
        delta_sharing.load_as_pandas(f"{profile}#testdata.default.{table_name(path)}")


@pytest.mark.parametrize("path", NEEDS_DELTA_FORMAT)
def test_tables_needing_delta_format_are_refused_in_parquet(profile: str, path: str) -> None:
    with pytest.raises(Exception, match="UNSUPPORTED_OPERATION"):
        delta_sharing.load_as_pandas(f"{profile}#testdata.default.{table_name(path)}", use_delta_format=False)


def test_v2_checkpoint_table_in_parquet_format(local: Deployment, profile: str) -> None:
    """v2 checkpoints only change the log's layout, which recipients never see."""
    import pyarrow.parquet as pq

    table = DeltaTable(str(local.storage.root / TESTDATA_BUCKET / V2_CHECKPOINT))
    expected = pa.concat_tables([pq.read_table(uri.removeprefix("file://")) for uri in table.file_uris()])
    shared = delta_sharing.load_as_pandas(f"{profile}#testdata.default.{table_name(V2_CHECKPOINT)}")
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected.to_pandas()))
