"""Spark 3.5 + Iceberg views through the server's own catalog (`/_iceberg`): CREATE VIEW, SELECT,
CREATE OR REPLACE VIEW, SHOW VIEWS, DROP VIEW.

Run by `tests/end_to_end/test_warehouse_views.py` with the Python of the Spark 3.5 environment
(`make spark-iceberg`), with the CONFIG_JSON of `warehouse_spark_job.py` (`uri`, `warehouse`,
`credential`, `oauth2_server_uri`). Prints one line `@@VIEWS {json}`: what each step read, and the
view's metadata location after the create and after the replace (the catalog's answer to Spark).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from warehouse_spark_job import CATALOG, session

NAMESPACE = "vdb"


def rows(spark: Any, query: str) -> list[list[Any]]:
    return sorted([list(row) for row in spark.sql(query).collect()], key=str)


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    spark = session(config)
    ns = f"{CATALOG}.{NAMESPACE}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, name STRING) USING iceberg")
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    found: dict[str, Any] = {}
    spark.sql(f"CREATE VIEW {ns}.v AS SELECT id FROM {ns}.t WHERE id > 1")
    found["created"] = rows(spark, f"SELECT * FROM {ns}.v")
    spark.sql(f"CREATE OR REPLACE VIEW {ns}.v AS SELECT id, name FROM {ns}.t WHERE id < 3")
    found["replaced"] = rows(spark, f"SELECT * FROM {ns}.v")
    found["shown"] = [row[1] for row in spark.sql(f"SHOW VIEWS IN {ns}").collect()]
    found["tables"] = [row[1] for row in spark.sql(f"SHOW TABLES IN {ns}").collect()]
    spark.sql(f"DROP VIEW {ns}.v")
    found["after_drop"] = [row[1] for row in spark.sql(f"SHOW VIEWS IN {ns}").collect()]
    print("@@VIEWS " + json.dumps(found), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
