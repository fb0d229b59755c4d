"""URLs that last the read (issue 51): the lifetime a 100,000-file answer's URLs get, against how long
the Python client, which never refreshes them, takes to read that many files.

The client's pace is measured on a table of many small files (its cost per file, both of its
paths); the 100,000-file read it would take is that pace times 100,000, since it reads one file
after another. The goal is URLs that outlive such a read.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import delta_sharing
import httpx
import pyarrow as pa
from deltalake import write_deltalake

from bench.results import record

SMALL_FILES = 300


def make_small_files(path: Path) -> None:
    """A table of `SMALL_FILES` files of ten rows each (one per partition)."""
    if path.exists():
        return
    ids = pa.array(range(SMALL_FILES * 10), pa.int64())
    rows = pa.table({"id": ids, "part": pa.compute.divide(ids, 10)})
    write_deltalake(str(path), rows, partition_by=["part"])


def lifetime_rows(
    client: httpx.Client, profile: Path, big_table: str, big_files: int, small_table: str
) -> None:
    """The rows: the big answer's URL lifetime, the client's pace per file, the read it implies."""
    answer = client.post(f"/shares/bench/schemas/default/tables/{big_table}/query", json={})
    answer.raise_for_status()
    now = time.time()
    lines = answer.text.splitlines()
    lifetime = min(json.loads(line)["file"]["expirationTimestamp"] for line in lines[2:]) / 1000 - now
    url = f"{profile}#bench.default.{small_table}"
    paces = {}
    for label, delta in (("delta path (default)", True), ("parquet path", False)):
        start = time.perf_counter()
        frame = delta_sharing.load_as_pandas(url, use_delta_format=None if delta else False)
        assert len(frame) == SMALL_FILES * 10
        paces[label] = (time.perf_counter() - start) / SMALL_FILES
    slowest = max(paces.values()) * big_files
    for label, pace in paces.items():
        record(f"load_as_pandas per file, {label}", f"{pace * 1000:.1f} ms")
    record(
        f"URL lifetime of a {big_files:,}-file answer / its read at the slower pace",
        f"{lifetime:,.0f} s / {slowest:,.0f} s",
        "lifetime > read",
        "met" if lifetime > slowest else "missed",
    )
