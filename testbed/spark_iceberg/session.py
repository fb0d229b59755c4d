"""A local Spark 3.5 session with Iceberg, in the environment `setup.sh` builds.

    from testbed.spark_iceberg.session import iceberg_session

    spark = iceberg_session("/abs/path/warehouse")  # catalog `local`, Hadoop layout
    spark.sql("CREATE TABLE local.db.t (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3')")

Run with `.cache/spark-iceberg/venv/bin/python` (`make spark-iceberg`): the project's own
environment has Spark 4, for which this Iceberg runtime is not built.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Iceberg's Spark runtime for Spark 3.5 and Scala 2.12, the Scala of pyspark 3.5's jars.
RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-*.jar"
#: The shaded Jackson that runtime needs, which setup.sh writes beside the venv.
HTTPCLIENT5_JAR = "iceberg-httpclient5.jar"
JACKSON_JAR = "iceberg-jackson.jar"


def runtime_jar() -> Path:
    """The Iceberg Spark runtime jar shipped in the `snowpark-connect-deps-iceberg` wheel."""
    import snowpark_connect_deps_iceberg

    found = sorted((Path(snowpark_connect_deps_iceberg.__file__).parent / "jars").glob(RUNTIME_JAR))
    if not found:
        raise RuntimeError(f"no {RUNTIME_JAR} in snowpark-connect-deps-iceberg: run `make spark-iceberg`")
    return found[-1]


def jackson_jar() -> Path:
    """The relocated Jackson jar, in the folder that holds this venv (`setup.sh DIR` makes DIR/venv)."""
    jar = Path(sys.prefix).parent / JACKSON_JAR
    if not jar.is_file():
        raise RuntimeError(f"{jar} is missing: run `make spark-iceberg`")
    return jar


def httpclient5_jar() -> Path:
    """HttpClient 5 relocated for Iceberg's REST client (`relocate_httpclient5.py`), beside this venv."""
    jar = Path(sys.prefix).parent / HTTPCLIENT5_JAR
    if not jar.is_file():
        raise RuntimeError(f"{jar} is missing: run `make spark-iceberg`")
    return jar


def iceberg_session(warehouse: str, cores: int = 2) -> SparkSession:
    """A local Spark session whose catalog `local` keeps Iceberg tables under `warehouse`.

    The Hadoop catalog needs no metastore: each table is a folder with its metadata files,
    which the tests register in their own catalogs. Iceberg's SQL extensions add the
    procedures and `MERGE`/`UPDATE`/`DELETE` planning for row-level deletes. The UI is off and
    the log quiet: the session only writes fixtures.
    """
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .config("spark.ui.enabled", "false")
        .config("spark.jars", f"{runtime_jar()},{jackson_jar()}")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.local", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.local.type", "hadoop")
        .config("spark.sql.catalog.local.warehouse", warehouse)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
