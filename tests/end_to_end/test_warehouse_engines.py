"""Real engines write to the server's own catalog (`/_iceberg`); the same server shares what they wrote.

- **Spark 3.5 + Iceberg 1.10** (`tests/warehouse_spark_job.py`, in the Spark 3.5 environment of
  `make spark-iceberg`): a REST catalog with an OAuth2 `credential` (a catalog user's keys), on
  a local warehouse, so Spark writes `file://` data files itself. CREATE TABLE at v2 and v3,
  INSERT, UPDATE, DELETE, MERGE INTO (position deletes in v2, deletion vectors in v3), ALTER
  TABLE ADD COLUMN. The job pauses after every step while the test reads the shared table
  with `delta_sharing`, so each read is of exactly the state Spark just committed.
- **DuckDB 1.4 + its iceberg extension** from PyPI wheels (loaded from the installed files,
  nothing downloaded): an iceberg secret with client id and secret, ATTACH, INSERT, DELETE,
  UPDATE, SELECT, on a v2 table (DuckDB 1.4 cannot write v3; the server creates v3 unless
  asked otherwise).

One server per module, on local storage; Spark runs once for every Spark test.
"""

from __future__ import annotations

import json
import math
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pytest
from requests import HTTPError

from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.model import parse_create_args
from tests.conftest import ADMIN_TOKEN, SPARK_ICEBERG_PYTHON, Deployment, audit_records

SPARK_JOB = Path(__file__).resolve().parents[1] / "warehouse_spark_job.py"
SPARK_WAREHOUSE = "spark"
DUCK_WAREHOUSE = "duck"
SPARK_TABLES = ("t_v2", "t_v3")
#: Spark's steps that commit no snapshot (`tests/warehouse_spark_job.py`).
NO_SNAPSHOT = ("create", "add_column")
#: Spark's row-level steps: the snapshots after its two INSERTs, but for `insert_scored`.
ROW_LEVEL_STEPS = ("update", "delete", "merge")
#: How long the Spark job may take for one step (its first includes starting Spark).
STEP_SECONDS = 240


@pytest.fixture(scope="module")
def user(server: Deployment) -> IssuedUser:
    return CatalogUsers(server.store.transactions, server.secret).create("engines")


def catalog_token(server: Deployment, user: IssuedUser) -> str:
    answer = httpx.post(
        f"{server.server.url}/_iceberg/v1/oauth/tokens",
        data={
            "grant_type": "client_credentials",
            "client_id": user.access_key,
            "client_secret": user.secret_key,
        },
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


@pytest.fixture(scope="module")
def api(server: Deployment, user: IssuedUser) -> Iterator[httpx.Client]:
    """The catalog API as the user, with a bearer token from the OAuth2 endpoint."""
    with server.catalog_api(catalog_token(server, user), timeout=30) as client:
        yield client


def create_warehouse(api: httpx.Client, name: str) -> None:
    answer = api.post("/warehouses", json={"name": name})
    assert answer.status_code == 200, answer.text


def share(server: Deployment, warehouse: str, namespace: str, table: str) -> str:
    """Share `warehouse.namespace.table` alone as share `<warehouse>_<table>`; its table URL."""
    name = f"{warehouse}_{table}"
    spec = f"{table}:uniform:{warehouse}:{namespace}:{table}"
    server.store.create_share(name, parse_create_args([namespace, spec]), history_shared=True)
    return f"{server.profile(name)}#{name}.{namespace}.{table}"


# -- rows, as both sides give them -------------------------------------------------------------


def row_order(row: list[Any]) -> list[tuple[bool, Any]]:
    """Nulls last in each column, as the Spark job sorts its rows."""
    return [(value is None, value) for value in row]


def cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value) if hasattr(value, "__index__") else value


def frame_rows(frame: pd.DataFrame, columns: list[str]) -> list[list[Any]]:
    records = frame.to_dict("records")
    return sorted([[cell(record[column]) for column in columns] for record in records], key=row_order)


def shared_read(url: str, version: int | None = None) -> pd.DataFrame:
    # The Delta format: snapshots with row-level deletes are refused in the parquet format.
    return delta_sharing.load_as_pandas(url, version=version, use_delta_format=True)


