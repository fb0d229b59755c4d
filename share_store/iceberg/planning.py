"""pyiceberg's scan planning, with the deletes it cannot plan (well) taken out and kept.

pyiceberg's planner raises on any equality delete entry, and matches v3 deletion
vectors by partition alone (it does not read `referenced_data_file`), so each data
file of a partition is checked against every vector in it: 10 million checks for
10,000 files and 1,000 vectors. Its entry filter sees each manifest entry first:
equality deletes and deletion vectors are collected there, and so is each data
file's data sequence number, which the planned tasks do not carry and which decides
the deletes that apply to it. Vectors are then attached by the data file their
Puffin blob names (`attach_vectors`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFileContent, FileFormat, ManifestEntry

from share_store.iceberg.equality import EqualityDelete


@dataclass
class Plan:
    """Planned data files with their position deletes, and the equality deletes taken out."""

    tasks: list[Any] = field(default_factory=list)
    equality_deletes: list[EqualityDelete] = field(default_factory=list)
    #: Data file path → its data sequence number.
    sequence_numbers: dict[str, int] = field(default_factory=dict)
    #: Deletion vector files (Puffin) with their data sequence numbers, not yet attached.
    vectors: list[tuple[Any, int]] = field(default_factory=list)


def plan_files(scan: Any, with_deletes: bool = True) -> Plan:
    """The files of `scan` (a pyiceberg `DataScan`); without deletes, the data files alone.

    A catalog that plans scans itself (REST server-side planning) plans as it does:
    equality deletes among its tasks' delete files are refused when served.
    """
    if getattr(scan, "_should_use_server_side_planning", lambda: False)():
        return Plan(list(scan.plan_files()))
    snapshot = scan.snapshot()
    if snapshot is None:
        return Plan()
    plan = Plan()
    specs = scan.table_metadata.specs()

    def keep(entry: ManifestEntry) -> bool:
        data_file = entry.data_file
        sequence_number = entry.sequence_number
        if sequence_number is None:
            sequence_number = INITIAL_SEQUENCE_NUMBER
        if data_file.content == DataFileContent.DATA:
            plan.sequence_numbers[data_file.file_path] = sequence_number
            return True
        if not with_deletes:
            return False
        if data_file.content == DataFileContent.EQUALITY_DELETES:
            spec = specs.get(data_file.spec_id)
            is_global = spec is not None and spec.is_unpartitioned()
            plan.equality_deletes.append(EqualityDelete(data_file, sequence_number, is_global))
            return False
        if data_file.file_format == FileFormat.PUFFIN:
            plan.vectors.append((data_file, sequence_number))
            return False
        return True

    planner = scan._manifest_planner
    plan.tasks = list(planner.plan_files(snapshot.manifests(scan.io), manifest_entry_filter=keep))
    return plan


def attach_vectors(plan: Plan, targets: Callable[[str], Iterable[str]]) -> None:
    """Add each deletion vector file to the tasks of the data files its blobs name.

    `targets(path)` names the data files a Puffin file holds vectors for (its footer).
    A vector applies to a data file committed at or before it (data sequence numbers).
    """
    by_target: dict[str, list[tuple[Any, int]]] = {}
    for vector_file, sequence_number in plan.vectors:
        for target in targets(vector_file.file_path):
            by_target.setdefault(target, []).append((vector_file, sequence_number))
    if not by_target:
        return
    for task in plan.tasks:
        path = task.file.file_path
        found = by_target.get(path)
        if found:
            data_sequence = plan.sequence_numbers.get(path, INITIAL_SEQUENCE_NUMBER)
            task.delete_files.update(f for f, sequence in found if sequence >= data_sequence)
