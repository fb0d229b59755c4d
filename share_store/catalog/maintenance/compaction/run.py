"""One compaction run on a table, within the provider's limits and the run's budget, and its report.

`compact` rewrites what `plan.plan` picks in the table's current snapshot (read by `inputs`,
written by `rewrite`) and commits it as one `replace` (`commit`). A run past its CPU or wall-clock
budget (`budget.Budget`) stops between two batches: the group it was writing is deleted, the
groups it finished are committed, and the result (`Compacted`) says where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance.budget import Budget, OverBudget
from share_store.catalog.maintenance.compaction.commit import Group, commit_groups
from share_store.catalog.maintenance.compaction.inputs import Inputs
from share_store.catalog.maintenance.compaction.plan import candidate, plan, scan_tasks, worth
from share_store.catalog.maintenance.compaction.rewrite import forget, rewrite_group, sort_keys
from share_store.catalog.maintenance.configuration import Compaction, Limits
from share_store.catalog.names import TableName
from share_store.catalog.table_source import WarehouseTables
from share_store.parquet_bounds import TooBig, writer_settings

#: Files left as they are, named in the result (and the job status) by path at most.
NAMED_FILES = 100
#: The newest format pyiceberg 0.12 writes manifests for.
NEWEST_FORMAT = 2


@dataclass(frozen=True)
class Compacted:
    """What a compaction did."""

    files_rewritten: int = 0
    files_written: int = 0
    bytes_rewritten: int = 0
    bytes_written: int = 0
    snapshot_id: int | None = None
    skipped: str | None = None
    #: Data files left as they are, past the server's bounds: {"path", "reason"} each.
    files_skipped: list[dict[str, str]] = field(default_factory=list)
    #: What else the run has to say: files left, a budget it stopped at.
    note: str | None = None


def compact(
    catalog: WarehouseCatalog, name: TableName, settings: Compaction, limits: Limits | None = None
) -> Compacted:
    """Rewrite what `plan` picks in the table's current snapshot and commit it as one `replace`,
    within the provider's `limits` (a budget counted from here, in this thread)."""
    if not settings.enabled:
        return Compacted(skipped="disabled")
    limits = limits or Limits()
    budget = Budget.of(limits)
    tables = WarehouseTables(catalog, name.warehouse, scoped=True)  # the store bounds what it rewrites
    identifier = (*name.namespace, name.name)
    table = tables.load_table(identifier)
    if table.metadata.format_version > NEWEST_FORMAT:
        # Checked first: the rewrite would be done, then its commit refused.
        version = table.metadata.format_version
        return Compacted(skipped=f"format v{version} (pyiceberg cannot write its manifests)")
    snapshot = table.current_snapshot()
    if snapshot is None:
        return Compacted(skipped="no snapshot")
    tasks = scan_tasks(table, snapshot)
    if tasks is None:
        return Compacted(skipped="equality deletes (pyiceberg cannot apply them)")
    groups = plan((candidate(t) for t in tasks.values()), settings.target_bytes)
    if not groups:
        return Compacted(skipped="nothing to compact")
    keys = sort_keys(table) if settings.strategy in ("auto", "sort") else []
    if settings.strategy == "sort" and not keys:
        return Compacted(skipped="strategy 'sort' but the table has no sort order")
    inputs = Inputs(table, limits, budget)
    writing = writer_settings(table.metadata.properties, limits.row_group_bytes)
    done: list[Group] = []
    stopped = None
    try:
        for group in groups:
            read = inputs.admit([tasks[c.path] for c in group])
            if not worth(read):
                continue  # what is left of the group is not worth a rewrite: its files stay as they are
            try:
                written = rewrite_group(table, read, settings.target_bytes, keys, inputs, writing)
            except TooBig:
                continue  # a file decoded past what its footer said: named in `left`, its group left whole
            done.append(Group(read, written))
    except OverBudget as error:
        stopped = (f"stopped at {error} after {len(done)} of {len(groups)} group(s): the rest is left "
                   "for the next run")  # fmt: skip
    except Exception:
        forget(table, [file for group in done for file in group.written])
        raise
    left = [{"path": path, "reason": why} for path, why in list(inputs.left.items())[:NAMED_FILES]]
    if not done:
        return Compacted(skipped=stopped or "nothing to compact", files_skipped=left, note=_left(inputs.left))
    note = "; ".join(part for part in (_left(inputs.left), stopped) if part) or None
    # Any other error from here on may come after the commit landed: its files are then left to
    # unreferenced-file removal, never deleted under a snapshot that may name them.
    snapshot_id, committed, why = commit_groups(lambda: tables.load_table(identifier), table, snapshot, done)
    forget(table, [file for group in done if group not in committed for file in group.written])
    if snapshot_id is None:
        return Compacted(skipped=why, files_skipped=left, note=note)
    rewritten = [task for group in committed for task in group.read]
    written = [file for group in committed for file in group.written]
    return Compacted(
        files_rewritten=len(rewritten),
        files_written=len(written),
        bytes_rewritten=sum(t.file.file_size_in_bytes for t in rewritten),
        bytes_written=sum(f.file_size_in_bytes for f in written),
        snapshot_id=snapshot_id,
        files_skipped=left,
        note=note,
    )


def _left(left: dict[str, str]) -> str | None:
    """The files left as they are, in a sentence naming the first few."""
    if not left:
        return None
    named = "; ".join(f"{path} ({why})" for path, why in list(left.items())[:3])
    more = f"; and {len(left) - 3} more" if len(left) > 3 else ""
    return f"{len(left)} file(s) left as they are, past the server's bounds: {named}{more}"
