"""The seeds' pipeline on PySpark: TPC-H-like data → a Delta table and an Iceberg table →
one share → the recipient query through Spark and pandas, checked against the source.

    python examples/tpch_pipeline.py --scale 0.01 --workdir .pipeline

Delta and Iceberg JVM jars cannot be downloaded on this project's machines, so Spark
writes the Parquet files in parallel and the driver commits them: deltalake's write
transaction for `orders`, pyiceberg's `add_files` for `customer`. On a cluster with the
jars, the same tables come from `USING delta` / `USING iceberg` (see docs/spark.md, "The PySpark pipeline").
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

THRESHOLD = 1_000_000
SEGMENTS = "array('AUTOMOBILE','BUILDING','FURNITURE','HOUSEHOLD','MACHINERY')"
PRIORITIES = "array('1-URGENT','2-HIGH','3-MEDIUM','4-NOT SPECIFIED','5-LOW')"


def step(message: str) -> None:
    print(f"[pipeline] {message}", flush=True)


def generate(spark, scale: float):  # noqa: ANN001, ANN201 - Spark objects
    """customer and orders with TPC-H's columns and value ranges, deterministic per key."""
    customers = max(int(150_000 * scale), 10)
    orders = customers * 10
    customer = spark.range(1, customers + 1).selectExpr(
        "id AS c_custkey",
        "concat('Customer#', lpad(cast(id AS string), 9, '0')) AS c_name",
        "substr(sha2(cast(id AS string), 256), 1, 20) AS c_address",
        "cast(pmod(hash(id, 1), 25) AS int) AS c_nationkey",
        "concat(cast(10 + pmod(hash(id, 2), 25) AS string), '-',"
        " lpad(cast(pmod(hash(id, 3), 1000) AS string), 3, '0'), '-',"
        " lpad(cast(pmod(hash(id, 4), 10000) AS string), 4, '0')) AS c_phone",
        "round(-999.99 + pmod(hash(id, 5), 1099999) / 100.0, 2) AS c_acctbal",
        f"element_at({SEGMENTS}, cast(pmod(hash(id, 6), 5) + 1 AS int)) AS c_mktsegment",
    )
    return customer, orders_between(spark, 1, orders, customers)


def orders_between(spark, first: int, last: int, customers: int):  # noqa: ANN001, ANN201 - Spark objects
    """orders `first`..`last` (keys), each of one of `customers`, deterministic per key."""
    return spark.range(first, last + 1).selectExpr(
        "id AS o_orderkey",
        f"cast(pmod(hash(id, 7), {customers}) + 1 AS bigint) AS o_custkey",
        "element_at(array('O','F','P'), cast(pmod(hash(id, 8), 3) + 1 AS int)) AS o_orderstatus",
        "round(900.0 + pmod(hash(id, 9), 50000000) / 100.0, 2) AS o_totalprice",
        "date_add(date'1992-01-01', cast(pmod(hash(id, 10), 2405) AS int)) AS o_orderdate",
        f"element_at({PRIORITIES}, cast(pmod(hash(id, 11), 5) + 1 AS int)) AS o_orderpriority",
        "concat('Clerk#', lpad(cast(pmod(hash(id, 12), 1000) + 1 AS string), 9, '0')) AS o_clerk",
        "0 AS o_shippriority",
        "substr(sha2(cast(id AS string), 224), 1, 30) AS o_comment",
    )


def write_delta(spark_frame, location: Path) -> None:  # noqa: ANN001
    """Spark writes Parquet in parallel; the driver commits the files as one Delta version."""
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction

    spark_frame.write.mode("overwrite").parquet(str(location))
    files = sorted(p for p in location.glob("*.parquet"))
    schema = pq.read_schema(files[0])
    actions = []
    for path in files:
        rows = pq.ParquetFile(path).metadata.num_rows
        actions.append(
            AddAction(
                path.name,
                path.stat().st_size,
                {},
                int(path.stat().st_mtime * 1000),
                True,
                json.dumps({"numRecords": rows}),
            )
        )
    DeltaTable.create(str(location), schema=schema, mode="overwrite")
    DeltaTable(str(location)).create_write_transaction(actions, mode="append", schema=schema)


def write_iceberg(spark_frame, catalog, identifier: str, location: Path) -> None:  # noqa: ANN001
    """Spark writes Parquet in parallel; pyiceberg adds the files to a new table's first snapshot."""
    spark_frame.write.mode("overwrite").parquet(str(location))
    files = sorted(str(p) for p in location.glob("*.parquet"))
    namespace = identifier.split(".")[0]
    catalog.create_namespace_if_not_exists(namespace)
    if catalog.table_exists(identifier):
        catalog.drop_table(identifier)
    table = catalog.create_table(
        identifier, pq.read_schema(files[0]), location=str(location.parent / "customer")
    )
    table.add_files(files)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli(config: Path, *args: str) -> str:
    command = [sys.executable, "-m", "sharing_server", "--config", str(config), *args]
    step("$ sharing-server " + " ".join(f'"{a}"' if " " in a or ":" in a else a for a in args))
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 - our own CLI
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip())
    return result.stdout


