"""One derived file to make, as a value that can travel: to a thread here, or to a Spark executor.

A restricted reader decides which files to derive and names each (`DerivationTask`);
`run_task` makes one, reading the source and its deletion vector from storage and
writing the file and its sidecar to the cache. A task holds plain values only (the
bound restriction is frozen dataclasses), so `sharing-server share derive` can hand
a big table's tasks to Spark, whose executors run the same `run_task` and write into
the same cache the server reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from share_store.restrictions.column_types import read_partition_value
from share_store.restrictions.derivation import derive
from share_store.restrictions.derived_files import DerivedFile, DerivedFiles, content_key
from share_store.restrictions.restriction import BoundRestriction
from share_store.storage.base import ObjectStorage


@dataclass(frozen=True)
class DerivationTask:
    """What defines one derived file, and where its inputs are."""

    #: The derived file's name in the cache (`derived_files.content_key`).
    name: str
    source: tuple[str, str]
    #: The source's size in bytes, as the log says (what a plan weighs).
    size: int
    restriction: BoundRestriction
    #: The values of the partition columns the file does not hold, by column name.
    constants: dict[str, Any]
    change_file: bool = False
    #: The source's deletion vector: its descriptor, and its file's location (None: inline).
    vector: dict[str, Any] | None = None
    vector_file: tuple[str, str] | None = None


def task_for(
    action: dict[str, Any],
    restriction: BoundRestriction,
    change_file: bool,
    locate: Callable[[str], tuple[str, str]],
    locate_dv: Callable[[dict[str, Any]], tuple[str, str] | None],
) -> DerivationTask:
    """What defines `action`'s derived file (an add, remove or cdc of the log), and where its
    inputs are (`locate`, `locate_dv`: the whole table's reader's)."""
    descriptor = action.get("deletionVector")
    name = content_key(
        "restricted-1",
        action["path"],
        json.dumps(descriptor, sort_keys=True) if descriptor else "",
        restriction.key,
        "cdc" if change_file else "data",
    )
    constants = {}
    by_physical = {c.physical: c for c in restriction.table_columns.values()}
    for physical, raw in (action.get("partitionValues") or {}).items():
        column = by_physical.get(physical) or restriction.table_columns.get(physical.lower())
        if column is not None:
            try:
                constants[column.name] = read_partition_value(column, raw)
            except ValueError:
                constants[column.name] = None
    return DerivationTask(
        name,
        locate(action["path"]),
        int(action.get("size") or 0),
        restriction,
        constants,
        change_file,
        descriptor,
        locate_dv(descriptor) if descriptor else None,
    )


def run_task(task: DerivationTask, storage: ObjectStorage, files: DerivedFiles) -> DerivedFile:
    """Make `task`'s derived file (unless made already) from `storage`'s objects into `files`."""
    found = files.find(task.name)
    if found is not None:
        return found
    deleted = None
    if task.vector is not None:
        from share_store.iceberg.deletes import positions
        from share_store.iceberg.derived import vector_payload

        content = storage.read(*task.vector_file) if task.vector_file is not None else None
        deleted = set(positions(vector_payload(task.vector, content)))
    source = storage.open(*task.source)
    try:
        derived = derive(source, task.restriction, task.constants, deleted, task.change_file)
    finally:
        source.close()
    return files.put(task.name, derived)
