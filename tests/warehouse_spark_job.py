"""Spark 3.5 + Iceberg writing through the server's own catalog (`/_iceberg`), step by step.

Run by `tests/end_to_end/test_warehouse_engines.py` with the Python of the Spark 3.5
environment that `make spark-iceberg` builds (the Iceberg runtime jar is built for Spark 3.5):

    python tests/warehouse_spark_job.py CONFIG_JSON

CONFIG_JSON holds `uri` (the server's `/_iceberg`), `warehouse`, `credential` (a catalog
user's `KEY:SECRET`, traded for a bearer token at `oauth2_server_uri`) and `pause`. Spark's
catalog `lake` is an Iceberg REST catalog there; the warehouse is on the server's local
storage, so tables live at `file://` locations and Spark writes their files itself.

For each of `db.t_v2` and `db.t_v3` (format v2 and v3, merge-on-read): CREATE TABLE, two
INSERTs, UPDATE, DELETE, MERGE INTO (position deletes in v2, deletion vectors in v3),
ALTER TABLE ADD COLUMN, an INSERT with the new column and an UPDATE of it. After each step
one line `@@STEP {json}` on stdout: the table, the step, the `main` snapshot id and Spark's
`SELECT *` rows (sorted, nulls last). With `pause`, the job then waits for a line on stdin,
so that the test reads the shared table at exactly that state. Last, one line `@@DONE {json}`:
per table, every snapshot in commit order with its summary and Spark's rows `VERSION AS OF` it
and their columns, and the current snapshot's delete files (content and format).

Iceberg's runtime jar from PyPI ships without the shaded HttpClient 5 its REST client needs;
`httpclient5_jar()` makes it from Debian's jars (`apt-get install libhttpclient5-java
libhttpcore5-java`), relocated beside the venv as `setup.sh` does for Jackson.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# The jars come from the repository's testbed: this script runs in the Spark 3.5 environment of
# `make spark-iceberg`, where the project is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testbed.spark_iceberg.session import httpclient5_jar, jackson_jar, runtime_jar

CATALOG = "lake"
NAMESPACE = "db"
MERGE_ON_READ = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read'"
)


def session(config: dict[str, Any]) -> Any:
    """A local Spark session whose catalog `lake` is the server's REST catalog."""
    from pyspark.sql import SparkSession

    prefix = f"spark.sql.catalog.{CATALOG}"
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", f"{runtime_jar()},{jackson_jar()},{httpclient5_jar()}")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "rest")
        .config(f"{prefix}.uri", config["uri"])
        .config(f"{prefix}.warehouse", config["warehouse"])
        .config(f"{prefix}.credential", config["credential"])
        .config(f"{prefix}.oauth2-server-uri", config["oauth2_server_uri"])
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def row_order(row: list[Any]) -> list[tuple[bool, Any]]:
    """Nulls last in each column, as the tests sort what they read."""
    return [(value is None, value) for value in row]


def sorted_rows(frame: Any) -> list[list[Any]]:
    return sorted([list(row) for row in frame.collect()], key=row_order)


def steps(table: str, version: int) -> list[tuple[str, str]]:
    """(step name, SQL) in order; every step but `create` and `add_column` commits a snapshot."""
    merge = (
        f"MERGE INTO {table} t USING (SELECT id, CONCAT('m', id) AS v FROM range(250, 330)) s "
        "ON t.id = s.id "
        "WHEN MATCHED AND s.id % 4 = 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, part, v) VALUES (s.id, CAST(s.id % 3 AS STRING), s.v)"
    )
    return [
        ("create", f"CREATE TABLE {table} (id bigint, part string, v string) USING iceberg "
                   f"PARTITIONED BY (part) TBLPROPERTIES ('format-version'='{version}', {MERGE_ON_READ})"),
        ("insert", f"INSERT INTO {table} SELECT id, CAST(id % 3 AS STRING), CONCAT('v', id) "
                   "FROM range(0, 200)"),
        ("insert_more", f"INSERT INTO {table} SELECT id, CAST(id % 3 AS STRING), CONCAT('v', id) "
                        "FROM range(200, 300)"),
        ("update", f"UPDATE {table} SET v = CONCAT('u', id) WHERE id % 7 = 0"),
        ("delete", f"DELETE FROM {table} WHERE id % 5 = 0 OR id BETWEEN 100 AND 120"),
        ("merge", merge),
        ("add_column", f"ALTER TABLE {table} ADD COLUMN score double"),
        ("insert_scored", f"INSERT INTO {table} VALUES (1000, '1', 'new', 1.5), (1001, '2', 'new', NULL)"),
        ("update_scored", f"UPDATE {table} SET score = id / 10.0 WHERE id % 9 = 0"),
    ]  # fmt: skip


def main_snapshot(spark: Any, table: str) -> int | None:
    found = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return found[0].snapshot_id if found else None


def emit(kind: str, payload: dict[str, Any]) -> None:
    print(f"@@{kind} {json.dumps(payload)}", flush=True)


def history(spark: Any, table: str) -> dict[str, Any]:
    """Every snapshot of `table` in commit order with Spark's rows of it, and the live delete files."""
    found = spark.sql(f"SELECT snapshot_id, summary FROM {table}.snapshots").collect()
    summaries = {row.snapshot_id: dict(row.summary) for row in found}
    snapshots = []
    for row in spark.sql(f"SELECT snapshot_id FROM {table}.history ORDER BY made_current_at").collect():
        frame = spark.sql(f"SELECT * FROM {table} VERSION AS OF {row.snapshot_id}")
        snapshots.append({"snapshot_id": row.snapshot_id, "summary": summaries[row.snapshot_id],
                          "columns": frame.columns, "rows": sorted_rows(frame)})  # fmt: skip
    deletes = spark.sql(f"SELECT content, file_format, record_count FROM {table}.delete_files").collect()
    return {
        "snapshots": snapshots,
        "delete_files": [
            {"content": d.content, "format": d.file_format, "rows": d.record_count} for d in deletes
        ],
    }


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    spark = session(config)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    done: dict[str, Any] = {}
    for version in (2, 3):
        name = f"t_v{version}"
        table = f"{CATALOG}.{NAMESPACE}.{name}"
        for step, statement in steps(table, version):
            spark.sql(statement)
            frame = spark.sql(f"SELECT * FROM {table}")
            emit("STEP", {"table": name, "step": step, "snapshot_id": main_snapshot(spark, table),
                          "columns": frame.columns, "rows": sorted_rows(frame)})  # fmt: skip
            if config.get("pause"):
                sys.stdin.readline()
        done[name] = history(spark, table)
    emit("DONE", done)
    spark.stop()


if __name__ == "__main__":
    main()
