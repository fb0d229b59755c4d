"""Spark 3.5 + Iceberg compacting tables it wrote through the server's own catalog (`/_iceberg`).

Run by `tests/end_to_end/test_warehouse_compaction.py` with the Python of the Spark 3.5
environment of `make spark-iceberg`, as `tests/warehouse_spark_job.py` is (same CONFIG_JSON).

For each of `db.c_v2` and `db.c_v3` (merge-on-read: position deletes in v2, deletion vectors
in v3): CREATE TABLE, four small INSERTs, DELETE, UPDATE, then Iceberg's maintenance
procedures `rewrite_position_delete_files` and `rewrite_data_files` (every file, deletes
applied), then one more INSERT. Last, one line `@@DONE {json}`: per table, every snapshot in
commit order with its step, operation and Spark's rows `VERSION AS OF` it, and Spark's own
changelog (`create_changelog_view`) over the first INSERTs and over the compaction, or the
error Spark gave for a range it cannot read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.warehouse_spark_job import CATALOG, MERGE_ON_READ, NAMESPACE, main_snapshot, session, sorted_rows

INSERTS = 4
#: Iceberg's maintenance steps: each commits a `replace` snapshot, or none if it has nothing to do.
COMPACTION = ("rewrite_deletes", "compact")


def steps(table: str, version: int) -> list[tuple[str, str]]:
    name = table.removeprefix(f"{CATALOG}.")
    inserts = [
        (f"insert_{n}", f"INSERT INTO {table} SELECT id, CAST(id % 3 AS STRING), CONCAT('v', id) "
                        f"FROM range({n * 50}, {(n + 1) * 50})")
        for n in range(INSERTS)
    ]  # fmt: skip
    return [
        ("create", f"CREATE TABLE {table} (id bigint, part string, v string) USING iceberg "
                   f"PARTITIONED BY (part) TBLPROPERTIES ('format-version'='{version}', {MERGE_ON_READ})"),
        *inserts,
        ("delete", f"DELETE FROM {table} WHERE id % 5 = 0"),
        ("update", f"UPDATE {table} SET v = CONCAT('u', id) WHERE id % 7 = 0"),
        ("rewrite_deletes", f"CALL {CATALOG}.system.rewrite_position_delete_files("
                            f"table => '{name}', options => map('rewrite-all', 'true'))"),
        ("compact", f"CALL {CATALOG}.system.rewrite_data_files("
                    f"table => '{name}', options => map('rewrite-all', 'true'))"),
        ("insert_after", f"INSERT INTO {table} VALUES (1000, '1', 'after'), (1001, '2', 'after')"),
    ]  # fmt: skip


def changelog(spark: Any, table: str, start: int | None, end: int) -> dict[str, Any]:
    """Spark's change rows after `start` (exclusive; None: from the first snapshot) up to `end`."""
    view = table.replace(".", "_") + f"_{end}"
    name = table.removeprefix(f"{CATALOG}.")
    options = f"'end-snapshot-id', '{end}'" + (f", 'start-snapshot-id', '{start}'" if start else "")
    try:
        spark.sql(
            f"CALL {CATALOG}.system.create_changelog_view(table => '{name}', changelog_view => '{view}', "
            f"options => map({options}))"
        )
        frame = spark.sql(f"SELECT id, part, v, _change_type FROM {view}")
        return {"rows": sorted_rows(frame)}
    except Exception as error:  # what Spark cannot read is recorded, for the test to judge
        return {"error": str(error).splitlines()[0]}


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    spark = session(config)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{NAMESPACE}")
    done: dict[str, Any] = {}
    for version in (2, 3):
        table = f"{CATALOG}.{NAMESPACE}.c_v{version}"
        snapshots: list[dict[str, Any]] = []
        for step, statement in steps(table, version):
            spark.sql(statement)
            snapshot_id = main_snapshot(spark, table)
            if snapshot_id is None or (snapshots and snapshots[-1]["snapshot_id"] == snapshot_id):
                continue  # no snapshot: a CREATE, or a procedure that found nothing to rewrite
            found = spark.sql(f"SELECT operation FROM {table}.snapshots WHERE snapshot_id = {snapshot_id}")
            frame = spark.sql(f"SELECT * FROM {table} VERSION AS OF {snapshot_id}")
            snapshots.append({"step": step, "snapshot_id": snapshot_id, "operation": found.collect()[0][0],
                              "columns": frame.columns, "rows": sorted_rows(frame)})  # fmt: skip
        by_step = {s["step"]: s["snapshot_id"] for s in snapshots}
        compacted = [s for s in snapshots if s["step"] in COMPACTION]
        before_compaction = by_step["update"]
        last_compaction = compacted[-1]["snapshot_id"] if compacted else before_compaction
        done[f"c_v{version}"] = {
            "snapshots": snapshots,
            "changelog_inserts": changelog(spark, table, None, by_step[f"insert_{INSERTS - 1}"]),
            "changelog_compaction": changelog(spark, table, before_compaction, last_compaction),
        }
    print(f"@@DONE {json.dumps(done)}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
