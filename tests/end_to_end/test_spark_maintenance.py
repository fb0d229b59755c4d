"""A big table's maintenance by Spark through the server's catalog: `sharing-server table maintenance spark`.

A provider's streaming writer made `kept.db.events` of many small pyiceberg appends, and
`kept.db.sorted` too (with a sort order, its rows appended out of order); `kept.other.kept` is
another namespace's table. The CLI's `spark_maintenance.run` submits the job with the Spark 3.5 +
Iceberg environment of `make spark-iceberg` (its `spark-submit`, the Iceberg runtime jar from
PyPI) on the whole `db` namespace, as a catalog user, once for the module: Iceberg's
`rewrite_data_files`, `expire_snapshots` and `remove_orphan_files` with each table's maintenance
configuration as the API serves it. Then: each table is one data file (`sorted` sorted by its
sort order), snapshots expired as configured, a planted orphan gone while every live file stays,
the other namespace's files untouched, and the recipient reads the same rows, with no change
rows for the compaction.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import delta_sharing
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.transforms import IdentityTransform

import sharing_server
from share_store.catalog.purge import reachable_files
from share_store.catalog.users import CatalogUsers
from sharing_server.admin.catalog import spark_maintenance
from testbed.spark_iceberg.session import HTTPCLIENT5_JAR, JACKSON_JAR, RUNTIME_JAR
from tests.conftest import ADMIN_TOKEN, CACHE, SPARK_ICEBERG_PYTHON, Deployment
from tests.end_to_end.test_warehouse_engines import share
from tests.end_to_end.test_warehouse_maintenance import shared_files

WAREHOUSE = "kept"
APPENDS = 12
#: The settings `db.events` is given through the API: three snapshots kept.
KEEP = 3
SPARK_ENV = CACHE / "spark-iceberg"
SPARK_SUBMIT = SPARK_ENV / "venv" / "bin" / "spark-submit"
#: Spark on loopback, two cores (the CI's), no UI.
LOCAL_SPARK = (
    "spark.master=local[2]", "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
    "spark.ui.enabled=false",
)  # fmt: skip
OLD = time.time() - 30 * 86_400  # older than the defaults' 3 + 10 days of unreferenced-file removal
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])


def iceberg_jars() -> str:
    """The Iceberg runtime jar from PyPI and what `make spark-iceberg` relocates beside it."""
    runtime = sorted(
        SPARK_ENV.glob(f"venv/lib/python*/site-packages/snowpark_connect_deps_iceberg/jars/{RUNTIME_JAR}")
    )
    assert runtime, "the Spark 3.5 + Iceberg environment is missing: make spark-iceberg"
    return ",".join(str(jar) for jar in (runtime[-1], SPARK_ENV / JACKSON_JAR, SPARK_ENV / HTTPCLIENT5_JAR))


def cli(*options: str, namespace: str = "db", table: str | None = None) -> argparse.Namespace:
    """The options as the CLI parses them; the words as `table_grammar` sets them."""
    parser = argparse.ArgumentParser()
    spark_maintenance.add_arguments(parser)
    args = parser.parse_args(options)
    args.warehouse, args.namespace, args.table = WAREHOUSE, namespace, table
    return args


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def local(uri: str) -> Path:
    return Path(urlsplit(uri).path)


def files_under(folder: Path) -> dict[Path, float]:
    return {path: path.stat().st_mtime for path in folder.rglob("*") if path.is_file()}


def frame_rows(frame: Any) -> list[tuple[int, str]]:
    return sorted(zip((int(i) for i in frame["id"]), frame["v"], strict=True))


@contextmanager
def stdout_to(path: Path) -> Iterator[None]:
    """The process's stdout (file descriptor 1, which the job inherits) into `path` meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    with path.open("w") as file:
        os.dup2(file.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)


