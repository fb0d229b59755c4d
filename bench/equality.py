"""Iceberg equality deletes resolved to row positions, in this process: time per GB of data scanned."""

from __future__ import annotations

import time

import pyarrow as pa

from bench.iceberg_tables import EQUALITY_FILE_ROWS, make_equality_data
from bench.paths import DATA
from bench.results import record


def bench_equality_deletes(megabytes: int, keys: int = 100_000) -> None:
    """Equality deletes resolved to row positions (in this process): time per GB of data files scanned.

    `keys` deleted keys, half of them in the data, against some `megabytes` of Parquet
    data files of ten columns, on a bigint column, a string column, and both.
    """
    import io

    import numpy as np
    import pyarrow.parquet as pq
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField, StringType

    from share_store.iceberg.equality.deadline import Deadline
    from share_store.iceberg.equality.index import EqualityDelete, EqualityIndex
    from share_store.iceberg.equality.positions import EqualityResolver

    files = make_equality_data(DATA / "equality", megabytes)
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "name", StringType()))
    chosen = np.random.default_rng(3).choice(2 * len(files) * EQUALITY_FILE_ROWS, keys, replace=False)
    columns = {
        1: pa.field("id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        2: pa.field("name", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    }
    values = {1: pa.array(chosen), 2: pa.array([f"n-{k % 100_000}" for k in chosen])}

    def data_file(
        path: str, content: DataFileContent, rows: int, size: int, ids: list[int] | None
    ) -> DataFile:
        file = DataFile.from_args(
            content=content, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
            record_count=rows, file_size_in_bytes=size, equality_ids=ids,
        )  # fmt: skip
        file.spec_id = 0
        return file

    data = [
        data_file(str(p), DataFileContent.DATA, EQUALITY_FILE_ROWS, p.stat().st_size, None) for p in files
    ]
    for label, ids in (("a bigint column", [1]), ("a string column", [2]), ("bigint + string", [1, 2])):
        sink = io.BytesIO()
        table = pa.Table.from_arrays([values[i] for i in ids], schema=pa.schema([columns[i] for i in ids]))
        pq.write_table(table, sink)
        content = sink.getvalue()
        delete = data_file("keys.parquet", DataFileContent.EQUALITY_DELETES, keys, len(content), ids)
        resolver = EqualityResolver(
            EqualityIndex([EqualityDelete(delete, 2, is_global=True)], schema),
            {file.file_path: 1 for file in data},
            lambda _path, content=content: content,
            lambda path: open(path, "rb"),  # the resolver closes it
            Deadline(600),
        )
        wall, cpu = time.perf_counter(), time.process_time()
        deleted = sum(len(resolver.positions(file)) for file in data)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        gigabytes = resolver.resolution.bytes_scanned / 1e9
        assert deleted == resolver.resolution.rows_deleted > 0
        record(
            f"equality deletes, {keys:,} keys on {label}: per GB scanned",
            f"{wall / gigabytes:.2f} s ({cpu / gigabytes:.2f} s CPU)",
        )
    rows = len(data) * EQUALITY_FILE_ROWS
    record("of which data scanned", f"{gigabytes:.2f} GB, {rows / 1e6:.1f}M rows")
