"""The groups rewritten, committed as one `replace` snapshot through the catalog's compare-and-swap.

A writer that commits meanwhile never loses its commit: on a lost race pyiceberg's transaction
retries on the new head after checking, as Java's `RewriteFiles` does, that every rewritten file
is still live and got no new deletes in any snapshot since the files were read. Appends and
changes to other files are kept under the rewrite. When pyiceberg's retries are spent, or a writer
removed or deleted rows of some rewritten files (it wins), the groups whose files are still as
they were read are committed on the table as it now is, and the others are left for the next run
(as Java's partial progress).

The delete files that applied only to rewritten files (`dangling`) go in the same commit. The
snapshot is made with pyiceberg's own `_OverwriteFiles` producer under Iceberg's `replace`
operation (pyiceberg 0.12 has no rewrite of data files), which changes no data: readers of changes
skip it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
)
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import (
    Operation,
    Snapshot,
    SnapshotSummaryCollector,
    Summary,
    update_snapshot_summaries,
)
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import KeyDefaultDict

from share_store.catalog.maintenance.compaction.dangling import dangling
from share_store.catalog.maintenance.compaction.plan import scan_tasks
from share_store.iceberg.delete_manifests import DeleteManifestWriter

log = logging.getLogger(__name__)

#: Commits of one rewrite, each with pyiceberg's own retries (`commit.retry.*`), before it is left
#: for the next run: writers committing more often than those retries wait would starve it.
COMMIT_ATTEMPTS = 4


@dataclass(eq=False)  # told apart by identity: two groups are never the same group
class Group:
    """One partition's files as read (scan tasks: each file with its deletes) and the files written."""

    read: list[Any]
    written: list[DataFile]


def commit_groups(
    load: Callable[[], Table], table: Table, read_in: Snapshot, groups: list[Group]
) -> tuple[int | None, list[Group], str]:
    """Commit `groups` as one `replace`: its snapshot id and the groups in it; (None, [], why) if
    none could be.

    A commit that fails (pyiceberg's retries spent, or a writer changed some rewritten files) is
    made again, up to `COMMIT_ATTEMPTS` in all, with the groups whose files are, on the table as it
    now is, still live with the deletes they were read with: the rows written are still theirs.
    """
    base, pending = read_in, groups
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return _commit(table, base, pending), pending, ""
        except (ValidationException, CommitFailedException) as error:
            log.info("compaction of %s lost a race (attempt %d): %s", ".".join(table.name()), attempt,
                     type(error).__name__)  # fmt: skip
        if attempt == COMMIT_ATTEMPTS:
            break
        table = load()
        head = table.current_snapshot()
        tasks = scan_tasks(table, head) if head is not None else None
        if head is not None and tasks is not None:
            pending = [group for group in pending if all(
                t.file.file_path in tasks and _deletes_of(tasks[t.file.file_path]) == _deletes_of(t)
                for t in group.read
            )]  # fmt: skip
        if head is None or tasks is None or not pending:
            return None, [], "a writer changed the rewritten files meanwhile: left for the next run"
        # Checked on this head: what changes after it is what the next commit validates.
        base = head
    return None, [], f"writers committed first {COMMIT_ATTEMPTS} times: left for the next run"


def _deletes_of(task: Any) -> frozenset[str]:
    return frozenset(delete.file_path for delete in task.delete_files)


def _commit(table: Table, base: Snapshot, groups: list[Group]) -> int:
    """Commit the groups' rewrite as one `replace` on `main`, validated against every commit since
    `base` (where the rewritten files were seen as read); its snapshot id.

    pyiceberg's transaction retries a lost compare-and-swap on the new head (its `commit.retry.*`
    properties), checking again what `_Rewrite` validates; ValidationException or
    CommitFailedException when it did not commit.
    """
    transaction = table.transaction()
    producer = _Rewrite(
        operation=Operation.REPLACE, transaction=transaction, io=table.io,
        snapshot_properties={"maintenance": "compaction"},
    )  # fmt: skip
    # pyiceberg validates each retry from the snapshot its producer started on.
    producer._starting_snapshot_id = base.snapshot_id
    for group in groups:
        for task in group.read:
            producer.delete_data_file(task.file)
        for file in group.written:
            producer.append_data_file(file)
    producer.commit()
    transaction.commit_transaction()
    return int(producer._snapshot_id)


