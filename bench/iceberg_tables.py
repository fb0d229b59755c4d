"""The Iceberg tables and data files the benchmarks read, generated rather than shipped.

pyiceberg writes the embedded catalog's tables; the equality-delete data set is
plain Parquet with Iceberg field ids, its files kept between runs. Iceberg tables
with row-level deletes need a real engine: Spark writes them once, into .cache/.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.rows import sample_rows

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def make_iceberg_tables(catalog: Catalog, warehouse: Path, rows: pa.Table, files: int) -> None:
    """In namespace `bench`: `readable`, `rows` in 8 files, and `many`, of `files` data files."""
    catalog.create_namespace("bench")
    readable = catalog.create_table("bench.readable", rows.schema)
    for part in range(8):
        readable.append(rows.slice(part * 250_000, 250_000))
    many = catalog.create_table("bench.many", pa.schema([("id", pa.int64()), ("v", pa.string())]))
    # Inside the table's own location, where the server serves files from.
    source = warehouse / "bench.db" / "many" / "data"
    source.mkdir(parents=True, exist_ok=True)
    sample = sample_rows()
    paths = []
    for i in range(files):
        path = source / f"part-{i:06d}.parquet"
        pq.write_table(sample, path)
        paths.append(str(path))
    many.add_files(paths)


#: Rows of one data file of the equality-delete data set: some 30 MB of Parquet.
EQUALITY_FILE_ROWS = 400_000


def make_equality_data(location: Path, megabytes: int) -> list[Path]:
    """Parquet data files of about `megabytes` in all, with Iceberg field ids, for equality deletes.

    Columns: `id` (long, field 1, unique), `name` (string, field 2, 100,000 distinct)
    and eight columns of random doubles (incompressible, so that bytes mean something).
    """
    import numpy as np

    def column(name: str, kind: pa.DataType, field_id: int) -> pa.Field:
        return pa.field(name, kind, metadata={b"PARQUET:field_id": str(field_id).encode()})

    fields = [column("id", pa.int64(), 1), column("name", pa.string(), 2)]
    fields += [column(f"x{i}", pa.float64(), 3 + i) for i in range(8)]
    schema = pa.schema(fields)
    location.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    random = np.random.default_rng(7)
    start = 0
    while sum(f.stat().st_size for f in files) < megabytes * 1_000_000:
        path = location / f"data-{len(files):04d}.parquet"
        ids = np.arange(start, start + EQUALITY_FILE_ROWS, dtype=np.int64)
        if not path.exists():
            names = pc.binary_join_element_wise("n-", pa.array(ids % 100_000).cast(pa.string()), "")
            values = [pa.array(random.random(len(ids))) for _ in range(8)]
            pq.write_table(pa.Table.from_arrays([pa.array(ids), names, *values], schema=schema), path)
        files.append(path)
        start += EQUALITY_FILE_ROWS
    return files


# Iceberg tables with deletes, written by Spark 3.5 + Iceberg (`make spark-iceberg`) in a
# subprocess and kept in .cache/ by the writer's hash, as the tests keep theirs.
CACHE = Path(__file__).resolve().parents[1] / ".cache"
SPARK_ICEBERG_PYTHON = CACHE / "spark-iceberg" / "venv" / "bin" / "python"
DELETES_WRITER = Path(__file__).with_name("iceberg_deletes_writer.py")


class SparkUnavailable(Exception):
    """The Spark-written tables are not there and cannot be written here."""


def spark_iceberg_deletes(files: int) -> Path:
    """BASE/buckets/warehouse, the tables of bench/iceberg_deletes_writer.py, and BASE/summary.json.

    Written once per version of the writer and number of files (a few minutes).
    """
    key = hashlib.sha256(DELETES_WRITER.read_bytes()).hexdigest()[:12]
    base = CACHE / "bench-iceberg-deletes" / f"{key}-{files}"
    if (base / "summary.json").exists():
        return base
    if not SPARK_ICEBERG_PYTHON.exists():
        raise SparkUnavailable("the Spark 3.5 + Iceberg environment is missing: run `make spark-iceberg`")
    shutil.rmtree(base, ignore_errors=True)
    (base / "buckets").mkdir(parents=True)
    draft, log = base / "summary.draft", base / "writer.log"
    with log.open("w") as output:
        done = subprocess.run(
            [
                str(SPARK_ICEBERG_PYTHON),
                str(DELETES_WRITER),
                str(base / "buckets" / "warehouse"),
                str(draft),
                str(files),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=1800,
            check=False,
        )
    if done.returncode != 0:
        raise SparkUnavailable(f"the Spark writer failed (exit {done.returncode}): see {log}")
    draft.rename(base / "summary.json")  # the cache is complete only now
    return base