RECIPIENT_QUERY = """
    SELECT c.c_custkey, c.c_name, SUM(o.o_totalprice) AS total
    FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey
    GROUP BY c.c_custkey, c.c_name
    HAVING SUM(o.o_totalprice) > {threshold}
    ORDER BY total DESC, c.c_custkey
"""


def recipient_query(spark, customer, orders, threshold: float):  # noqa: ANN001, ANN201
    customer.createOrReplaceTempView("customer")
    orders.createOrReplaceTempView("orders")
    return [tuple(row) for row in spark.sql(RECIPIENT_QUERY.format(threshold=threshold)).collect()]


def run(spark, workdir: Path, scale: float, threshold: float = THRESHOLD) -> dict[str, int]:  # noqa: ANN001
    import delta_sharing
    import pandas as pd

    workdir = workdir.resolve()
    buckets = workdir / "buckets"
    port = free_port()
    config = workdir / "sharing.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"""
[server]
host = "127.0.0.1"
port = {port}
data_dir = "{workdir / ".sharing"}"

[storage]
type = "local"
root = "{buckets}"

[catalogs.testice]
type = "sql"
uri = "sqlite:///{workdir / "iceberg.db"}"
warehouse = "{(buckets / "testice").as_uri()}"
""")
    step(f"generating TPC-H-like data at scale {scale}")
    customer, orders = generate(spark, scale)
    step("writing orders as a Delta table (bucket testdelta, path tpch/orders)")
    write_delta(orders, buckets / "testdelta" / "tpch" / "orders")
    step("writing customer as an Iceberg table (warehouse testice, tpch.customer)")
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "testice", uri=f"sqlite:///{workdir / 'iceberg.db'}", warehouse=(buckets / "testice").as_uri()
    )
    write_iceberg(customer, catalog, "tpch.customer", buckets / "testice" / "tpch" / "customer" / "data")

    for share in ("test",):
        existing = cli(config, "share", "list")
        if any(line.split("\t")[0] == share for line in existing.splitlines()):
            cli(config, "share", "remove", share)
    cli(config, "share", "create", "test", "tpch", "orders:delta:testdelta:tpch/orders")
    cli(config, "share", "update", "test", "--add", "tpch:customer:uniform:testice:tpch:customer")
    print(cli(config, "share", "info", "test"), end="")
    profile = workdir / "test.share"
    cli(
        config,
        "token",
        "create",
        "test",
        "--expires",
        "1d",
        "--description",
        "pipeline",
        "--profile",
        str(profile),
    )

    step(f"serving the share on 127.0.0.1:{port}")
    log = (workdir / "server.log").open("wb")
    server = subprocess.Popen(  # noqa: S603 - our own server
        [sys.executable, "-m", "sharing_server", "--config", str(config), "serve"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(port)
        expected = recipient_query(spark, customer, orders, threshold)
        step(f"source query: {len(expected)} customers with SUM(totalprice) > {threshold:,.0f}")

        step("recipient: Spark over the share (format deltaSharing)")
        shared_customer = spark.read.format("deltaSharing").load(f"{profile}#test.tpch.customer")
        shared_orders = spark.read.format("deltaSharing").load(f"{profile}#test.tpch.orders")
        through_spark = recipient_query(spark, shared_customer, shared_orders, threshold)

        step("recipient: pandas over the share (delta_sharing.load_as_pandas)")
        pd_customer = delta_sharing.load_as_pandas(f"{profile}#test.tpch.customer")
        pd_orders = delta_sharing.load_as_pandas(f"{profile}#test.tpch.orders")
        joined = pd_customer.merge(pd_orders, left_on="c_custkey", right_on="o_custkey")
        totals = joined.groupby(["c_custkey", "c_name"], as_index=False)["o_totalprice"].sum()
        totals = totals[totals["o_totalprice"] > threshold]
        totals = totals.sort_values(["o_totalprice", "c_custkey"], ascending=[False, True])
        through_pandas = list(totals.itertuples(index=False, name=None))
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()

    def rounded(rows: list[tuple]) -> list[tuple]:
        return [(int(k), str(n), round(float(t), 2)) for k, n, t in rows]

    if rounded(through_spark) != rounded(expected):
        raise AssertionError("Spark over the share disagrees with the source tables")
    if rounded(through_pandas) != rounded(expected):
        raise AssertionError("pandas over the share disagrees with the source tables")
    for key, name, total in rounded(expected)[:5]:
        print(f"    {key:>8}  {name}  {total:>14,.2f}")
    step(f"OK: Spark and pandas over the share equal the source query ({len(expected)} rows)")
    pd.set_option("display.width", 120)
    return {"customers": customer.count(), "orders": orders.count(), "result_rows": len(expected)}


def _wait_for(port: int, timeout: float = 30) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("the sharing server did not start")


def local_spark(app_name: str):  # noqa: ANN201 - pyspark is imported late, only by the scripts
    """A local Spark session on loopback; its Python workers run this interpreter, which has our source."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[*]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scale", type=float, default=0.01, help="TPC-H scale factor (1 = 150,000 customers)"
    )
    parser.add_argument("--workdir", type=Path, default=Path(".pipeline"))
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    args = parser.parse_args()
    spark = local_spark("tpch-sharing-pipeline")
    try:
        print(run(spark, args.workdir, args.scale, args.threshold))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
