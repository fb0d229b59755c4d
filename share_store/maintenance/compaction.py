"""Compaction: a table's small files, and the files its deletes apply to, rewritten near a target size.

`plan` (pure) picks, per partition, the data files worth rewriting: those
smaller than three quarters of the target, and any file a delete applies to;
a partition is rewritten when it has two such files or one with deletes.
`compact` reads each group through pyiceberg with its deletes applied, one
input file at a time, writes new files rolled at the target size (sorted by
the table's sort order where it has one: identity and order-preserving
transforms, up to the first that is not), and commits one `replace` snapshot
through the catalog's compare-and-swap. Memory holds a row group's rows
(`ROW_GROUP_BYTES` of input, by its on-disk size), or one output file's rows when
sorting (so a sorted output file is capped at `SORT_BUFFER_BYTES`).

A writer that commits meanwhile never loses its commit: the compaction commits
through the catalog's compare-and-swap, and on a lost race pyiceberg's
transaction retries on the new head after checking, as Java's `RewriteFiles`
does, that every rewritten file is still live and got no new deletes in any
snapshot since the files were read. Appends and changes to other files are kept
under the rewrite. When pyiceberg's retries are spent, or a writer removed or
deleted rows of some rewritten files (it wins), the groups whose files are
still as they were read are committed on the table as it now is, the others'
written files are deleted and their files left for the next run (as Java's
partial progress). Tables with equality deletes are left alone (pyiceberg 0.12
cannot apply them), and so are tables of format v3 (it cannot write their
manifests).

The delete files that applied only to rewritten files go in the same commit, as
Iceberg's `remove-dangling-deletes` does, read as readers apply them: a position
delete file is dropped when it applied to a rewritten file and can apply to no
data file left in its partition, by its `referenced_data_file`, else the range
of its `file_path` bounds, else (no bounds) any data file of the partition with
a sequence number up to its own. One that might still apply stays.

pyiceberg 0.12 has no rewrite of data files (only Spark has); the snapshot is
made with its own `_OverwriteFiles` producer under Iceberg's `replace`
operation, which changes no data: readers of changes skip it.
"""

from __future__ import annotations

import logging
import uuid
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FileFormat,
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
from pyiceberg.typedef import KeyDefaultDict, Record

from share_store.iceberg.delete_manifests import DeleteManifestWriter
from share_store.maintenance.settings import Compaction
from share_store.own_warehouses.catalog import WarehouseCatalog
from share_store.own_warehouses.names import TableName
from share_store.own_warehouses.shared import WarehouseTables

log = logging.getLogger(__name__)

#: A file under this share of the target is small.
SMALL_SHARE = 0.75
#: Rows of one sorted output file are held in memory: its on-disk size is capped here.
SORT_BUFFER_BYTES = 128 * 1024 * 1024
#: Unsorted rows are written to the open output file this much at a time (one row group or more).
ROW_GROUP_BYTES = 64 * 1024 * 1024
#: Transforms under which a column's order is the transformed value's order.
ORDERED_TRANSFORMS = ("identity", "year", "month", "day", "hour", "truncate")
#: Commits of one rewrite, each with pyiceberg's own retries (`commit.retry.*`), before it is left
#: for the next run: writers committing more often than those retries wait would starve it.
COMMIT_ATTEMPTS = 4
#: The newest format pyiceberg 0.12 writes manifests for.
NEWEST_FORMAT = 2
#: The field id of a position delete file's `file_path` column (the Iceberg spec's reserved id).
FILE_PATH_ID = 2147483546


@dataclass(frozen=True)
class Candidate:
    """A live data file as the plan sees it."""

    path: str
    size: int
    partition: tuple[int, tuple[Any, ...]]  # (spec id, partition values)
    deletes: int  # delete files that apply to it
    equality_deletes: bool = False


@dataclass(frozen=True)
class Compacted:
    """What a compaction did."""

    files_rewritten: int = 0
    files_written: int = 0
    bytes_rewritten: int = 0
    bytes_written: int = 0
    snapshot_id: int | None = None
    skipped: str | None = None


def plan(files: Iterable[Candidate], target_bytes: int) -> list[list[Candidate]]:
    """Groups of files to rewrite together: one per partition worth it, in a stable order."""
    by_partition: dict[tuple[int, tuple[Any, ...]], list[Candidate]] = defaultdict(list)
    for file in files:
        if file.equality_deletes:
            continue
        if file.deletes or file.size < target_bytes * SMALL_SHARE:
            by_partition[file.partition].append(file)
    groups = []
    for partition in sorted(by_partition, key=repr):
        chosen = sorted(by_partition[partition], key=lambda f: f.path)
        if len(chosen) >= 2 or any(f.deletes for f in chosen):
            groups.append(chosen)
    return groups


