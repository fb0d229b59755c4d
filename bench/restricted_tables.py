"""The table of real Parquet bytes the restricted-derivation rows read (about 150 MB in 30 files).

Its row-and-column restriction derives every file, so unlike bench/delta_tables.py's
tables (hard links to one small file) its files are written whole, of rows that hardly
compress. The generator leaves a table it finds complete alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

NATIONS = (*(f"NATION{i:02d}" for i in range(24)), "JAPAN")


def customer_rows(rows: int, seed: int) -> pa.Table:
    """Customers whose `amount` spans 0 to 1000 in every file, so no file's statistics decide it,
    and whose `name` and `comment` are random text (they hardly compress: real bytes to read)."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789 ", dtype="S1")

    def text(width: int) -> pa.Array:
        chars = alphabet[rng.integers(0, len(alphabet), size=rows * width)]
        return pa.array(chars.view(f"S{width}").astype(str))

    return pa.table(
        {
            "id": pa.array(np.arange(seed * rows, (seed + 1) * rows, dtype=np.int64)),
            "amount": pa.array(rng.uniform(0, 1000, rows).round(2)),
            "nation": pa.array(np.array(NATIONS)[rng.integers(0, len(NATIONS), rows)]),
            "name": text(16),
            "comment": text(48),
        }
    )


def make_customer_table(location: Path, files: int, rows_per_file: int) -> int:
    """`files` appends of `rows_per_file` customers each; the bytes of Parquet in its latest version."""
    if not (location / "_delta_log").exists():
        partial = location.with_name(location.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        for index in range(files):
            write_deltalake(str(partial), customer_rows(rows_per_file, index), mode="append")
        partial.rename(location)
    adds = DeltaTable(str(location)).get_add_actions(flatten=True)
    return int(sum(pa.table(adds).column("size_bytes").to_pylist()))
