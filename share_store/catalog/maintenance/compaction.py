"""Compaction: a table's small files, and the files its deletes apply to, rewritten near a target size.

`plan` (pure) picks, per partition, the data files worth rewriting: those
smaller than three quarters of the target, and any file a delete applies to;
a partition is rewritten when it has two such files or one with deletes.
A partition's files are split into groups of at most `GROUP_TARGETS` targets of
input, so that a run stopped by its budget still commits whole groups.
`compact` reads each group with its deletes applied, one input file at a time,
writes new files rolled at the target size (sorted by the table's sort order
where it has one: identity and order-preserving transforms, up to the first that
is not), and commits one `replace` snapshot through the catalog's
compare-and-swap.

Within the provider's `Limits`, whatever the table says: each input file (and its
delete files) is measured from its footer before any of its rows are read
(`parquet_bounds.measure`); one that decodes past `row_group_decoded_mb` per row
group, or `file_decoded_mb` in all, is left as it is and named in the result.
Rows are read in batches of about 16 MiB decoded and held until a row group of
the output is full (the table's `write.parquet.*` within the server's floors,
`parquet_bounds.writer_settings`: 100,000 rows or 64 MiB at least), or, when
sorting, one output file (`SORT_BUFFER_BYTES` on disk, and at most a row group's
bound decoded). A run past its CPU or wall-clock budget (`budget.Budget`) stops
between two batches: the group it was writing is deleted, the groups it finished
are committed, and the result says where it stopped.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException, ValidationException
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

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.maintenance.budget import Budget, OverBudget
from share_store.catalog.maintenance.configuration import Compaction, Limits
from share_store.catalog.maintenance.parquet_bounds import (
    DELETE_FILE_PATH,
    Shape,
    TooBig,
    WriterSettings,
    measure,
    read_deletes,
    read_rows,
    writer_settings,
)
from share_store.catalog.names import TableName
from share_store.catalog.table_source import WarehouseTables
from share_store.iceberg.delete_manifests import DeleteManifestWriter

log = logging.getLogger(__name__)

#: A file under this share of the target is small.
SMALL_SHARE = 0.75
#: Rows of one sorted output file are held in memory: its on-disk size is capped here (and its
#: decoded size at `Limits.row_group_decoded_mb`).
SORT_BUFFER_BYTES = 128 * 1024 * 1024
#: A group holds at most this many targets of input bytes: a partition with more is split, so
#: that a run within its budget commits whole groups (as Java's `max-file-group-size-bytes`).
GROUP_TARGETS = 4
#: Files left as they are, named in the result (and the job status) by path at most.
NAMED_FILES = 100
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
    #: Data files left as they are, past the server's bounds: {"path", "reason"} each.
    files_skipped: list[dict[str, str]] = field(default_factory=list)
    #: What else the run has to say: files left, a budget it stopped at.
    note: str | None = None


def plan(files: Iterable[Candidate], target_bytes: int) -> list[list[Candidate]]:
    """Groups of files to rewrite together: per partition worth it, in a stable order, split at
    `GROUP_TARGETS` targets of input bytes."""
    by_partition: dict[tuple[int, tuple[Any, ...]], list[Candidate]] = defaultdict(list)
    for file in files:
        if file.equality_deletes:
            continue
        if file.deletes or file.size < target_bytes * SMALL_SHARE:
            by_partition[file.partition].append(file)
    groups = []
    for partition in sorted(by_partition, key=repr):
        chosen = sorted(by_partition[partition], key=lambda f: f.path)
        for group in _split(chosen, GROUP_TARGETS * target_bytes):
            if _worth(group):
                groups.append(group)
    return groups


def _worth(files: list[Any]) -> bool:
    """Whether rewriting these files (candidates or scan tasks) does anything: two or more become
    fewer, or deletes are applied."""
    return len(files) >= 2 or any(getattr(f, "deletes", 0) or getattr(f, "delete_files", ()) for f in files)


def _split(files: list[Candidate], cap: int) -> list[list[Candidate]]:
    """`files` in runs of at most `cap` bytes; a run that would be one file without deletes (not
    worth a rewrite alone) joins its neighbour instead."""
    runs: list[list[Candidate]] = []
    size = 0
    for file in files:
        if not runs or (runs[-1] and size + file.size > cap):
            runs.append([])
            size = 0
        runs[-1].append(file)
        size += file.size
    joined: list[list[Candidate]] = []
    for run in runs:
        if joined and (not _worth(run) or not _worth(joined[-1])):
            joined[-1] = joined[-1] + run
        else:
            joined.append(run)
    return joined


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
    tasks = _tasks(table, snapshot)
    if tasks is None:
        return Compacted(skipped="equality deletes (pyiceberg cannot apply them)")
    groups = plan((_candidate(t) for t in tasks.values()), settings.target_bytes)
    if not groups:
        return Compacted(skipped="nothing to compact")
    keys = sort_keys(table) if settings.strategy in ("auto", "sort") else []
    if settings.strategy == "sort" and not keys:
        return Compacted(skipped="strategy 'sort' but the table has no sort order")
    inputs = _Inputs(table, limits, budget)
    writing = writer_settings(table.metadata.properties, limits.row_group_bytes)
    done: list[_Group] = []
    stopped = None
    try:
        for group in groups:
            read = inputs.admit([tasks[c.path] for c in group])
            if not _worth(read):
                continue  # what is left of the group is not worth a rewrite: its files stay as they are
            try:
                written = _rewrite(table, read, settings.target_bytes, keys, inputs, writing)
            except TooBig:
                continue  # a file decoded past what its footer said: named in `left`, its group left whole
            done.append(_Group(read, written))
    except OverBudget as error:
        stopped = (f"stopped at {error} after {len(done)} of {len(groups)} group(s): the rest is left "
                   "for the next run")  # fmt: skip
    except Exception:
        _forget(table, [file for group in done for file in group.written])
        raise
    left = [{"path": path, "reason": why} for path, why in list(inputs.left.items())[:NAMED_FILES]]
    if not done:
        return Compacted(skipped=stopped or "nothing to compact", files_skipped=left, note=_left(inputs.left))
    note = "; ".join(part for part in (_left(inputs.left), stopped) if part) or None
    # Any other error from here on may come after the commit landed: its files are then left to
    # unreferenced-file removal, never deleted under a snapshot that may name them.
    snapshot_id, committed, why = _commit_groups(lambda: tables.load_table(identifier), table, snapshot, done)
    _forget(table, [file for group in done if group not in committed for file in group.written])
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


class _Inputs:
    """A run's input files, each measured before any of its rows are read, and read in batches.

    Data and delete files are measured once each (`parquet_bounds.measure`); a data file is
    admitted when it, its delete files each, and its delete files together (pyiceberg holds them
    whole) fit the bounds. `left` names the data files left as they are, with why."""

    def __init__(self, table: Table, limits: Limits, budget: Budget) -> None:
        self.table, self.limits, self.budget = table, limits, budget
        self.left: dict[str, str] = {}
        self._shapes: dict[str, Shape | str] = {}  # a file's shape, or why it is too big
        self._deletes: tuple[frozenset[str], dict[str, list[Any]]] | None = None

    def admit(self, tasks: list[Any]) -> list[Any]:
        """The tasks whose files fit; the others are in `left`. OverBudget between two files."""
        admitted = []
        for task in tasks:
            self.budget.check()
            why = self._why_not(task)
            if why is None:
                admitted.append(task)
            else:
                self.left[task.file.file_path] = why
        return admitted

    def _why_not(self, task: Any) -> str | None:
        shape = self._measured(task.file, deletes=False)
        if isinstance(shape, str):
            return shape
        total = 0
        for delete in task.delete_files:
            held = self._measured(delete, deletes=True)
            if isinstance(held, str):
                return f"its delete file {delete.file_path}: {held}"
            total += held.decoded_bytes
        if total > self.limits.row_group_bytes:
            bound = self.limits.row_group_decoded_mb
            return (f"its {len(task.delete_files)} delete files are held whole, {total // 2**20:,} MiB "
                    f"together, over the {bound:,} MiB the server reads at once")  # fmt: skip
        return None

    def _measured(self, file: DataFile, deletes: bool) -> Shape | str:
        path = file.file_path
        if path not in self._shapes:
            self._shapes[path] = self._measure(file, deletes)
        return self._shapes[path]

    def _measure(self, file: DataFile, deletes: bool) -> Shape | str:
        if file.file_format != FileFormat.PARQUET:
            return f"a {file.file_format.value} file (compaction reads Parquet only)"
        limits = self.limits
        # A delete file is read whole, its file paths as a dictionary: the whole file is one read.
        bound = limits.row_group_bytes if deletes else limits.file_bytes
        as_dictionary = frozenset({DELETE_FILE_PATH}) if deletes else frozenset()
        try:
            with self.table.io.new_input(file.file_path).open() as stream:
                return measure(stream, limits.row_group_bytes, bound, self.budget.check, as_dictionary)
        except TooBig as error:
            return str(error)

    def rows(self, task: Any) -> Iterator[pa.RecordBatch]:
        """The task's rows with its deletes applied, a batch at a time; TooBig (the file named in
        `left`) when they decode past the bound whatever its footer said."""
        shape = self._shapes[task.file.file_path]
        assert isinstance(shape, Shape), "only admitted files are read"
        deletes = self._deletes_of(task) if task.delete_files else None
        try:
            yield from read_rows(self.table, task, shape, deletes, self.limits.row_group_bytes)
        except TooBig as error:
            self.left[task.file.file_path] = str(error)
            raise

    def _deletes_of(self, task: Any) -> list[Any] | None:
        # The last task's deletes are kept: a partition's files often share their delete files.
        wanted = frozenset(delete.file_path for delete in task.delete_files)
        if self._deletes is None or self._deletes[0] != wanted:
            self._deletes = (wanted, read_deletes(self.table, [task]))
        return self._deletes[1].get(task.file.file_path)


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
    table: Table,
    tasks: list[Any],
    target_bytes: int,
    keys: list[tuple[str, str, str]],
    inputs: _Inputs,
    writing: WriterSettings,
) -> list[DataFile]:
    """The group's rows, deletes applied, in new files of about `target_bytes` each.

    Unsorted, rows go out a row group at a time (`writing`'s rows or decoded bytes, whichever
    first) into the open file, rolled at the target (by the inputs' on-disk bytes per row);
    sorted, a file's rows are held to be sorted, so a sorted file is capped at
    `SORT_BUFFER_BYTES` on disk and a row group's bound decoded. The budget is checked after each
    batch; on any error (OverBudget too) the files written so far are deleted.
    """
    roll_at = min(target_bytes, SORT_BUFFER_BYTES) if keys else target_bytes
    first = tasks[0].file
    files: list[DataFile] = []
    out: _Output | None = None
    held: list[pa.RecordBatch] = []
    held_rows = held_bytes = 0
    held_disk = written_disk = 0.0
    try:
        for task in tasks:
            # On-disk bytes per row of this input: what its rows will take in the output, roughly.
            per_row = task.file.file_size_in_bytes / max(1, task.file.record_count)
            for batch in inputs.rows(task):
                held.append(batch)
                held_rows, held_bytes = held_rows + batch.num_rows, held_bytes + batch.nbytes
                held_disk += per_row * batch.num_rows
                inputs.budget.check()
                group_full = held_rows >= writing.row_group_rows or held_bytes >= writing.row_group_bytes
                if not keys and group_full:
                    out = out or _Output(table, first, writing)
                    out.write(held)
                    written_disk += held_disk
                    held, held_rows, held_bytes, held_disk = [], 0, 0, 0.0
                full = bool(keys) and held_bytes >= inputs.limits.row_group_bytes
                if written_disk + held_disk >= roll_at or full:
                    out = out or _Output(table, first, writing)
                    out.write([_sorted(held, keys)] if keys else held)
                    files.append(out.close())
                    out, held, held_rows, held_bytes, held_disk, written_disk = None, [], 0, 0, 0.0, 0.0
        if held_rows:
            out = out or _Output(table, first, writing)
            out.write([_sorted(held, keys)] if keys else held)
        if out is not None:
            files.append(out.close())
            out = None
    except BaseException:
        if out is not None:
            out.abandon()
        _forget(table, files)
        raise
    return files


def _sorted(batches: list[pa.RecordBatch], keys: list[tuple[str, str, str]]) -> pa.Table:
    rows = pa.Table.from_batches(batches)
    # pyarrow sorts nulls one way for all keys: the first key's null order decides.
    return rows.sort_by([(column, direction) for column, direction, _ in keys], null_placement=keys[0][2])


class _Output:
    """One new data file in the table's data folder, in the partition of `like` (the group's),
    written a row group at a time with the server's `WriterSettings` (pyarrow's ParquetWriter, as
    pyiceberg's own writer uses it, with the statistics pyiceberg takes from its footer)."""

    def __init__(self, table: Table, like: DataFile, writing: WriterSettings) -> None:
        metadata = table.metadata
        self.table, self.metadata, self.like, self.schema = table, metadata, like, metadata.schema()
        self.writing = writing
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
        self._stream: Any = None
        self._writer: pq.ParquetWriter | None = None

    def write(self, rows: list[pa.RecordBatch] | list[pa.Table]) -> None:
        """Rows as one write, so that they make row groups of the server's size: written batch by
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
        # Inputs may differ in their string types (large or not): the file takes the first's.
        target = self._writer.schema if self._writer is not None else fitted[0].schema
        fitted = [batch if batch.schema == target else batch.cast(target) for batch in fitted]
        table = pa.Table.from_batches(fitted, schema=target)
        if self._writer is None:
            self._stream = self.output.create(overwrite=True)
            self._writer = pq.ParquetWriter(
                self._stream, schema=target, store_decimal_as_integer=True, **self.writing.options
            )
        # A held row group is written as one: cut only where it passes the rows or bytes of one
        # (a sorted file's rows come at once).
        by_bytes = table.num_rows * self.writing.row_group_bytes // max(1, table.nbytes)
        self._writer.write_table(table, row_group_size=max(1, min(self.writing.row_group_rows, by_bytes)))

    def close(self) -> DataFile:
        from pyiceberg.io.pyarrow import (
            compute_statistics_plan,
            data_file_statistics_from_parquet_metadata,
            parquet_path_to_id_mapping,
        )

        assert self._writer is not None, "a file is closed once written to"
        with self._stream:
            self._writer.close()
        statistics = data_file_statistics_from_parquet_metadata(
            parquet_metadata=self._writer.writer.metadata,
            stats_columns=compute_statistics_plan(self.schema, self.metadata.properties),
            parquet_column_mapping=parquet_path_to_id_mapping(self.schema),
        )
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

    def abandon(self) -> None:
        """Close the file unfinished and delete it (a rewrite that stopped)."""
        try:
            if self._writer is not None:
                self._writer.close()
            if self._stream is not None:
                self._stream.close()
        except Exception:  # deleted all the same
            log.info("an unfinished compaction file did not close", exc_info=True)
        if self._stream is not None:
            _forget(self.table, [self.path])


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


def _forget(table: Table, written: list[DataFile] | list[str]) -> None:
    """Delete files written for a rewrite that was not committed (they would be unreferenced)."""
    for file in written:
        try:
            table.io.delete(file if isinstance(file, str) else file.file_path)
        except Exception as error:  # noqa: BLE001 (left for unreferenced-file removal)
            log.warning("could not delete an uncommitted compaction file: %s", type(error).__name__)
