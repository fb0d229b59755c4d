"""Iceberg tables with row-level deletes, written by Spark 3.5 + Iceberg, and Spark's rows of each snapshot.

Run by `tests/test_iceberg_deletes.py` with the Python of the Spark 3.5 environment that
`make spark-iceberg` builds (pyiceberg cannot write delete files; a real engine must):

    python tests/iceberg_writer.py WAREHOUSE EXPECTED_JSON

Tables (namespace `db`, Hadoop layout under WAREHOUSE):
- `pos_v2`: format v2, merge-on-read; Parquet position deletes spanning files and
  partitions, a second DELETE, then an UPDATE (delete + insert).
- `dv_v3`: format v3, merge-on-read; deletion vectors in Puffin files, a second DELETE
  on the same files (its DVs replace the first ones), then an UPDATE.
- `cow_v2`: format v2, copy-on-write: the control, with no delete files.

EXPECTED_JSON maps each table to its metadata file and, per snapshot in commit order,
the snapshot id and Spark's own rows (`VERSION AS OF`), sorted.
"""

import json
import sys

from session import iceberg_session

COLUMNS = "id, part, v"


def write(spark, name: str, properties: str) -> None:
    table = f"local.db.{name}"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, part string, v string) USING iceberg "
        f"PARTITIONED BY (part) TBLPROPERTIES ({properties})"
    )
    # Three files per partition and batch: deletes below span files and partitions.
    for start in (0, 300):
        spark.range(start, start + 300).selectExpr(
            "id", "CAST(id % 3 AS STRING) AS part", "CONCAT('v', id) AS v"
        ).repartition(3).writeTo(table).append()
    spark.sql(f"DELETE FROM {table} WHERE id % 7 = 0")
    spark.sql(f"DELETE FROM {table} WHERE id % 11 = 0 OR id BETWEEN 100 AND 120")
    spark.sql(f"UPDATE {table} SET v = 'updated' WHERE id % 13 = 1")


def main() -> None:
    warehouse, expected_path = sys.argv[1], sys.argv[2]
    spark = iceberg_session(warehouse)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    mor = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read'"
    write(spark, "pos_v2", f"'format-version'='2', {mor}")
    write(spark, "dv_v3", f"'format-version'='3', {mor}")
    cow = "'write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write'"
    write(spark, "cow_v2", f"'format-version'='2', {cow}")
    expected = {}
    for name in ("pos_v2", "dv_v3", "cow_v2"):
        table = f"local.db.{name}"
        history = spark.sql(f"SELECT snapshot_id FROM {table}.history ORDER BY made_current_at").collect()
        files = spark.sql(f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp").collect()
        snapshots = []
        for row in history:
            snapshot_id = row.snapshot_id
            rows = spark.sql(f"SELECT {COLUMNS} FROM {table} VERSION AS OF {snapshot_id}").collect()
            snapshots.append({"snapshot_id": snapshot_id, "rows": sorted([list(r) for r in rows])})
        expected[name] = {"metadata": files[-1].file, "snapshots": snapshots}
    with open(expected_path, "w") as handle:
        json.dump(expected, handle)
    spark.stop()


if __name__ == "__main__":
    main()
