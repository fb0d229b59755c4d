"""Spark makes a restricted table's derived files: `sharing-server share derive` hands it the tasks.

A table too big for one server to derive in good time (a first version of
thousands of files under a row filter) is derived by Spark instead: the provider's
command plans the files a version still lacks (`RestrictedReader.derivation_tasks`),
and each Spark task runs the server's own `run_task` on a share of them, reading
the sources and writing the derived files and sidecars into the cache of derived
files, where the server then finds them: its next query of that version derives
nothing. Executors open the configured storage themselves, so they need this
package installed and the storage reachable, as the server has it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from share_store.restrictions.derivation_tasks import DerivationTask


@dataclass(frozen=True)
class DerivedSummary:
    """What a derivation on Spark made: files, rows kept, source bytes read."""

    files: int
    rows: int
    source_bytes: int


def derive_on_spark(
    spark: Any, tasks: list[DerivationTask], storage: dict[str, Any], cache: tuple[str, str]
) -> DerivedSummary:
    """Run `tasks` on Spark's executors; `storage` the `[storage]` settings they open (the
    configuration's table, never a client: those do not travel), `cache` the bucket and
    folder of the table's derived files."""
    if not tasks:
        return DerivedSummary(0, 0, 0)
    slices = max(1, min(len(tasks), spark.sparkContext.defaultParallelism * 4))
    made = (
        spark.sparkContext.parallelize(tasks, slices)
        .mapPartitions(lambda part: _derive_part(part, storage, cache))
        .collect()
    )
    return DerivedSummary(len(made), sum(rows for rows, _ in made), sum(size for _, size in made))


def _derive_part(
    tasks: Iterator[DerivationTask], settings: dict[str, Any], cache: tuple[str, str]
) -> Iterator[tuple[int, int]]:
    """On an executor: open the storage, then make each task's file (rows kept, source bytes)."""
    from share_store.restrictions.derivation_tasks import run_task
    from share_store.restrictions.derived_files import DerivedFiles
    from share_store.storage.file_uris import file_uri
    from sharing_server.config import ServerConfig

    config = ServerConfig(storage=settings)
    # The key signs local file URLs, which a derivation never makes.
    storage = config.make_storage(b"\0" * 32)
    files = DerivedFiles(storage, cache[0], cache[1], lambda bucket, key: file_uri(storage, bucket, key))
    for task in tasks:
        made = run_task(task, storage, files)
        yield made.num_records, task.size