def sort_keys(table: Table) -> list[tuple[str, str, str]]:
    """(column, "ascending"|"descending", "at_start"|"at_end") of the table's sort order, as far as
    its transforms keep a column's order; [] when it has none."""
    keys = []
    schema = table.schema()
    for sort_field in table.sort_order().fields:
        if str(sort_field.transform).split("[")[0] not in ORDERED_TRANSFORMS:
            break  # a bucket's order is not its column's: sorting past it would sort by nothing
        name = schema.find_column_name(sort_field.source_id)
        if name is None or "." in name:
            break
        direction = "ascending" if sort_field.direction.value == "asc" else "descending"
        nulls = "at_start" if sort_field.null_order.value == "nulls-first" else "at_end"
        keys.append((name, direction, nulls))
    return keys


def compact(catalog: WarehouseCatalog, name: TableName, settings: Compaction) -> Compacted:
    """Rewrite what `plan` picks in the table's current snapshot and commit it as one `replace`."""
    if not settings.enabled:
        return Compacted(skipped="disabled")
    tables = WarehouseTables(catalog, name.warehouse)
    identifier = (*name.namespace, name.name)
    table = tables.load_table(identifier)
    if table.metadata.format_version > NEWEST_FORMAT:
        # Checked first: the rewrite would be done, then its commit refused.
        version = table.metadata.format_version
        return Compacted(skipped=f"format v{version} (pyiceberg cannot write its manifests)")
    snapshot = table.current_snapshot()
    if snapshot is None:
        return Compacted(skipped="no snapshot")
    tasks = _tasks(table, snapshot)
    if tasks is None:
        return Compacted(skipped="equality deletes (pyiceberg cannot apply them)")
    groups = plan((_candidate(t) for t in tasks.values()), settings.target_bytes)
    if not groups:
        return Compacted(skipped="nothing to compact")
    keys = sort_keys(table) if settings.strategy in ("auto", "sort") else []
    if settings.strategy == "sort" and not keys:
        return Compacted(skipped="strategy 'sort' but the table has no sort order")
    done: list[_Group] = []
    try:
        for group in groups:
            read = [tasks[c.path] for c in group]
            done.append(_Group(read, _rewrite(table, read, settings.target_bytes, keys)))
    except Exception:
        _forget(table, [file for group in done for file in group.written])
        raise
    # Any other error from here on may come after the commit landed: its files are then left to
    # unreferenced-file removal, never deleted under a snapshot that may name them.
    snapshot_id, committed, why = _commit_groups(lambda: tables.load_table(identifier), table, snapshot, done)
    _forget(table, [file for group in done if group not in committed for file in group.written])
    if snapshot_id is None:
        return Compacted(skipped=why)
    rewritten = [task for group in committed for task in group.read]
    written = [file for group in committed for file in group.written]
    return Compacted(
        files_rewritten=len(rewritten),
        files_written=len(written),
        bytes_rewritten=sum(t.file.file_size_in_bytes for t in rewritten),
        bytes_written=sum(f.file_size_in_bytes for f in written),
        snapshot_id=snapshot_id,
    )


@dataclass(eq=False)  # told apart by identity: two groups are never the same group
class _Group:
    """One partition's files as read (scan tasks: each file with its deletes) and the files written."""

    read: list[Any]
    written: list[DataFile]


def _tasks(table: Table, snapshot: Snapshot) -> dict[str, Any] | None:
    """The snapshot's scan tasks by data file path; None if it has equality deletes (pyiceberg's
    planning raises on them, so they are looked for in its delete manifests first)."""
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DELETES:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                return None
    return {task.file.file_path: task for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files()}


def _deletes_of(task: Any) -> frozenset[str]:
    return frozenset(delete.file_path for delete in task.delete_files)


def _commit_groups(
    load: Callable[[], Table], table: Table, read_in: Snapshot, groups: list[_Group]
) -> tuple[int | None, list[_Group], str]:
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
        tasks = _tasks(table, head) if head is not None else None
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


