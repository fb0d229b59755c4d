"""pyiceberg's scan planning, with the deletes it cannot plan (well) taken out and kept.

pyiceberg's planner raises on any equality delete entry, and matches v3 deletion
vectors by partition alone (it does not read `referenced_data_file`), so each data
file of a partition is checked against every vector in it: 10 million checks for
10,000 files and 1,000 vectors. Its entry filter sees each manifest entry first:
equality deletes are collected there, and so is each data file's data sequence
number, which the planned tasks do not carry and which decides the deletes that
apply to it. Deletion vectors are taken out there too: which data file each one
belongs to is read from the live delete manifest entries (`live_vectors`), never
from Puffin footers, which also name vectors that later commits replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFileContent, FileFormat, ManifestEntry

from share_store.iceberg.deletes import LiveVector
from share_store.iceberg.equality.index import EqualityDelete
from share_store.iceberg.live_vectors import read_live_vectors


@dataclass
class Plan:
    """Planned data files with their position deletes, and the equality deletes taken out."""

    tasks: list[Any] = field(default_factory=list)
    equality_deletes: list[EqualityDelete] = field(default_factory=list)
    #: Data file path → its data sequence number.
    sequence_numbers: dict[str, int] = field(default_factory=dict)
    #: The live deletion vector of each planned data file that has one and is old enough for it.
    vectors: dict[str, LiveVector] = field(default_factory=dict)


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
    puffins = False

    def keep(entry: ManifestEntry) -> bool:
        nonlocal puffins
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
            puffins = True
            return False
        return True

    planner = scan._manifest_planner
    manifests = snapshot.manifests(scan.io)
    plan.tasks = list(planner.plan_files(manifests, manifest_entry_filter=keep))
    if puffins:
        plan.vectors = applicable_vectors(read_live_vectors(manifests, scan.io), plan)
    return plan


def applicable_vectors(live: dict[str, LiveVector], plan: Plan) -> dict[str, LiveVector]:
    """The live vectors of the planned data files, each kept if the data file is not newer than it."""
    found: dict[str, LiveVector] = {}
    for task in plan.tasks:
        path = task.file.file_path
        vector = live.get(path)
        if vector is not None and vector.sequence_number >= plan.sequence_numbers.get(
            path, INITIAL_SEQUENCE_NUMBER
        ):
            found[path] = vector
    return found
