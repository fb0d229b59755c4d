"""How a table's files are packed into Spark partitions, for the batch source and the stream alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

if TYPE_CHECKING:
    from pyspark_delta_sharing.files import TableLayout

#: Spark partitions hold files up to about this many bytes, each file counted
#: as OPEN_COST_BYTES more (Spark's own defaults for Parquet files).
MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024


@dataclass
class FilePartition(InputPartition):
    """Files for one task, with what reading them needs from the listing that named them."""

    files: list[dict[str, Any]]
    layout: TableLayout | None = None
    #: The version listed, to ask for the same files again when their URLs expire.
    version: int | None = None


def plan_partitions(files: list[dict[str, Any]], parallelism: int) -> list[list[dict[str, Any]]]:
    """Files packed into partitions as Spark packs Parquet files (largest first, by bytes + open cost).

    Like Spark, a table small for its `parallelism` is spread over that many
    partitions and no more: each Python task costs a round of setup in Spark.
    """
    total = sum(f["size"] + OPEN_COST_BYTES for f in files)
    target = min(MAX_PARTITION_BYTES, max(OPEN_COST_BYTES, total // max(1, parallelism)))
    groups: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for file in sorted(files, key=lambda f: f["size"], reverse=True):
        if current and size + file["size"] > target:
            groups.append(current)
            current, size = [], 0
        current.append(file)
        size += file["size"] + OPEN_COST_BYTES
    if current:
        groups.append(current)
    return groups
