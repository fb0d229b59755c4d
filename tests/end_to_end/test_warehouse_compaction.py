"""A table compacted by Spark through the server's own catalog, shared: a compaction is no change.

Spark 3.5 + Iceberg (`tests/warehouse_spark_compaction_job.py`) writes `c_v2` (position deletes)
and `c_v3` (deletion vectors) through `/_iceberg` as a catalog user: four INSERTs, a merge-on-read
DELETE and UPDATE, then Iceberg's `rewrite_position_delete_files` and `rewrite_data_files`, each
a `replace` snapshot, then one more INSERT. Shared as `uniform` tables, the compaction must be what
Delta's OPTIMIZE is: no rows in the change data feed, only `dataChange: false` files (so none at
all) for streaming readers, in both response formats and through the pure-PySpark source, while
every version still reads the rows Spark reads `VERSION AS OF` it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pytest

from share_store.catalog.users import CatalogUsers
from tests.conftest import ADMIN_TOKEN, SPARK_ICEBERG_PYTHON, Deployment
from tests.end_to_end.test_spark_stream import run_available_now
from tests.end_to_end.test_warehouse_engines import frame_rows, row_order, share

JOB = Path(__file__).resolve().parents[1] / "warehouse_spark_compaction_job.py"
WAREHOUSE = "compaction"
TABLES = ("c_v2", "c_v3")
COMPACTION = ("rewrite_deletes", "compact")
DELTA = "responseformat=delta;readerfeatures=deletionvectors,columnmapping"


@pytest.fixture(scope="module")
def spark_history(server: Deployment, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the Spark job wrote and read, per table (see the job's docstring)."""
    assert SPARK_ICEBERG_PYTHON.exists(), "the Spark 3.5 + Iceberg environment is missing: make spark-iceberg"
    root = server.server.url
    made = httpx.post(f"{root}/_iceberg/v1/warehouses", json={"name": WAREHOUSE},
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
    assert made.status_code == 200, made.text
    user = CatalogUsers(server.store.transactions, server.secret).create("compactor")
    work = tmp_path_factory.mktemp("compaction-job")
    (work / "config.json").write_text(json.dumps({
        "uri": f"{root}/_iceberg", "warehouse": WAREHOUSE,
        "credential": f"{user.access_key}:{user.secret_key}",
        "oauth2_server_uri": f"{root}/_iceberg/v1/oauth/tokens",
    }))  # fmt: skip
    done = subprocess.run(
        [str(SPARK_ICEBERG_PYTHON), str(JOB), str(work / "config.json")],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("@@DONE ")]
    return dict(json.loads(line.removeprefix("@@DONE ")))


@pytest.fixture(scope="module")
def urls(server: Deployment, spark_history: dict[str, Any]) -> dict[str, str]:
    return {table: share(server, WAREHOUSE, "db", table) for table in TABLES}


def versions(spark_history: dict[str, Any], table: str) -> dict[str, int]:
    """Each step's share version: shared after Spark wrote it, its first snapshot is version 0."""
    return {s["step"]: n for n, s in enumerate(spark_history[table]["snapshots"])}


def compaction_versions(spark_history: dict[str, Any], table: str) -> list[int]:
    return [v for step, v in versions(spark_history, table).items() if step in COMPACTION]


@pytest.mark.parametrize("table", TABLES)
def test_spark_compacts_with_replace_snapshots(spark_history: dict[str, Any], table: str) -> None:
    snapshots = spark_history[table]["snapshots"]
    compacted = [s for s in snapshots if s["step"] in COMPACTION]
    assert "compact" in [s["step"] for s in compacted], [s["step"] for s in snapshots]
    if table == "c_v2":  # Spark rewrites v2's position delete files; v3's vectors it leaves alone
        assert "rewrite_deletes" in [s["step"] for s in compacted]
    assert {s["operation"] for s in compacted} == {"replace"}
    by_step = {s["step"]: s for s in snapshots}
    # The compaction changed no row.
    assert by_step["compact"]["rows"] == by_step["update"]["rows"]


@pytest.mark.parametrize("table", TABLES)
def test_every_version_reads_as_spark_reads_it_across_the_compaction(
    spark_history: dict[str, Any], urls: dict[str, str], table: str
) -> None:
    snapshots = spark_history[table]["snapshots"]
    assert delta_sharing.get_table_version(urls[table]) == len(snapshots) - 1
    for version, snapshot in enumerate(snapshots):
        frame = delta_sharing.load_as_pandas(urls[table], version=version, use_delta_format=True)
        assert frame_rows(frame, snapshot["columns"]) == snapshot["rows"], snapshot["step"]
    # After the compaction no file has deletes: the parquet format reads it too.
    latest = delta_sharing.load_as_pandas(urls[table])
    assert frame_rows(latest, snapshots[-1]["columns"]) == snapshots[-1]["rows"]


def change_rows(frame: pd.DataFrame) -> list[list[Any]]:
    columns = ["id", "part", "v", "_change_type", "_commit_version"]
    return frame_rows(frame, columns) if len(frame) else []


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("delta_format", [True, False], ids=["delta", "parquet"])
def test_the_change_data_feed_has_no_rows_for_a_compaction(
    spark_history: dict[str, Any], urls: dict[str, str], table: str, delta_format: bool
) -> None:
    steps = versions(spark_history, table)
    compacted = compaction_versions(spark_history, table)
    changes = delta_sharing.load_table_changes_as_pandas(
        urls[table], starting_version=min(compacted), ending_version=steps["insert_after"],
        use_delta_format=delta_format,
    )  # fmt: skip
    # Only the INSERT after the compaction: nothing deleted and inserted again by the rewrite.
    after = steps["insert_after"]
    expected = [[1000, "1", "after", "insert", after], [1001, "2", "after", "insert", after]]
    assert change_rows(changes) == expected
    # Spark's own changelog across the compaction is empty too.
    assert spark_history[table]["changelog_compaction"] == {"rows": []}


@pytest.mark.parametrize("table", TABLES)
def test_the_change_data_feed_of_the_inserts_is_sparks_changelog(
    spark_history: dict[str, Any], urls: dict[str, str], table: str
) -> None:
    steps = versions(spark_history, table)
    changes = delta_sharing.load_table_changes_as_pandas(
        urls[table], starting_version=0, ending_version=steps["insert_3"]
    )
    ours = [row[:4] for row in change_rows(changes)]
    # Spark names change types as Iceberg does (INSERT), Delta in lower case (insert).
    sparks = [[*row[:3], row[3].lower()] for row in spark_history[table]["changelog_inserts"]["rows"]]
    assert ours == sorted(sparks, key=row_order)
    assert len(ours) == 200


def file_lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines()]
    return [line for line in lines if "add" in line or "remove" in line or "cdf" in line or "file" in line]


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("capabilities", [DELTA, "responseformat=parquet"], ids=["delta", "parquet"])
def test_streaming_reads_and_changes_of_a_compaction_hold_no_file(
    server: Deployment, spark_history: dict[str, Any], urls: dict[str, str], table: str, capabilities: str
) -> None:
    """What a streaming reader asks (`startingVersion`) and `/changes`, for the compaction alone."""
    compacted = compaction_versions(spark_history, table)
    share_name = f"{WAREHOUSE}_{table}"
    headers = {
        "Authorization": f"Bearer {server.token(share_name)}",
        "delta-sharing-capabilities": capabilities,
    }
    base = f"{server.endpoint}/shares/{share_name}/schemas/db/tables/{table}"
    # The parquet format cannot start at a snapshot that still has deletes (v2's rewritten
    # delete files): it reads the compaction's last snapshot, which has none.
    first = min(compacted) if capabilities == DELTA else max(compacted)
    span = {"startingVersion": first, "endingVersion": max(compacted)}
    assert file_lines(httpx.post(f"{base}/query", json=span, headers=headers, timeout=60)) == []
    assert file_lines(httpx.get(f"{base}/changes", params=span, headers=headers, timeout=60)) == []


@pytest.mark.parametrize("table", TABLES)
def test_the_pyspark_source_streams_past_a_compaction(
    spark: Any, spark_history: dict[str, Any], urls: dict[str, str], table: str, tmp_path: Path
) -> None:
    """A stream from the compaction neither fails on its removes nor reads its rows again."""
    start = str(min(compaction_versions(spark_history, table)))
    streamed = run_available_now(
        spark, urls[table], tmp_path / "checkpoint", tmp_path / "out", startingVersion=start
    )
    assert sorted(int(row["id"]) for row in streamed) == [1000, 1001]
    changes = run_available_now(
        spark, urls[table], tmp_path / "cdf-checkpoint", tmp_path / "cdf-out",
        startingVersion=start, readChangeFeed="true",
    )  # fmt: skip
    assert sorted((int(row["id"]), row["_change_type"]) for row in changes) == [
        (1000, "insert"), (1001, "insert")
    ]  # fmt: skip
