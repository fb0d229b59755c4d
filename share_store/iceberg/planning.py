"""pyiceberg's scan planning, with the equality deletes it cannot plan taken out and kept.

pyiceberg's planner raises on any equality delete entry. Its entry filter sees each
manifest entry first: equality deletes are collected there (with their data sequence
numbers and whether their spec makes them global), and so is each data file's data
sequence number, which the planned tasks do not carry and which decides the deletes
that apply to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFileContent, ManifestEntry

from share_store.iceberg.equality import EqualityDelete


@dataclass
class Plan:
    """Planned data files with their position deletes, and the equality deletes taken out."""

    tasks: list[Any] = field(default_factory=list)
    equality_deletes: list[EqualityDelete] = field(default_factory=list)
    #: Data file path → its data sequence number.
    sequence_numbers: dict[str, int] = field(default_factory=dict)


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
        return True

    planner = scan._manifest_planner
    plan.tasks = list(planner.plan_files(snapshot.manifests(scan.io), manifest_entry_filter=keep))
    return plan