@dataclass
class _Removal:
    """What one commit attempt removes from its parent snapshot, and the manifests it reads for it."""

    untouched: list[ManifestFile] = field(default_factory=list)
    #: Manifests that may hold a rewritten file or a delete file applying to one, with their live entries.
    touched: list[tuple[ManifestFile, list[ManifestEntry]]] = field(default_factory=list)
    data: list[ManifestEntry] = field(default_factory=list)
    #: Dangling delete entries, by (manifest path, index among its live entries).
    dangling: set[tuple[str, int]] = field(default_factory=set)
    dangling_files: list[DataFile] = field(default_factory=list)


class _Rewrite(_OverwriteFiles):  # type: ignore[misc]
    """pyiceberg's overwrite producer, committing Iceberg's `replace` (as Java's `RewriteFiles`).

    A writer's commit since the compaction began conflicts only if it removed a rewritten file or
    added deletes for one: appends, and deletes of other files, are kept and the rewrite is
    committed on top of them. The delete files left dangling by the rewrite are removed with it,
    decided again on each head it is committed on.
    """

    _removal: _Removal | None = None

    def _refresh_for_retry(self) -> None:
        super()._refresh_for_retry()
        self._removal = None  # a retry commits on a new head: decided again there

    def _parent(self) -> Snapshot | None:
        parent_id = self._parent_snapshot_id
        return self._transaction.table_metadata.snapshot_by_id(parent_id) if parent_id is not None else None

    def _planned(self) -> _Removal:
        if self._removal is None:
            self._removal = self._plan_removal()
        return self._removal

    def _plan_removal(self) -> _Removal:
        removal = _Removal()
        parent = self._parent()
        if parent is None:
            return removal
        # Only manifests of the rewritten files' partitions can hold them, or deletes that apply to them.
        touches: dict[int, Callable[[ManifestFile], bool]] = KeyDefaultDict(self._build_manifest_evaluator)
        for manifest in parent.manifests(self._io):
            if touches[manifest.partition_spec_id](manifest):
                entries = manifest.fetch_manifest_entry(self._io, discard_deleted=True)
                removal.touched.append((manifest, entries))
            else:
                removal.untouched.append(manifest)
        data = [e for m, entries in removal.touched if m.content == ManifestContent.DATA for e in entries]
        removal.data = [e for e in data if e.data_file in self._deleted_data_files]
        left = [e for e in data if e.data_file not in self._deleted_data_files]
        deletes = [
            (m.manifest_path, index, entry)
            for m, entries in removal.touched
            if m.content == ManifestContent.DELETES
            for index, entry in enumerate(entries)
        ]
        gone = dangling([entry for _, _, entry in deletes], removal.data, left)
        for position in sorted(gone):
            path, index, entry = deletes[position]
            removal.dangling.add((path, index))
            removal.dangling_files.append(entry.data_file)
        return removal

    def _manifests(self) -> list[ManifestFile]:
        """As pyiceberg's, but the written files are added in a manifest of their own spec (pyiceberg's
        adds every file under the table's default spec: a group of an older spec would be recorded
        with its partition read as the new spec's)."""
        self._build_delete_files_partition_predicate()  # the manifests of the rewritten partitions
        removed = self._deleted_entries()
        added: dict[int, list[DataFile]] = defaultdict(list)
        for file in self._added_data_files:
            added[file.spec_id].append(file)
        manifests = []
        for spec_id, files in sorted(added.items()):
            with self.new_manifest_writer(self.spec(spec_id)) as writer:
                for file in files:
                    added_entry = ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=self._snapshot_id, data_file=file
                    )
                    writer.add(added_entry)
            manifests.append(writer.to_manifest_file())
        by_spec: dict[int, list[ManifestEntry]] = defaultdict(list)
        for entry in removed:
            by_spec[entry.data_file.spec_id].append(entry)
        for spec_id, entries in sorted(by_spec.items()):
            with self.new_manifest_writer(self.spec(spec_id)) as writer:
                for entry in entries:
                    writer.add_entry(entry)
            manifests.append(writer.to_manifest_file())
        return manifests + self._existing_manifests()

    def _deleted_entries(self) -> list[ManifestEntry]:
        # Called first when the manifests are made: the removal is planned here, on the parent.
        entries = [
            ManifestEntry.from_args(
                status=ManifestEntryStatus.DELETED,
                snapshot_id=self._snapshot_id,
                sequence_number=entry.sequence_number,
                file_sequence_number=entry.file_sequence_number,
                data_file=entry.data_file,
            )
            for entry in self._planned().data
        ]
        self._validate_required_deletes(entries)
        return entries

    def _existing_manifests(self) -> list[ManifestFile]:
        removal = self._planned()
        manifests = list(removal.untouched)
        for manifest, entries in removal.touched:
            if manifest.content == ManifestContent.DATA:
                kept = [e for e in entries if e.data_file not in self._deleted_data_files]
                dropped: list[ManifestEntry] = []
            else:
                gone = {i for path, i in removal.dangling if path == manifest.manifest_path}
                kept = [e for i, e in enumerate(entries) if i not in gone]
                dropped = [e for i, e in enumerate(entries) if i in gone]
            if len(kept) == len(entries):
                manifests.append(manifest)
                continue
            if not kept and not dropped:
                continue  # the data files removed are in the delete manifest `_deleted_entries` makes
            manifests.append(self._rewritten(manifest, kept, dropped))
        return manifests

    def _rewritten(
        self, manifest: ManifestFile, kept: list[ManifestEntry], dropped: list[ManifestEntry]
    ) -> ManifestFile:
        """`manifest` again with `kept` as existing entries and `dropped` (delete files) as deleted ones."""
        spec = self.spec(manifest.partition_spec_id)
        writer: ManifestWriter
        if manifest.content == ManifestContent.DELETES:
            writer = DeleteManifestWriter(spec, self.schema(), self.new_manifest_output(), self._snapshot_id,
                                           self._compression)  # fmt: skip
        else:
            writer = self.new_manifest_writer(spec)
        with writer:
            for entry in kept:
                writer.existing(entry)
            for entry in dropped:
                writer.delete(entry)
        return writer.to_manifest_file()

    def _summary(self, snapshot_properties: dict[str, str] = {}) -> Summary:  # noqa: B006 (pyiceberg's)
        metadata = self._transaction.table_metadata
        schema, specs = metadata.schema(), metadata.specs()
        limit = int(metadata.properties.get(TableProperties.WRITE_PARTITION_SUMMARY_LIMIT, 0))
        collector = SnapshotSummaryCollector(partition_summary_limit=limit)
        for file in self._added_data_files:
            collector.add_file(file, schema=schema, partition_spec=specs[file.spec_id])
        for file in (*self._deleted_data_files, *self._planned().dangling_files):
            collector.remove_file(file, schema=schema, partition_spec=specs[file.spec_id])
        parent = self._parent()
        # pyiceberg 0.12 totals only appends, overwrites and deletes: a replace's totals are an overwrite's.
        summary = update_snapshot_summaries(
            Summary(Operation.OVERWRITE, **collector.build(), **snapshot_properties),
            parent.summary if parent is not None and parent.summary is not None else None,
        )
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _validate_concurrency(self) -> None:
        from pyiceberg.table.update.validate import _added_delete_files, _validate_data_files_exist

        window = self._commit_window
        if window is None or window.is_empty() or window.head is None:
            return
        table, rewritten = self._transaction._table, self._deleted_data_files
        _validate_data_files_exist(table, window.head, rewritten, window.base)
        # pyiceberg's `_validate_no_new_deletes_for_data_files` keeps only the deletes from the head's
        # sequence number on, so a delete with a commit after it went unseen and its rows came back:
        # every delete added since the base counts here, as in Java's `validateNoNewDeletesForDataFiles`.
        added = _added_delete_files(table, window.head, None, None, window.base)
        since = window.base.sequence_number if window.base is not None else None
        for file in rewritten:
            if added.for_data_file(since or INITIAL_SEQUENCE_NUMBER, file, file.partition):
                raise ValidationException(f"found new deletes for rewritten file {file.file_path}")
