"""Iceberg tables with row-level deletes, written by Spark 3.5 + Iceberg, and Spark's rows of each snapshot.

Run by `tests/end_to_end/test_iceberg_deletes.py` with the Python of the Spark 3.5 environment that
`make spark-iceberg` builds (pyiceberg cannot write delete files; a real engine must):

    python tests/iceberg_writer.py WAREHOUSE EXPECTED_JSON

Tables (namespace `db`, Hadoop layout under WAREHOUSE):
- `pos_v2`: format v2, merge-on-read; Parquet position deletes spanning files and
  partitions, a second DELETE, then an UPDATE (delete + insert).
- `dv_v3`: format v3, merge-on-read; deletion vectors in Puffin files, a second DELETE
  on the same files (its DVs replace the first ones), then an UPDATE.
- `cow_v2`: format v2, copy-on-write: the control, with no delete files.
- `eq_v2`: format v2, partitioned by `part`; equality deletes committed by Iceberg's own
  Java writer and `RowDelta` (Spark SQL never writes them): on `id` in one partition, on
  (`name`, `d`) with a null in a key, an append re-adding deleted keys (kept: a delete
  applies only to older data), a global delete (an unpartitioned spec's) on `id`, another
  append, then a merge-on-read DELETE whose position deletes join the equality deletes.
- `upd_v2`, `upd_v3`: merge-on-read, partitioned by a five-valued `part`; three appends
  (80, 60, 60 rows), a DELETE, then an UPDATE of some rows the DELETE left. In v3 the
  UPDATE replaces some of the DELETE's vectors and leaves others live in the same Puffin
  file (how many depends on Spark's layout of the day).
- `partial_v3`: that shape by construction. Unpartitioned, ten appends of one file each, a
  DELETE in one task (one Puffin file, ten vectors), an UPDATE in one task of rows in nine
  of the ten files: its Puffin file replaces nine vectors; the tenth keeps the first file live.
- `merge_v2`, `merge_v3`: merge-on-read MERGEs (update, delete and insert in one commit),
  a DELETE between them, the second MERGE touching only some of the files.

EXPECTED_JSON maps each table to its metadata file and, per snapshot in commit order,
the snapshot id and Spark's own rows (`VERSION AS OF`), sorted (nulls last).
"""

import json
import sys
from pathlib import Path

# The session comes from the repository (testbed/spark_iceberg/session.py): this script runs in the
# Spark 3.5 environment of `make spark-iceberg`, where the project is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testbed.spark_iceberg.session import iceberg_session

PLAIN = ("pos_v2", "dv_v3", "cow_v2", "upd_v2", "upd_v3", "partial_v3", "merge_v2", "merge_v3")
COLUMNS = dict.fromkeys(PLAIN, "id, part, v")
# Dates as ISO text, so that the rows are JSON and compare with what readers return.
COLUMNS["eq_v2"] = "id, part, name, CAST(d AS STRING) AS d, v"


def row_order(row: list) -> list:
    """Sorts rows with nulls (last in each column) as the tests sort what they read."""
    return [(value is None, value) for value in row]


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


