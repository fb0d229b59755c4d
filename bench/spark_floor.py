"""The floor for any Python data source: one that only reads local Parquet files with pyarrow.

`make bench` reads the 2M-row table through it next to the `deltaSharing`
source, so the figures show how much of the gap to `spark.read.parquet` is
Spark's cost of a Python data source (planning in a Python worker, Arrow
batches from each task's Python worker to the JVM) rather than the sharing.
"""

from __future__ import annotations

from typing import Any


def minimal_source(files: list[str]) -> type:
    """A data source class that reads `files` with pyarrow, one partition per core's share.

    Made inside a function so that Spark pickles it by value: its workers need
    not import `bench`.
    """
    import pyarrow.parquet as pq
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Files(InputPartition):
        def __init__(self, paths: list[str]) -> None:
            self.paths = paths

    class Reader(DataSourceReader):
        def __init__(self, parts: int) -> None:
            self.parts = parts

        def partitions(self) -> list[InputPartition]:
            return [Files(files[i :: self.parts]) for i in range(self.parts)]

        def read(self, partition: Any) -> Any:
            for path in partition.paths:
                # Whole files as few large batches: what Spark takes fastest from Python.
                yield from pq.ParquetFile(path).iter_batches(batch_size=1 << 20, use_threads=False)

    class MinimalParquet(DataSource):
        @classmethod
        def name(cls) -> str:
            return "minimalParquet"

        def schema(self) -> Any:
            from pyspark.sql.pandas.types import from_arrow_schema

            return from_arrow_schema(pq.read_schema(files[0]))

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader(int(self.options.get("parts", "2")))

    return MinimalParquet
