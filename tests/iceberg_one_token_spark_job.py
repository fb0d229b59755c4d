"""Spark 3.5 + Iceberg as a named recipient of `/iceberg`: one token, two shares, each its own catalog.

Run by `tests/end_to_end/test_iceberg_one_token.py` with the Python of the Spark 3.5 environment
that `make spark-iceberg` builds:

    python tests/iceberg_one_token_spark_job.py CONFIG_JSON

CONFIG_JSON holds `uri` (the server's `/iceberg`), `token` (the recipient's bearer token) and
`shares` (share names). Each share is a Spark catalog of Iceberg's REST client with
`warehouse` = the share, so the client takes the prefix `shares/<share>` from the configuration
and sends every later call under it. What Spark saw is printed as one line `@@SEEN {json}`: per
share, its namespaces, its tables and each table's columns. The environment has no AWS SDK, so
the job reads the catalog and the tables' metadata, not their files.
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


def session(config: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.jars", f"{runtime_jar()},{jackson_jar()},{httpclient5_jar()}")
    )
    for share in config["shares"]:
        prefix = f"spark.sql.catalog.{share}"
        builder = (
            builder.config(prefix, "org.apache.iceberg.spark.SparkCatalog")
            .config(f"{prefix}.type", "rest")
            .config(f"{prefix}.uri", config["uri"])
            .config(f"{prefix}.warehouse", share)
            .config(f"{prefix}.token", config["token"])
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    config = json.loads(sys.argv[1])
    spark = session(config)
    seen: dict[str, Any] = {}
    for share in config["shares"]:
        namespaces = [row[0] for row in spark.sql(f"SHOW NAMESPACES IN {share}").collect()]
        tables: dict[str, list[str]] = {}
        for namespace in namespaces:
            for row in spark.sql(f"SHOW TABLES IN {share}.{namespace}").collect():
                name = f"{namespace}.{row['tableName']}"
                columns = spark.table(f"{share}.{name}").schema.fieldNames()
                tables[name] = columns
        seen[share] = {"namespaces": namespaces, "tables": tables}
    print("@@SEEN " + json.dumps(seen), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
