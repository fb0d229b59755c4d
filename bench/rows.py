"""The rows of the generated tables: 100 in each file of the many-file tables, 2M in the one read whole."""

from __future__ import annotations

import pyarrow as pa

READABLE_ROWS = 2_000_000


def sample_rows() -> pa.Table:
    """The 100 rows of every data file in the many-file tables (the schema of delta_tables.BENCH_SCHEMA)."""
    return pa.table({"id": pa.array(range(100), pa.int64()), "v": [f"x{i}" for i in range(100)]})


def readable_rows() -> pa.Table:
    """The 2M rows of the table read whole, through the share and directly."""
    return pa.table(
        {
            "id": pa.array(range(READABLE_ROWS), pa.int64()),
            "amount": pa.array([i * 0.5 for i in range(READABLE_ROWS)]),
            "name": pa.array([f"customer-{i % 50000}" for i in range(READABLE_ROWS)]),
        }
    )
