"""`HadoopCatalog`: walking a Hadoop-layout warehouse, and a Spark-written one shared end to end.

The unit tests arrange the layout by hand (pyiceberg writes the metadata files); the end-to-end
test runs Spark 3.5 + Iceberg (`make spark-iceberg`, the session of `testbed/spark_iceberg/`)
writing a `type=hadoop` warehouse inside the server's local storage, shares the table through a
`HadoopCatalog` and compares what `delta_sharing` reads with Spark's own rows.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

import pytest
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.types import LongType, NestedField

from share_store.table_sources.hadoop import HadoopCatalog, metadata_version, valid_name
from tests.conftest import ROOT, SPARK_ICEBERG_PYTHON

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))


def write_metadata(table: Path, version: int, gz: bool = False) -> None:
    """`vN.metadata.json` (or `vN.gz.metadata.json`) of a one-column table whose property `n` is N."""
    metadata = new_table_metadata(
        SCHEMA, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, str(table), properties={"n": str(version)}
    )
    name = f"v{version}.gz.metadata.json" if gz else f"v{version}.metadata.json"
    (table / "metadata").mkdir(parents=True, exist_ok=True)
    ToOutputFile.table_metadata(metadata, PyArrowFileIO().new_output(str(table / "metadata" / name)))


def hint(table: Path, text: str) -> None:
    (table / "metadata").mkdir(parents=True, exist_ok=True)
    (table / "metadata" / "version-hint.text").write_text(text)


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """sales/eu/orders (v1, v2, hint 2), sales/eu/returns (only a hint), sales/us (empty), db/t (v1)."""
    root = tmp_path / "warehouse"
    orders = root / "sales" / "eu" / "orders"
    write_metadata(orders, 1)
    write_metadata(orders, 2)
    hint(orders, "2\n")
    hint(root / "sales" / "eu" / "returns", "1")
    (root / "sales" / "us").mkdir(parents=True)
    (root / "sales" / "eu" / "orders" / "data").mkdir()
    write_metadata(root / "db" / "t", 1)
    (root / "notes.txt").write_text("not a namespace")
    return root


def version_of(catalog: HadoopCatalog, identifier: Any) -> int:
    return int(catalog.load_table(identifier).metadata.properties["n"])


def test_names() -> None:
    assert [metadata_version(n) for n in ("v3.metadata.json", "v12.gz.metadata.json")] == [3, 12]
    assert metadata_version("00001-abc.metadata.json") is None
    assert metadata_version("v1.metadata.json.tmp") is None
    assert valid_name("orders") and not any(valid_name(n) for n in ("", ".", "..", "a/b", "a\\b"))


def test_namespaces_and_tables(warehouse: Path) -> None:
    catalog = HadoopCatalog("wh", warehouse=str(warehouse))
    assert catalog.list_namespaces() == [("db",), ("sales",)]
    assert catalog.list_namespaces("sales") == [("sales", "eu"), ("sales", "us")]
    assert catalog.list_namespaces(("sales", "eu")) == []
    assert catalog.list_tables("sales.eu") == [("sales", "eu", "orders"), ("sales", "eu", "returns")]
    assert catalog.list_tables(("sales", "us")) == []
    assert catalog.list_tables("db") == [("db", "t")]
    assert catalog.namespace_exists("sales.eu") and catalog.namespace_exists(("sales",))
    assert not catalog.namespace_exists("sales.eu.orders")  # a table, not a namespace
    assert not catalog.namespace_exists("nowhere")
    assert catalog.table_exists("sales.eu.orders") and catalog.table_exists(("db", "t"))
    assert not catalog.table_exists("sales.us") and not catalog.table_exists("sales.eu.missing")
    assert catalog.load_namespace_properties("sales.eu") == {"location": str(warehouse / "sales" / "eu")}


def test_load_follows_the_hint(warehouse: Path) -> None:
    catalog = HadoopCatalog("wh", warehouse=f"file://{warehouse}")
    table = catalog.load_table("sales.eu.orders")
    assert table.name() == ("sales", "eu", "orders")
    assert table.metadata_location == f"file://{warehouse}/sales/eu/orders/metadata/v2.metadata.json"
    assert int(table.metadata.properties["n"]) == 2
    # A hint lagging behind a commit: the next versions are followed, as Iceberg does.
    orders = warehouse / "sales" / "eu" / "orders"
    write_metadata(orders, 3, gz=True)
    write_metadata(orders, 4)
    assert version_of(catalog, ("sales", "eu", "orders")) == 4
    hint(orders, "4")
    assert version_of(catalog, "sales.eu.orders") == 4
    assert catalog.load_table("sales.eu.orders").metadata_location.endswith("/v4.metadata.json")


def test_hint_missing_or_wrong_gives_the_highest(warehouse: Path) -> None:
    catalog = HadoopCatalog("wh", warehouse=str(warehouse))
    orders = warehouse / "sales" / "eu" / "orders"
    write_metadata(orders, 10, gz=True)  # numerically highest, not lexically
    (orders / "metadata" / "version-hint.text").unlink()
    assert version_of(catalog, "sales.eu.orders") == 10
    hint(orders, "7")  # names a file that is not there
    assert version_of(catalog, "sales.eu.orders") == 10
    hint(orders, "garbage")
    assert version_of(catalog, "sales.eu.orders") == 10
    hint(orders, "1")  # an old hint: followed while the next version exists (2), not past a gap
    assert version_of(catalog, "sales.eu.orders") == 2
    assert version_of(catalog, ("db", "t")) == 1  # no hint at all


def test_missing_and_refused(warehouse: Path) -> None:
    catalog = HadoopCatalog("wh", warehouse=str(warehouse))
    with pytest.raises(NoSuchTableError):
        catalog.load_table("sales.eu.missing")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("sales.eu.returns")  # a hint, and no metadata file to load
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_table("nowhere.t")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nowhere")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_namespaces("sales.eu.orders")
    # Outside the warehouse: a table there is never reached.
    write_metadata(warehouse.parent / "outside", 1)
    for identifier in (
        ("..", "outside"),
        ("sales", "..", "..", "outside"),
        ("a/../..", "outside"),
        "..outside",
    ):
        assert not catalog.table_exists(identifier)
        with pytest.raises(NoSuchTableError):
            catalog.load_table(identifier)
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables(("..",))
    assert not catalog.namespace_exists("..")


def test_writes_are_refused(warehouse: Path) -> None:
    catalog = HadoopCatalog("wh", warehouse=str(warehouse))
    with pytest.raises(NotImplementedError):
        catalog.create_namespace("new")
    with pytest.raises(NotImplementedError):
        catalog.drop_table("db.t")
    with pytest.raises(NotImplementedError):
        catalog.register_table(("db", "u"), str(warehouse / "db" / "t" / "metadata" / "v1.metadata.json"))
    assert not (warehouse / "new").exists()


def test_s3_warehouse_paths() -> None:
    catalog = HadoopCatalog("wh", warehouse="s3://bucket/some/prefix/", **{"s3.region": "us-east-1"})
    assert catalog._path(("db", "t")) == "bucket/some/prefix/db/t"
    assert catalog._uri(("db", "t", "metadata", "v1.metadata.json")) == (
        "s3://bucket/some/prefix/db/t/metadata/v1.metadata.json"
    )


# -- end to end: Spark 3.5 + Iceberg writes, the server shares -------------------------------------------

SPARK_JOB = """
import json, sys
sys.path.insert(0, sys.argv[2])
from testbed.spark_iceberg.session import iceberg_session