def equality_delete(spark, name: str, columns: list[str], rows: list[tuple], spec_id: int, part=None):
    """Commit one equality delete file of `rows` on `columns`, written by Iceberg's own writer."""
    jvm = spark._jvm
    iceberg = jvm.org.apache.iceberg
    table = iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"local.db.{name}")
    schema, spec = table.schema(), table.specs().get(spec_id)
    ids = [schema.findField(column).fieldId() for column in columns]
    equality_ids = spark._sc._gateway.new_array(jvm.int, len(ids))
    for index, field_id in enumerate(ids):
        equality_ids[index] = field_id
    delete_schema = iceberg.types.TypeUtil.select(schema, jvm.java.util.HashSet(ids))
    factory = iceberg.data.GenericAppenderFactory(schema, spec, equality_ids, delete_schema, None)
    partition = None
    if part is not None:
        partition = iceberg.PartitionData(spec.partitionType())
        partition.set(0, part)
    file_name = f"eq-{jvm.java.util.UUID.randomUUID()}.parquet"
    location = table.locationProvider().newDataLocation(spec, partition, file_name)
    output = iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(table.io().newOutputFile(location))
    writer = factory.newEqDeleteWriter(output, iceberg.FileFormat.PARQUET, partition)
    for row in rows:
        record = iceberg.data.GenericRecord.create(delete_schema)
        for column, value in zip(columns, row, strict=True):
            # py4j passes Python ints as Integer: hence `id int` in the table.
            if column == "d" and value is not None:
                value = jvm.java.time.LocalDate.parse(value)
            record.setField(column, value)
        writer.write(record)
    writer.close()
    table.newRowDelta().addDeletes(writer.toDeleteFile()).commit()
    spark.sql(f"REFRESH TABLE local.db.{name}")


def write_equality(spark, name: str) -> None:
    table = f"local.db.{name}"
    spark.sql(
        f"CREATE TABLE {table} (id int, part string, name string, d date, v string) USING iceberg "
        "PARTITIONED BY (part) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
        "'write.distribution-mode'='none', 'write.spark.fanout.enabled'='true')"
    )
    # Two files per partition (no shuffle by partition before writing); every 17th name is null.
    spark.range(0, 300).selectExpr(
        "CAST(id AS INT) AS id",
        "CAST(id % 3 AS STRING) AS part",
        "IF(id % 17 = 0, NULL, CONCAT('n', id % 10)) AS name",
        "DATE_ADD(DATE'2024-01-01', CAST(id % 5 AS INT)) AS d",
        "CONCAT('v', id) AS v",
    ).repartition(2).writeTo(table).append()
    # Keys 1 and 2 live in other partitions: a partition's delete leaves them.
    equality_delete(spark, name, ["id"], [(0,), (3,), (6,), (9,), (1,), (2,)], 0, "0")
    # Null matches null: (NULL, 2024-01-05) deletes ids 34 and 289; ('n4', NULL) deletes nothing.
    keys = [(None, "2024-01-05"), ("n4", "2024-01-05"), ("n1", "2024-01-02"), ("n4", None)]
    equality_delete(spark, name, ["name", "d"], keys, 0, "1")
    # Deleted keys again, newer than the deletes: they stay.
    spark.sql(
        f"INSERT INTO {table} VALUES (0, '0', 'again', DATE'2024-02-01', 'v0b'), "
        "(3, '0', 'again', DATE'2024-02-01', 'v3b'), (1000, '1', NULL, DATE'2024-01-05', 'v1000')"
    )
    # A global delete needs an unpartitioned spec: drop the partition field, delete, add it back.
    spark.sql(f"ALTER TABLE {table} DROP PARTITION FIELD part")
    unpartitioned = (
        spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
        .spec()
        .specId()
    )
    equality_delete(spark, name, ["id"], [(0,), (5,), (10,), (20,)], unpartitioned)
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD part")
    spark.sql(f"INSERT INTO {table} VALUES (5, '2', 'again', DATE'2024-02-02', 'v5b')")
    # Position deletes on the same files as the equality deletes.
    spark.sql(f"DELETE FROM {table} WHERE id % 7 = 0")


MERGE_ON_READ = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read'"
)


def create(spark, name: str, version: int, partitioned: bool = True) -> str:
    table = f"local.db.{name}"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, part string, v string) USING iceberg "
        + ("PARTITIONED BY (part) " if partitioned else "")
        + f"TBLPROPERTIES ('format-version'='{version}', {MERGE_ON_READ})"
    )
    return table