def _candidate(task: Any) -> Candidate:
    file = task.file
    return Candidate(
        path=file.file_path,
        size=int(file.file_size_in_bytes),
        partition=(file.spec_id, tuple(file.partition)),
        deletes=len(task.delete_files),
        equality_deletes=any(d.content == DataFileContent.EQUALITY_DELETES for d in task.delete_files),
    )


def _rewrite(
    table: Table, tasks: list[Any], target_bytes: int, keys: list[tuple[str, str, str]]
) -> list[DataFile]:
    """The group's rows, deletes applied, in new files of about `target_bytes` each.

    Unsorted, rows go out a row group at a time (`ROW_GROUP_BYTES`) into the open file, rolled at
    the target; sorted, a file's rows are held to be sorted, so a sorted file is capped at
    `SORT_BUFFER_BYTES`.
    """
    from pyiceberg.io.pyarrow import ArrowScan

    metadata = table.metadata
    scan = ArrowScan(metadata, table.io, metadata.schema(), AlwaysTrue())
    roll_at = min(target_bytes, SORT_BUFFER_BYTES) if keys else target_bytes
    first = tasks[0].file
    files: list[DataFile] = []
    out: _Output | None = None
    held: list[pa.RecordBatch] = []
    held_bytes = written_bytes = 0.0
    for task in tasks:
        # On-disk bytes per row of this input: what its rows will take in the output, roughly.
        per_row = task.file.file_size_in_bytes / max(1, task.file.record_count)
        for batch in scan.to_record_batches([task]):
            held.append(batch)
            held_bytes += per_row * batch.num_rows
            if not keys and held_bytes >= ROW_GROUP_BYTES:
                out = out or _Output(table, first)
                out.write(held)
                written_bytes, held, held_bytes = written_bytes + held_bytes, [], 0.0
            if written_bytes + held_bytes >= roll_at:
                out = out or _Output(table, first)
                out.write([_sorted(held, keys)] if keys else held)
                files.append(out.close())
                out, held, held_bytes, written_bytes = None, [], 0.0, 0.0
    if held and sum(b.num_rows for b in held):
        out = out or _Output(table, first)
        out.write([_sorted(held, keys)] if keys else held)
    if out is not None:
        files.append(out.close())
    return files


def _sorted(batches: list[pa.RecordBatch], keys: list[tuple[str, str, str]]) -> pa.Table:
    rows = pa.Table.from_batches(batches)
    # pyarrow sorts nulls one way for all keys: the first key's null order decides.
    return rows.sort_by([(column, direction) for column, direction, _ in keys], null_placement=keys[0][2])


class _Output:
    """One new data file in the table's data folder, in the partition of `like` (the group's),
    written a row group at a time."""

    def __init__(self, table: Table, like: DataFile) -> None:
        from pyiceberg.io.pyarrow import ParquetFormatWriter

        metadata = table.metadata
        self.metadata, self.like, self.schema = metadata, like, metadata.schema()
        self.spec = metadata.specs()[like.spec_id]
        # The table is a `ServerTable`: its provider is never one a table property names.
        provider = table.location_provider()
        # The provider asks a partition key only for its path; the group's partition is already
        # transformed, so the path is made from it directly.
        partition = (
            _PartitionPath(self.spec.partition_to_path(like.partition, self.schema))
            if self.spec.fields
            else None
        )
        self.path = provider.new_data_location(f"{uuid.uuid4()}-compacted.parquet", partition_key=partition)  # type: ignore[arg-type]
        self.output = table.io.new_output(self.path)
        self.writer = ParquetFormatWriter(self.output, self.schema, metadata.properties)

    def write(self, rows: list[pa.RecordBatch] | list[pa.Table]) -> None:
        """Rows as one write, so that they make row groups of the table's size: written batch by
        batch, each input file's batches were a row group of their own (1,000 row groups of 100
        rows after 1,000 small appends, read 9x slower than the same rows written at once)."""
        from pyiceberg.io.pyarrow import ParquetFormatModel, _to_requested_schema, pyarrow_to_schema

        batches = [b for part in rows for b in (part.to_batches() if isinstance(part, pa.Table) else [part])]
        if not batches:
            return
        file_schema = pyarrow_to_schema(batches[0].schema, name_mapping=self.schema.name_mapping)
        model = ParquetFormatModel()
        fitted = [
            _to_requested_schema(self.schema, file_schema, batch, include_field_ids=True, format_model=model)
            for batch in batches
        ]
        self.writer.write(pa.Table.from_batches(fitted, schema=fitted[0].schema))

    def close(self) -> DataFile:
        statistics = self.writer.close()
        order = self.metadata.sort_order_by_id(self.metadata.default_sort_order_id)
        written = DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=self.path,
            file_format=FileFormat.PARQUET,
            partition=self.like.partition if self.spec.fields else Record(),
            file_size_in_bytes=len(self.output),
            sort_order_id=order.order_id if order is not None and order.fields else None,
            equality_ids=None,
            key_metadata=None,
            **statistics.to_serialized_dict(),
        )
        # Not a field of the file (`from_args` drops it): the manifest it is added to is its spec's.
        written.spec_id = self.like.spec_id
        return written