spark = iceberg_session(sys.argv[1])
table = "local.db.events"


def emit(tag):
    rows = [list(r) for r in spark.sql(f"SELECT * FROM {table}").collect()]
    columns = spark.table(table).columns
    print("@@" + tag + " " + json.dumps({"columns": columns, "rows": rows}), flush=True)


spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
spark.sql(
    f"CREATE TABLE {table} (id bigint, name string) USING iceberg TBLPROPERTIES ("
    "'format-version'='2', 'write.delete.mode'='merge-on-read')"
)
spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
spark.sql(f"INSERT INTO {table} VALUES (4, 'd'), (5, 'e')")
spark.sql(f"DELETE FROM {table} WHERE id IN (2, 5)")
spark.sql(f"ALTER TABLE {table} ADD COLUMN score double")
spark.sql(f"INSERT INTO {table} VALUES (6, 'f', 1.5), (7, NULL, 2.5)")
emit("FIRST")
sys.stdin.readline()
spark.sql(f"UPDATE {table} SET score = 9.0 WHERE id = 1")
spark.sql(f"INSERT INTO {table} VALUES (8, 'h', 3.5)")
emit("SECOND")
spark.stop()
"""


def read_tagged(stream: IO[str], tag: str, log: list[str]) -> dict[str, Any]:
    """The JSON of the job's next `@@TAG` line, keeping the other lines for a failure's message."""
    for line in stream:
        if line.startswith(f"@@{tag} "):
            return json.loads(line[len(tag) + 3 :])
        log.append(line)
    raise AssertionError(f"the Spark job ended before @@{tag}:\n" + "".join(log[-60:]))


def cell(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value) if hasattr(value, "__index__") else value


def rows_key(row: list[Any]) -> list[tuple[bool, Any]]:
    return [(value is None, value) for value in row]


def shared_rows(profile: str, columns: list[str], version: int | None = None) -> list[list[Any]]:
    import delta_sharing

    frame = delta_sharing.load_as_pandas(f"{profile}#hadoop.db.events", version=version)
    assert list(frame.columns) == columns
    records = frame.to_dict("records")
    return sorted(([cell(r[c]) for c in columns] for r in records), key=rows_key)


def spark_rows(emitted: dict[str, Any]) -> list[list[Any]]:
    return sorted(([cell(v) for v in row] for row in emitted["rows"]), key=rows_key)


@pytest.mark.skipif(not SPARK_ICEBERG_PYTHON.exists(), reason="run `make spark-iceberg`")
def test_spark_hadoop_warehouse_shared(tmp_path: Path) -> None:
    from share_store.model import parse_create_args
    from tests.conftest import deploy

    root = tmp_path / "buckets"
    warehouse = root / "lake" / "warehouse"
    warehouse.mkdir(parents=True)
    job_path = tmp_path / "hadoop_job.py"
    job_path.write_text(SPARK_JOB)
    job = subprocess.Popen(
        [str(SPARK_ICEBERG_PYTHON), str(job_path), str(warehouse), str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    log: list[str] = []
    # The documented grammar, as a provider writes it: the registry makes the HadoopCatalog itself.
    deployment = deploy(
        tmp_path / "server",
        {"type": "local", "root": str(root)},
        catalogs={"sparkwh": {"backend": {"type": "hadoop", "warehouse": str(warehouse)}}},
        env={"SHARING_ICEBERG_CACHE_BUCKET": "sharing-cache"},
    )
    try:
        assert job.stdout is not None and job.stdin is not None
        first = read_tagged(job.stdout, "FIRST", log)
        catalog = HadoopCatalog("sparkwh", warehouse=str(warehouse))
        assert catalog.list_namespaces() == [("db",)]
        assert catalog.list_tables("db") == [("db", "events")]
        loaded = catalog.load_table("db.events")
        hinted = (warehouse / "db" / "events" / "metadata" / "version-hint.text").read_text().strip()
        assert loaded.metadata_location.endswith(f"/v{hinted}.metadata.json")
        summaries = [snapshot.summary for snapshot in loaded.snapshots() if snapshot.summary]
        assert any(s.additional_properties.get("added-position-delete-files") for s in summaries)
        assert isinstance(deployment.catalogs.catalog("sparkwh"), HadoopCatalog)
        specs = parse_create_args(["db", "events:uniform:sparkwh:db:events"])
        deployment.store.create_share("hadoop", specs, history_shared=True)
        profile = deployment.profile("hadoop")

        assert shared_rows(profile, first["columns"]) == spark_rows(first)
        job.stdin.write("go\n")
        job.stdin.flush()
        second = read_tagged(job.stdout, "SECOND", log)
        assert job.wait(timeout=120) == 0
        assert spark_rows(second) != spark_rows(first)
        assert shared_rows(profile, second["columns"]) == spark_rows(second)
        assert len(catalog.load_table("db.events").snapshots()) == len(loaded.snapshots()) + 2
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        deployment.server.stop()
        deployment.store.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
