"""Many-file Iceberg tables with row-level deletes for the bench, written by Spark 3.5 + Iceberg.

Run by `bench/scenarios.py` (`bench_iceberg_deletes`) with the Python of the Spark 3.5
environment that `make spark-iceberg` builds (pyiceberg cannot write delete files):

    python bench/iceberg_deletes_writer.py WAREHOUSE SUMMARY_JSON FILES

Tables (namespace `bench`, Hadoop layout under WAREHOUSE), each of two snapshots: an
append of FILES data files of 1,000 rows (file i holds ids 1000*i .. 1000*i+999), then
a DELETE of about 10 rows in each of the first tenth of the files.
- `pos_v2`: format v2, merge-on-read: the DELETE writes Parquet position deletes
  (one delete file per data file, Iceberg 1.10's default granularity).
- `dv_v3`: format v3, merge-on-read: the DELETE writes deletion vectors in a Puffin file.

Spark writes the data files of `pos_v2`; `dv_v3` appends hard links to the same files
through Iceberg's Java API, which halves the write time (Spark spends several
milliseconds on each file it writes: 10,000 files take a minute or more on 2 cores).
Which rows go is a hash of the id, so every affected file has its own vector (the
server's DV files are content-addressed: equal vectors would share one file), and the
two tables delete different rows. SUMMARY_JSON says, per table, its metadata file, data
and delete files, rows deleted, and the seconds each step took.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

# The session comes from the repository (testbed/spark_iceberg/session.py): this script runs in the
# Spark 3.5 environment of `make spark-iceberg`, where the project is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testbed.spark_iceberg.session import iceberg_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROWS_PER_FILE = 1000
# Files per write task: a task per file would add Spark's task overhead to every file.
FILES_PER_TASK = 100


def create(spark: SparkSession, name: str, version: int) -> str:
    table = f"local.bench.{name}"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, v string) USING iceberg TBLPROPERTIES ("
        f"'format-version'='{version}', 'write.delete.mode'='merge-on-read', "
        # No shuffle before the write, and a new file every 1,000 rows (the writer
        # checks its file's size every 1,000 rows: any size rolls over).
        "'write.distribution-mode'='none', 'write.target-file-size-bytes'='1')"
    )
    return table


def spark_append(spark: SparkSession, table: str, files: int) -> None:
    # Ids in order within each task: a row's position in its file is id % 1000.
    tasks = max(files // FILES_PER_TASK, 1)
    rows = spark.range(0, files * ROWS_PER_FILE, 1, tasks).selectExpr("id", "CONCAT('v', id) AS v")
    rows.writeTo(table).append()


def local_path(uri: str) -> str:
    return uri.removeprefix("file:")


def linked_append(spark: SparkSession, source: str, target: str) -> None:
    """Append to `target` hard links to the data files of `source`'s snapshot, stats and all."""
    jvm = spark._jvm
    load = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable
    src, dst = load(spark._jsparkSession, source), load(spark._jsparkSession, target)
    src_location, dst_location = src.location(), dst.location()
    append = dst.newAppend()
    for data_file in src.currentSnapshot().addedDataFiles(src.io()).iterator():
        path = data_file.location()
        linked = dst_location + path[len(src_location) :]
        os.makedirs(os.path.dirname(local_path(linked)), exist_ok=True)
        os.link(local_path(path), local_path(linked))
        append.appendFile(
            jvm.org.apache.iceberg.DataFiles.builder(dst.spec()).copy(data_file).withPath(linked).build()
        )
    append.commit()
    spark.sql(f"REFRESH TABLE {target}")


def delete(spark: SparkSession, table: str, files: int, salt: int) -> None:
    # The first tenth of the files, so the DELETE's scan skips the rest by their stats.
    affected = max(files // 10, 1) * ROWS_PER_FILE
    spark.sql(f"DELETE FROM {table} WHERE id < {affected} AND pmod(hash(id, {salt}), 100) = 0")


def describe(spark: SparkSession, table: str) -> dict:
    data_files = spark.sql(f"SELECT count(*) AS n FROM {table}.data_files").collect()[0].n
    deletes = spark.sql(
        f"SELECT count(*) AS n, count(DISTINCT file_path) AS paths, sum(record_count) AS rows "
        f"FROM {table}.delete_files"
    ).collect()[0]
    metadata = spark.sql(f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp").collect()
    return {
        "metadata": metadata[-1].file,
        "data_files": data_files,
        "delete_entries": deletes.n,
        "delete_files": deletes.paths,
        "rows_deleted": deletes.rows,
    }


def main() -> None:
    warehouse, summary_path, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
    seconds: dict[str, float] = {}
    last = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal last
        now = time.perf_counter()
        seconds[step] = round(now - last, 1)
        last = now

    spark = iceberg_session(warehouse)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.bench")
    lap("session")
    pos = create(spark, "pos_v2", 2)
    dv = create(spark, "dv_v3", 3)
    spark_append(spark, pos, files)
    lap("spark_append")
    linked_append(spark, pos, dv)
    lap("linked_append")
    delete(spark, pos, files, salt=2)
    lap("delete_v2")
    delete(spark, dv, files, salt=3)
    lap("delete_v3")
    summary = {
        "files": files,
        "seconds": seconds,
        "tables": {"pos_v2": describe(spark, pos), "dv_v3": describe(spark, dv)},
    }
    spark.stop()
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)


if __name__ == "__main__":
    main()