@pytest.fixture(scope="module")
def catalog(server: Deployment) -> Catalog:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    made = httpx.post(
        f"{server.server.url}/_iceberg/v1/warehouses", json={"name": WAREHOUSE}, headers=headers
    )
    assert made.status_code == 200, made.text
    return load_catalog(f"s-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip


@pytest.fixture(scope="module")
def before(server: Deployment, catalog: Catalog) -> dict[str, Any]:
    """The tables as the writers left them, configured, shared and read; orphans planted."""
    catalog.create_namespace("db")
    catalog.create_namespace("other")
    # Snapshots younger than an hour (the shortest `maxSnapshotAgeHours`) expire by the table's
    # own `history.expire.max-snapshot-age-ms`, which wins over the setting, as in the server.
    events = catalog.create_table("db.events", schema=SCHEMA, properties={
        "history.expire.max-snapshot-age-ms": "1000"})  # fmt: skip
    for n in range(APPENDS):
        events.append(rows(list(range(n * 10, n * 10 + 10))))
    ordered = catalog.create_table("db.sorted", schema=SCHEMA)
    with ordered.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    for n in range(4):  # each append's ids out of order, and the appends' ranges interleaved
        ordered.append(rows([(i * 37 + n) % 100 + 100 * n for i in range(25)]))
    other = catalog.create_table("other.kept", schema=SCHEMA)
    for n in range(2):
        other.append(rows([n]))

    api = httpx.Client(base_url=f"{server.server.url}/_iceberg/v1/{WAREHOUSE}/namespaces",
                       headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
    management = {"status": "enabled", "settings": {"icebergSnapshotManagement": {
        "minSnapshotsToKeep": KEEP, "maxSnapshotAgeHours": 1}}}  # fmt: skip
    put = api.put("/db/tables/events/maintenance/icebergSnapshotManagement", json={"value": management})
    assert put.status_code == 204, put.text
    compaction = {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 64}}}
    put = api.put("/db/tables/sorted/maintenance/icebergCompaction", json={"value": compaction})
    assert put.status_code == 204, put.text

    urls = {name: share(server, WAREHOUSE, "db", name) for name in ("events", "sorted")}
    folders = {name: local(catalog.load_table(name).location()) for name in ("db.events", "other.kept")}
    orphans = {name: folder / "data" / f"planted-{name}.parquet" for name, folder in folders.items()}
    for orphan in orphans.values():
        orphan.write_bytes(b"written by a writer that crashed before its commit")
    # Every file of both tables old enough to go: only being reachable keeps one.
    for folder in folders.values():
        for path in files_under(folder):
            os.utime(path, (OLD, OLD))
    return {
        "urls": urls,
        "rows": {name: frame_rows(delta_sharing.load_as_pandas(url)) for name, url in urls.items()},
        "versions": {name: delta_sharing.get_table_version(url) for name, url in urls.items()},
        "files": {name: shared_files(server, url) for name, url in urls.items()},
        "snapshots": {
            name: catalog.load_table(name).metadata.snapshots for name in ("db.events", "db.sorted")
        },
        "folders": folders,
        "orphans": orphans,
        "other_files": files_under(folders["other.kept"]),
        "other_rows": frame_rows(catalog.load_table("other.kept").scan().to_arrow().to_pandas()),
    }