@dataclass(frozen=True)
class _PartitionPath:
    path: str

    def to_path(self) -> str:
        return self.path


def _commit(table: Table, base: Snapshot, groups: list[_Group]) -> int:
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


def dangling(
    deletes: list[ManifestEntry], removed: list[ManifestEntry], left: list[ManifestEntry]
) -> set[int]:
    """The positions in `deletes` (live delete entries) of the position delete files that applied to
    a `removed` data file and can apply to none of the data files `left` (live entries of the same
    partitions): as readers match them, by spec and partition, then by `referenced_data_file`, else
    the range of their `file_path` bounds, else by sequence number (a data file's at most the delete's).
    Equality deletes, and anything unsure (no sequence number), are never dangling."""
    removed_by, left_by = _by_partition(removed), _by_partition(left)
    gone = set()
    for position, entry in enumerate(deletes):
        file = entry.data_file
        if file.content != DataFileContent.POSITION_DELETES or entry.sequence_number is None:
            continue
        key = _partition_key(file)
        if key not in removed_by:
            continue
        if removed_by[key].may_hold(file, entry.sequence_number) and not (
            key in left_by and left_by[key].may_hold(file, entry.sequence_number)
        ):
            gone.add(position)
    return gone


def _partition_key(file: DataFile) -> tuple[int, tuple[Any, ...]]:
    partition: Any = file.partition  # a Record: iterable by index, which its type does not say
    return (file.spec_id or 0, tuple(partition) if partition is not None else ())


@dataclass
class _DataFiles:
    """One partition's data files, as a position delete file is matched with them."""

    paths: list[str]  # sorted
    oldest: int  # the smallest data sequence number

    def may_hold(self, delete: DataFile, sequence_number: int) -> bool:
        """Whether the position delete file (with its entry's sequence number) may apply to one of them."""
        referenced = getattr(delete, "referenced_data_file", None)  # read only from v3 manifests on
        if referenced:
            index = bisect_left(self.paths, referenced)
            return index < len(self.paths) and self.paths[index] == referenced
        bounds = _path_bounds(delete)
        if bounds is not None:
            index = bisect_left(self.paths, bounds[0])
            return index < len(self.paths) and self.paths[index] <= bounds[1]
        return self.oldest <= sequence_number


def _by_partition(entries: list[ManifestEntry]) -> dict[tuple[int, tuple[Any, ...]], _DataFiles]:
    grouped: dict[tuple[int, tuple[Any, ...]], list[ManifestEntry]] = defaultdict(list)
    for entry in entries:
        grouped[_partition_key(entry.data_file)].append(entry)
    return {
        key: _DataFiles(
            sorted(e.data_file.file_path for e in group),
            # A data file without a sequence number is taken as the oldest: it keeps deletes.
            min(e.sequence_number or INITIAL_SEQUENCE_NUMBER for e in group),
        )
        for key, group in grouped.items()
    }


def _path_bounds(delete: DataFile) -> tuple[str, str] | None:
    """The delete file's `file_path` lower and upper bounds; None without both, or undecodable."""
    try:
        lower = (delete.lower_bounds or {}).get(FILE_PATH_ID)
        upper = (delete.upper_bounds or {}).get(FILE_PATH_ID)
        if lower is None or upper is None:
            return None
        return bytes(lower).decode(), bytes(upper).decode()
    except (UnicodeDecodeError, TypeError):
        return None


def _forget(table: Table, written: list[DataFile]) -> None:
    """Delete files written for a rewrite that was not committed (they would be unreferenced)."""
    for file in written:
        try:
            table.io.delete(file.file_path)
        except Exception as error:  # noqa: BLE001 (left for unreferenced-file removal)
            log.warning("could not delete an uncommitted compaction file: %s", type(error).__name__)