# -- Spark ------------------------------------------------------------------------------------


@dataclass
class SparkStep:
    """One step of the Spark job: Spark's rows, and the shared table read right after it."""

    table: str
    step: str
    snapshot_id: int | None
    columns: list[str]
    rows: list[list[Any]]
    shared_version: int | None = None
    shared_columns: list[str] = field(default_factory=list)
    shared_rows: list[list[Any]] | None = None
    error: str | None = None


@dataclass
class SparkRun:
    steps: list[SparkStep]
    history: dict[str, Any]
    urls: dict[str, str]
    seconds: float
    log: Path


def job_lines(process: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The job's protocol lines (`@@...`), read in a thread; None when its output ends."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("@@"):
                lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def read_after_step(server: Deployment, urls: dict[str, str], step: SparkStep) -> None:
    """Share the table when Spark has just created it; read it as a recipient at every step."""
    if step.step == "create":
        urls[step.table] = share(server, SPARK_WAREHOUSE, "db", step.table)
    url = urls[step.table]
    try:
        step.shared_version = delta_sharing.get_table_version(url)
        frame = shared_read(url)
        step.shared_columns = list(frame.columns)
        step.shared_rows = frame_rows(frame, step.shared_columns)
    except Exception as error:  # kept for the tests to name; Spark goes on to its next step
        step.error = f"{type(error).__name__}: {error}"


@pytest.fixture(scope="module")
def spark_run(
    server: Deployment, user: IssuedUser, api: httpx.Client, tmp_path_factory: pytest.TempPathFactory
) -> SparkRun:
    assert SPARK_ICEBERG_PYTHON.exists(), (
        "the Spark 3.5 + Iceberg environment is missing: run `make spark-iceberg`"
    )
    create_warehouse(api, SPARK_WAREHOUSE)
    work = tmp_path_factory.mktemp("spark-job")
    root = server.server.url
    config = {
        "uri": f"{root}/_iceberg",
        "warehouse": SPARK_WAREHOUSE,
        "credential": f"{user.access_key}:{user.secret_key}",
        "oauth2_server_uri": f"{root}/_iceberg/v1/oauth/tokens",
        "pause": True,
    }
    (work / "config.json").write_text(json.dumps(config))
    log = work / "spark.log"
    steps: list[SparkStep] = []
    urls: dict[str, str] = {}
    started = time.monotonic()
    with log.open("w") as errors:
        process = subprocess.Popen(
            [str(SPARK_ICEBERG_PYTHON), str(SPARK_JOB), str(work / "config.json")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        try:
            lines = job_lines(process)
            while True:
                try:
                    line = lines.get(timeout=STEP_SECONDS)
                except queue.Empty:
                    pytest.fail(
                        f"the Spark job said nothing for {STEP_SECONDS} s:\n{log.read_text()[-3000:]}"
                    )
                if line is None:
                    pytest.fail(f"the Spark job stopped early:\n{log.read_text()[-3000:]}")
                kind, _, payload = line.partition(" ")
                if kind == "@@DONE":
                    history = json.loads(payload)
                    break
                step = SparkStep(**json.loads(payload))
                read_after_step(server, urls, step)
                steps.append(step)
                assert process.stdin is not None
                process.stdin.write("next\n")
                process.stdin.flush()
            assert process.wait(timeout=60) == 0, log.read_text()[-3000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    return SparkRun(steps, history, urls, time.monotonic() - started, log)


def steps_of(run: SparkRun, table: str) -> list[SparkStep]:
    return [step for step in run.steps if step.table == table]


def test_spark_ran_every_step_through_the_catalog_as_the_user(
    server: Deployment, spark_run: SparkRun
) -> None:
    names = ["create", "insert", "insert_more", "update", "delete", "merge", "add_column", "insert_scored",
             "update_scored"]  # fmt: skip
    for table in SPARK_TABLES:
        assert [step.step for step in steps_of(spark_run, table)] == names
    catalog = [r for r in audit_records(server) if r["path"].startswith(f"/_iceberg/v1/{SPARK_WAREHOUSE}/")]
    commits = [r for r in catalog if r["method"] == "POST" and r["path"].endswith(SPARK_TABLES)]
    # Seven snapshots per table, each its own commit, and the ALTER TABLE: no retries were needed.
    assert len(commits) == 2 * 8, [(r["path"], r["status"]) for r in commits]
    assert {r["status"] for r in commits} == {200}
    assert {r.get("catalog_user") for r in catalog} == {"engines"}
    assert not [r for r in catalog if r["status"] >= 500]


def project(rows: list[list[Any]], columns: list[str], kept: list[str]) -> list[list[Any]]:
    at = [columns.index(column) for column in kept]
    return sorted([[row[index] for index in at] for row in rows], key=row_order)


@pytest.mark.parametrize("table", SPARK_TABLES)
def test_every_step_is_shared_as_spark_reads_it(spark_run: SparkRun, table: str) -> None:
    previous: SparkStep | None = None
    for step in steps_of(spark_run, table):
        assert step.error is None, (step.step, step.error)
        if step.step == "add_column":
            # No snapshot, so no new version: the latest version is still the last snapshot, in
            # that snapshot's schema, where Spark already shows the new column (all nulls).
            assert previous is not None
            assert step.shared_columns == previous.columns == step.columns[:-1]
            assert step.shared_rows == project(step.rows, step.columns, step.shared_columns)
            assert {row[-1] for row in step.rows} == {None}
        else:
            assert step.shared_columns == step.columns, step.step
            assert step.shared_rows == step.rows, step.step
        previous = step


@pytest.mark.parametrize("table", SPARK_TABLES)
def test_share_versions_count_sparks_snapshots(spark_run: SparkRun, table: str) -> None:
    """Version 0 is the empty table the share saw first; each snapshot adds one, a schema change none."""
    steps = steps_of(spark_run, table)
    expected, version, seen = [], 0, None
    for step in steps:
        if step.snapshot_id != seen:
            version, seen = version + 1, step.snapshot_id
        expected.append(version if seen is not None else 0)
    assert [step.shared_version for step in steps] == expected
    assert [s.snapshot_id for s in steps if s.step not in NO_SNAPSHOT] == [
        s["snapshot_id"] for s in spark_run.history[table]["snapshots"]
    ]


@pytest.mark.parametrize("table", SPARK_TABLES)
def test_time_travel_reads_every_snapshot_as_spark_does(spark_run: SparkRun, table: str) -> None:
    """`version=N` is Spark's `VERSION AS OF` the N-th snapshot, in its own schema, after all steps."""
    url = spark_run.urls[table]
    snapshots = spark_run.history[table]["snapshots"]
    assert_empty_or_refused(url, version=0)
    for version, snapshot in enumerate(snapshots, start=1):
        frame = shared_read(url, version=version)
        assert list(frame.columns) == snapshot["columns"], version
        assert frame_rows(frame, snapshot["columns"]) == snapshot["rows"], version


def assert_empty_or_refused(url: str, version: int) -> None:
    """The empty table before the first snapshot: once there are snapshots the server refuses it
    (as if expired), and must never answer it with rows."""
    try:
        frame = shared_read(url, version=version)
    except HTTPError as error:
        assert error.response.status_code == 400
    else:
        assert frame.empty


def test_row_level_deletes_are_position_deletes_in_v2_and_deletion_vectors_in_v3(spark_run: SparkRun) -> None:
    position_deletes = 1
    for table, file_format, added in (
        ("t_v2", "PARQUET", "added-position-delete-files"),
        ("t_v3", "PUFFIN", "added-dvs"),
    ):
        deletes = spark_run.history[table]["delete_files"]
        assert deletes, table
        assert {(d["content"], d["format"]) for d in deletes} == {(position_deletes, file_format)}
        # Every row-level step, MERGE included, committed delete files of the table's kind.
        snapshots = spark_run.history[table]["snapshots"][2:5]
        for step, snapshot in zip(ROW_LEVEL_STEPS, snapshots, strict=True):
            summary = snapshot["summary"]
            assert int(summary.get(added, 0)) > 0, (table, step, summary)
            assert int(summary["added-position-deletes"]) > 0, (table, step, summary)
            other = "added-dvs" if table == "t_v2" else "added-position-delete-files"
            assert other not in summary, (table, step, summary)


def test_the_v3_table_keeps_row_lineage(spark_run: SparkRun, api: httpx.Client) -> None:
    answer = api.get(f"/{SPARK_WAREHOUSE}/namespaces/db/tables/t_v3")
    assert answer.status_code == 200, answer.text
    metadata = answer.json()["metadata"]
    assert metadata["format-version"] == 3
    snapshots = sorted(metadata["snapshots"], key=lambda s: s["sequence-number"])
    assert [s["snapshot-id"] for s in snapshots] == [
        s["snapshot_id"] for s in spark_run.history["t_v3"]["snapshots"]
    ]
    assigned = 0
    for snapshot in snapshots:
        assert snapshot["first-row-id"] == assigned, snapshot
        assert snapshot["added-rows"] >= 0
        assigned += snapshot["added-rows"]
    assert metadata["next-row-id"] == assigned > 0


# -- DuckDB -----------------------------------------------------------------------------------

DUCKDB_EXTENSIONS = ("httpfs", "avro", "iceberg")


def duckdb_connection() -> Any:
    """DuckDB with httpfs, avro and iceberg loaded from the `duckdb-ext-*` wheels' files."""
    import duckdb

    found = {}
    for name in DUCKDB_EXTENSIONS:
        files = sorted(Path(duckdb.__file__).parents[1].glob(f"duckdb_ext/extensions/v{duckdb.__version__}/*/"
                                                             f"{name}.duckdb_extension"))  # fmt: skip
        assert files, f"no {name} extension for DuckDB {duckdb.__version__}: install duckdb-ext-{name}"
        found[name] = files[0]
    connection = duckdb.connect(
        config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    for name in DUCKDB_EXTENSIONS:
        connection.execute(f"LOAD '{found[name]}'")
    return connection


@pytest.fixture(scope="module")
def duck(server: Deployment, user: IssuedUser, api: httpx.Client) -> Iterator[Any]:
    """DuckDB attached to the duck warehouse as the catalog user (OAuth2 client credentials)."""
    create_warehouse(api, DUCK_WAREHOUSE)
    root = server.server.url
    connection = duckdb_connection()
    connection.execute(
        f"CREATE SECRET engines (TYPE iceberg, CLIENT_ID '{user.access_key}', "
        f"CLIENT_SECRET '{user.secret_key}', OAUTH2_SERVER_URI '{root}/_iceberg/v1/oauth/tokens')"
    )
    connection.execute(
        f"ATTACH '{DUCK_WAREHOUSE}' AS lake (TYPE iceberg, ENDPOINT '{root}/_iceberg', SECRET engines)"
    )
    connection.execute("CREATE SCHEMA lake.sales")
    yield connection
    connection.close()


def create_v2_table(api: httpx.Client, name: str) -> None:
    """A v2 table, made through the REST API: DuckDB 1.4's CREATE TABLE cannot ask for a version."""
    schema = {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "name", "type": "string", "required": False},
    ]}  # fmt: skip
    body = {"name": name, "schema": schema, "properties": {"format-version": "2"}}
    answer = api.post(f"/{DUCK_WAREHOUSE}/namespaces/sales/tables", json=body)
    assert answer.status_code == 200, answer.text


def duck_rows(duck: Any, sql: str) -> list[list[Any]]:
    return sorted([list(row) for row in duck.execute(sql).fetchall()], key=row_order)


def test_duckdb_writes_a_v2_table_that_the_server_shares(
    server: Deployment, api: httpx.Client, duck: Any
) -> None:
    create_v2_table(api, "orders")
    url = share(server, DUCK_WAREHOUSE, "sales", "orders")
    assert shared_read(url).empty  # version 0: the table before DuckDB's first snapshot
    statements = [
        "INSERT INTO lake.sales.orders VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO lake.sales.orders SELECT range, 'r' || range FROM range(10, 40)",
        "DELETE FROM lake.sales.orders WHERE id % 3 = 0",
        "UPDATE lake.sales.orders SET name = 'updated' WHERE id % 5 = 1",
    ]
    seen = []
    for statement in statements:
        duck.execute(statement)
        rows = duck_rows(duck, "SELECT id, name FROM lake.sales.orders")
        assert frame_rows(shared_read(url), ["id", "name"]) == rows, statement
        seen.append(rows)
    # Version 0 is the empty table, then one per statement.
    assert delta_sharing.get_table_version(url) == len(statements)
    assert_empty_or_refused(url, version=0)
    for version, rows in enumerate(seen, start=1):
        assert frame_rows(shared_read(url, version=version), ["id", "name"]) == rows, version


def test_duckdb_creates_v2_tables_by_default_and_a_v3_default_stops_its_inserts(
    duck: Any, api: httpx.Client
) -> None:
    """The server's default format is v2, which DuckDB 1.4 writes; a namespace defaulting to v3
    makes DuckDB create v3 tables, which it then refuses to write."""
    import duckdb

    duck.execute("CREATE TABLE lake.sales.made_by_duckdb (id BIGINT)")
    metadata = api.get(f"/{DUCK_WAREHOUSE}/namespaces/sales/tables/made_by_duckdb").json()["metadata"]
    assert metadata["format-version"] == 2
    duck.execute("INSERT INTO lake.sales.made_by_duckdb VALUES (1)")
    assert duck_rows(duck, "SELECT id FROM lake.sales.made_by_duckdb") == [[1]]
    body = {"namespace": ["duck_v3"], "properties": {"table-default.format-version": "3"}}
    assert api.post(f"/{DUCK_WAREHOUSE}/namespaces", json=body).status_code == 200
    duck.execute("CREATE TABLE lake.duck_v3.made_by_duckdb (id BIGINT)")
    metadata = api.get(f"/{DUCK_WAREHOUSE}/namespaces/duck_v3/tables/made_by_duckdb").json()["metadata"]
    assert metadata["format-version"] == 3
    assert metadata["next-row-id"] == 0
    with pytest.raises(duckdb.NotImplementedException, match="V3"):
        duck.execute("INSERT INTO lake.duck_v3.made_by_duckdb VALUES (1)")


def test_duckdb_creates_and_writes_tables_in_a_namespace_defaulting_to_v2(
    server: Deployment, api: httpx.Client, duck: Any
) -> None:
    """`table-default.format-version = 2` on the namespace: DuckDB's own CREATE TABLE gets v2."""
    body = {"namespace": ["duck_v2"], "properties": {"table-default.format-version": "2"}}
    assert api.post(f"/{DUCK_WAREHOUSE}/namespaces", json=body).status_code == 200
    duck.execute("CREATE TABLE lake.duck_v2.made_by_duckdb (id BIGINT, name VARCHAR)")
    metadata = api.get(f"/{DUCK_WAREHOUSE}/namespaces/duck_v2/tables/made_by_duckdb").json()["metadata"]
    assert metadata["format-version"] == 2
    duck.execute("INSERT INTO lake.duck_v2.made_by_duckdb VALUES (1, 'a'), (2, 'b')")
    rows = duck_rows(duck, "SELECT id, name FROM lake.duck_v2.made_by_duckdb")
    assert rows == [[1, "a"], [2, "b"]]
    url = share(server, DUCK_WAREHOUSE, "duck_v2", "made_by_duckdb")
    assert frame_rows(shared_read(url), ["id", "name"]) == rows


def test_duckdb_reads_sparks_v2_table_with_the_admin_token(server: Deployment, spark_run: SparkRun) -> None:
    """The provider's admin token as DuckDB's bearer token; Spark's position deletes applied."""
    connection = duckdb_connection()
    try:
        connection.execute(f"CREATE SECRET admin (TYPE iceberg, TOKEN '{ADMIN_TOKEN}')")
        connection.execute(
            f"ATTACH '{SPARK_WAREHOUSE}' AS spark (TYPE iceberg, ENDPOINT '{server.server.url}/_iceberg', "
            "SECRET admin)"
        )
        last = steps_of(spark_run, "t_v2")[-1]
        assert duck_rows(connection, "SELECT * FROM spark.db.t_v2") == last.rows
    finally:
        connection.close()