@pytest.fixture(scope="module")
def output(server: Deployment, before: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    """What the job printed, run once on the namespace `db` through the CLI's `run`."""
    assert SPARK_ICEBERG_PYTHON.exists(), "the Spark 3.5 + Iceberg environment is missing: make spark-iceberg"
    user = CatalogUsers(server.store.transactions, server.secret).create("spark-maintainer")
    args = cli(
        "--server", server.server.url, "--credential", f"{user.access_key}:{user.secret_key}",
        "--spark-submit", str(SPARK_SUBMIT), "--python", str(SPARK_ICEBERG_PYTHON), "--jars", iceberg_jars(),
        *(word for setting in LOCAL_SPARK for word in ("--conf", setting)),
    )  # fmt: skip
    printed = tmp_path_factory.mktemp("spark-maintenance-job") / "stdout"
    with stdout_to(printed):
        spark_maintenance.run(args)
    return printed.read_text()


def test_the_job_says_what_each_procedure_did(output: str, before: dict[str, Any]) -> None:
    lines = output.splitlines()
    said = {tuple(line.split(" ", 2)[:2]) for line in lines if line.startswith("db.")}
    procedures = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files")
    assert said == {(table, p) for table in ("db.events", "db.sorted") for p in procedures}, output
    assert not [line for line in lines if "FAILED" in line], output
    compacted = f"rewritten_data_files_count={APPENDS}, added_data_files_count=1"
    assert f"db.events rewrite_data_files (binpack, targetFileSizeMB 512): {compacted}" in output
    assert any(
        line.startswith("db.sorted rewrite_data_files (sort, targetFileSizeMB 64): ") for line in lines
    )
    expired = [line for line in lines if line.startswith("db.events expire_snapshots")]
    assert len(expired) == 1 and "history.expire.max-snapshot-age-ms" in expired[0], output
    assert f"retain last {KEEP} (minSnapshotsToKeep)" in expired[0]
    assert f"deleted_manifest_lists_count={APPENDS + 1 - KEEP}" in expired[0]
    assert "db.events remove_orphan_files (older than " in output
    assert f"  removed file:{before['orphans']['db.events']}" in lines, output
    assert lines[-1] == "done: 2 table(s), 0 with a failure"


def test_the_data_files_go_down_to_one(
    server: Deployment, catalog: Catalog, before: dict[str, Any], output: str
) -> None:
    assert before["files"] == {"events": APPENDS, "sorted": 4}
    for name in ("events", "sorted"):
        assert shared_files(server, before["urls"][name]) == 1
        assert len(list(catalog.load_table(f"db.{name}").scan().plan_files())) == 1
    # Spark's sort strategy: the one file is in the sort order, though no append was.
    (task,) = catalog.load_table("db.sorted").scan().plan_files()
    ids = pq.read_table(local(task.file.file_path)).column("id").to_pylist()
    assert ids == sorted(ids) and len(ids) == 100


def test_old_snapshots_expire_as_configured(catalog: Catalog, before: dict[str, Any], output: str) -> None:
    events = catalog.load_table("db.events").metadata
    old = before["snapshots"]["db.events"]
    kept = [old[-2].snapshot_id, old[-1].snapshot_id, events.current_snapshot_id]
    assert sorted(s.snapshot_id for s in events.snapshots) == sorted(kept)
    assert events.snapshot_by_id(events.current_snapshot_id).summary.operation.value == "replace"
    for snapshot in old[:-2]:  # what only the expired snapshots reached is deleted
        assert not local(snapshot.manifest_list).exists()
    # `db.sorted` has the defaults (120 hours, 1 kept): its young snapshots all stay.
    ordered = catalog.load_table("db.sorted").metadata
    assert len(ordered.snapshots) == len(before["snapshots"]["db.sorted"]) + 1


def test_a_planted_orphan_goes_and_every_live_file_stays(
    catalog: Catalog, before: dict[str, Any], output: str
) -> None:
    table = catalog.load_table("db.events")
    live = {local(path) for path in reachable_files(table.metadata_location, table.metadata, table.io)}
    present = set(files_under(before["folders"]["db.events"]))
    assert not before["orphans"]["db.events"].exists()
    assert live <= present, sorted(live - present)
    # Nothing unreachable is left either: every file there was old enough to go.
    assert {path for path in present - live if not path.name.startswith(".")} == set()


def test_another_tables_files_are_untouched(catalog: Catalog, before: dict[str, Any], output: str) -> None:
    assert before["orphans"]["other.kept"].exists()
    assert files_under(before["folders"]["other.kept"]) == before["other_files"]
    assert frame_rows(catalog.load_table("other.kept").scan().to_arrow().to_pandas()) == before["other_rows"]


@pytest.mark.parametrize("name", ["events", "sorted"])
def test_the_recipient_reads_the_same_rows_and_no_change(
    before: dict[str, Any], output: str, name: str
) -> None:
    url = before["urls"][name]
    assert frame_rows(delta_sharing.load_as_pandas(url)) == before["rows"][name]
    # One version more, the compaction's: it is no change, so the feed across it has no row.
    latest = delta_sharing.get_table_version(url)
    assert latest == before["versions"][name] + 1
    changes = delta_sharing.load_table_changes_as_pandas(url, starting_version=latest, ending_version=latest)
    assert len(changes) == 0


def test_a_dry_run_prints_the_spark_submit_command_without_the_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = cli(
        "--server", "https://sharing.example.com/", "--token", "dsa_not-to-be-shown",
        "--spark-submit", "/opt/spark/bin/spark-submit", "--python", "/opt/venv/bin/python",
        "--packages", "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",
        "--conf", "spark.executor.memory=8g", "--procedures", "expire_snapshots,remove_orphan_files",
        "--dry-run",
        table="events",
    )  # fmt: skip
    spark_maintenance.run(args)
    job = Path(sharing_server.__file__).parent / "spark_jobs" / "maintenance.py"
    assert capsys.readouterr().out == shlex.join([
        "/opt/spark/bin/spark-submit",
        "--packages", "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2",
        "--conf", "spark.pyspark.python=/opt/venv/bin/python", "--conf", "spark.executor.memory=8g",
        str(job), "--uri", "https://sharing.example.com/_iceberg", "--warehouse", WAREHOUSE,
        "--table", "db.events", "--procedures", "expire_snapshots,remove_orphan_files",
    ]) + "\n"  # fmt: skip


def test_a_dry_run_without_spark_submit_runs_the_job_with_this_python(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = cli(
        "--server", "http://127.0.0.1:8080", "--jars", "/jars/iceberg.jar", "--dry-run", namespace="sales.eu"
    )
    spark_maintenance.run(args)
    assert capsys.readouterr().out == shlex.join([
        sys.executable, str(spark_maintenance.JOB), "--uri", "http://127.0.0.1:8080/_iceberg",
        "--warehouse", WAREHOUSE, "--namespace", "sales.eu",
        "--procedures", "rewrite_data_files,expire_snapshots,remove_orphan_files",
        "--jars", "/jars/iceberg.jar",
    ]) + "\n"  # fmt: skip


def test_the_cli_command_submits_the_job_for_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    from sharing_server.cli import main

    for alias in ([], ["myaistor"]):  # an mc alias first, as for the other `table` commands
        code = main([
            "table", "maintenance", "spark", *alias, WAREHOUSE, "db", "events",
            "--server", "https://sharing.example.com", "--token", "dsa_not-to-be-shown",
            "--spark-submit", "/opt/spark/bin/spark-submit", "--dry-run",
        ])  # fmt: skip
        assert code == 0
        printed = capsys.readouterr().out
        assert printed.startswith("/opt/spark/bin/spark-submit ") and "dsa_not" not in printed
        assert f"--warehouse {WAREHOUSE} --table db.events" in printed