def append(spark, table: str, start: int, stop: int, files: int | None = None) -> None:
    rows = spark.range(start, stop).selectExpr("id", "CAST(id % 5 AS STRING) AS part", "CONCAT('v', id) AS v")
    (rows if files is None else rows.coalesce(files)).writeTo(table).append()


def write_update_after_delete(spark, name: str, version: int) -> None:
    table = create(spark, name, version)
    for start, stop in ((0, 80), (80, 140), (140, 200)):
        append(spark, table, start, stop)
    spark.sql(f"DELETE FROM {table} WHERE id % 7 = 0")
    spark.sql(f"UPDATE {table} SET v = CONCAT(v, '+1000') WHERE id % 11 = 0")


def in_one_task(spark, statement: str) -> None:
    """Run a row-level statement as one write task: its deletion vectors go to one Puffin file."""
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        spark.sql(statement)
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")
        spark.conf.unset("spark.sql.adaptive.enabled")


def write_partly_replaced(spark, name: str) -> None:
    table = create(spark, name, 3, partitioned=False)
    for k in range(10):  # file k holds ids 20k .. 20k+19
        append(spark, table, 20 * k, 20 * k + 20, files=1)
    in_one_task(spark, f"DELETE FROM {table} WHERE id % 7 = 0")  # rows in all ten files
    # Rows in files 0-8 only: file 9 (ids 180-199) keeps its vector in the DELETE's Puffin file.
    in_one_task(spark, f"UPDATE {table} SET v = 'updated' WHERE id % 11 = 0 AND id < 180")


def write_merges(spark, name: str, version: int) -> None:
    table = create(spark, name, version)
    append(spark, table, 0, 120)
    append(spark, table, 120, 200)
    merge = (
        f"MERGE INTO {table} t USING (SELECT id, CONCAT('m', id) AS v FROM range({{0}}, {{1}})) s "
        "ON t.id = s.id "
        "WHEN MATCHED AND s.id % 5 = 0 THEN DELETE "
        "WHEN MATCHED AND s.id % 3 = 0 THEN UPDATE SET v = s.v "
        "WHEN NOT MATCHED THEN INSERT (id, part, v) VALUES (s.id, CAST(s.id % 5 AS STRING), s.v)"
    )
    spark.sql(merge.format(150, 260))
    spark.sql(f"DELETE FROM {table} WHERE id % 13 = 0")
    spark.sql(merge.format(60, 110))


def main() -> None:
    warehouse, expected_path = sys.argv[1], sys.argv[2]
    spark = iceberg_session(warehouse)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    mor = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read'"
    write(spark, "pos_v2", f"'format-version'='2', {mor}")
    write(spark, "dv_v3", f"'format-version'='3', {mor}")
    cow = "'write.delete.mode'='copy-on-write', 'write.update.mode'='copy-on-write'"
    write(spark, "cow_v2", f"'format-version'='2', {cow}")
    write_equality(spark, "eq_v2")
    for version in (2, 3):
        write_update_after_delete(spark, f"upd_v{version}", version)
        write_merges(spark, f"merge_v{version}", version)
    write_partly_replaced(spark, "partial_v3")
    expected = {}
    for name, columns in COLUMNS.items():
        table = f"local.db.{name}"
        history = spark.sql(f"SELECT snapshot_id FROM {table}.history ORDER BY made_current_at").collect()
        files = spark.sql(f"SELECT file FROM {table}.metadata_log_entries ORDER BY timestamp").collect()
        snapshots = []
        for row in history:
            snapshot_id = row.snapshot_id
            rows = spark.sql(f"SELECT {columns} FROM {table} VERSION AS OF {snapshot_id}").collect()
            rows = sorted([list(r) for r in rows], key=row_order)
            snapshots.append({"snapshot_id": snapshot_id, "rows": rows})
        expected[name] = {"metadata": files[-1].file, "snapshots": snapshots}
    with open(expected_path, "w") as handle:
        json.dump(expected, handle)
    spark.stop()


if __name__ == "__main__":
    main()
