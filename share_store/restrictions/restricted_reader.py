"""The door's reader of a restricted table: the rows and columns its restriction allows, exactly.

`RestrictedReader` is a `TableReader` over the whole table's reader. Every
snapshot and every commit it gives passes through one rule per file
(`_file_action`): a file whose partition values and statistics prove that every
row passes (and which holds no column cut, nor deleted rows) is served as it is,
one proven to hold no allowed row is left out, and every other file is served as
its derived file (`derivation.py`), kept in the cache (`derived_files.py`). The
metadata lists only the served columns. So what a recipient can fetch by any URL
it is given holds nothing outside its restriction, whatever it does with hints
or deletion vectors.

A version's derived files are made in the background: a request waits for them
up to `answer_budget` seconds and is otherwise answered `DerivationPending` (503,
`Retry-After`) while the work goes on; it never gets part of a version.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from share_store.errors import DerivationPending
from share_store.model import SharedTable
from share_store.restrictions.derivation_tasks import DerivationTask, run_task, task_for
from share_store.restrictions.derived_files import DerivedFile, DerivedFiles
from share_store.restrictions.file_verdicts import file_facts, on_partitions, parsed_stats, verdict
from share_store.restrictions.restricted_metadata import (
    SERVED_ACTIONS,
    EarlierStats,
    restricted_commit_info,
    restricted_metadata,
    served_partition_values,
    without_deletion_vectors,
)
from share_store.restrictions.restriction import BoundRestriction, bind
from share_store.restrictions.row_filters import column_names
from share_store.storage.base import ObjectStorage, UrlSigning
from share_store.tables.active_files import FileSet
from share_store.tables.commit_times import Commit
from share_store.tables.reader import TableReader
from share_store.tables.snapshot import TableSnapshot

Action = dict[str, Any]

#: How long a request waits for a version's derived files before it is told to come back.
ANSWER_BUDGET_SECONDS = 20.0
#: What `Retry-After` says meanwhile.
RETRY_AFTER_SECONDS = 5.0
#: Versions whose restricted snapshot a reader keeps beyond its whole table's snapshot cache.
KEPT_VERSIONS = 8

_builds = ThreadPoolExecutor(max_workers=2, thread_name_prefix="restrict")
#: Derives files, for every build: at most two at once in the process, whatever is asked.
_files = ThreadPoolExecutor(max_workers=2, thread_name_prefix="derive")
#: What `_decisions` answers for a file its metadata does not decide.
DERIVE: Any = object()


class RestrictedReader:
    """A restricted table's reader for one bound audience (see the module's docstring)."""

    def __init__(
        self,
        table: SharedTable,
        inner: TableReader,
        files: DerivedFiles,
        answer_budget: float = ANSWER_BUDGET_SECONDS,
    ) -> None:
        assert table.restriction is not None and table.audience is not None
        self.table = table
        self.inner = inner
        self.files = files
        self.answer_budget = answer_budget
        self._lock = threading.Lock()
        self._builds: dict[tuple[int, str], Future[TableSnapshot]] = {}
        self._built: OrderedDict[tuple[int, str], TableSnapshot] = OrderedDict()
        self._bound: dict[str, BoundRestriction] = {}
        self._judged: dict[tuple[Any, ...], tuple[set[str], bool]] = {}

    # -- what passes through ----------------------------------------------------------------

    @property
    def storage(self) -> ObjectStorage:
        return self.inner.storage

    @property
    def bucket(self) -> str:
        """Where the restricted table lives, as the Iceberg metadata made of it says: its folder
        of derived files (generated metadata names a location, which engines do not read)."""
        return self.files.bucket

    @property
    def path(self) -> str:
        return self.files.prefix.rstrip("/")

    @property
    def holds_snapshot(self) -> bool:
        return self.inner.holds_snapshot

    def listing(self) -> Any:
        return self.inner.listing()

    def commits(self, listing: Any, snapshot: TableSnapshot | None = None) -> list[Commit]:
        whole = None if snapshot is None else self._whole(snapshot, listing)
        return self.inner.commits(listing, whole)

    def locate(self, path: str) -> tuple[str, str]:
        found = self.files.location(path)
        return found if found is not None else self.inner.locate(path)

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        return self.inner.locate_dv(descriptor)

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        whole = self.inner.url_signer(now, lifetime)
        derived = self.files.storage.url_signer(now, lifetime)

        def sign(bucket: str, key: str) -> tuple[str, int]:
            return derived(bucket, key) if self.files.holds(bucket, key) else whole(bucket, key)

        return sign

    def check_files_exist(self, snapshot: TableSnapshot, with_dvs: bool = False, ahead: float = 0.0) -> bool:
        return self.inner.check_files_exist(self._whole(snapshot), with_dvs, ahead)

    def check_exist(self, locations: list[tuple[str, str]]) -> None:
        self.inner.check_exist([where for where in locations if not self.files.holds(*where)])

    # -- snapshots ------------------------------------------------------------------------------

    def snapshot(self, version: int | None = None, listing: Any = None) -> TableSnapshot:
        return self._restricted(self.inner.snapshot(version, listing))

    def head(self, listing: Any = None) -> TableSnapshot:
        # The head lines carry the restricted table's size and file count: its files are needed.
        return self.snapshot(listing=listing)

    def built(self, snapshot: TableSnapshot) -> TableSnapshot:
        return snapshot

    def planned(self, snapshot: TableSnapshot, hint: dict[str, Any]) -> TableSnapshot:
        # The whole table's planning prunes its own files; the restricted ones' statistics are
        # their own, which the protocol side's hint filter reads.
        return snapshot

    def for_parquet(self, snapshot: TableSnapshot) -> TableSnapshot:
        # A restricted snapshot has no deletion vector: every file with one is derived.
        return snapshot

    def _whole(self, snapshot: TableSnapshot, listing: Any = None) -> TableSnapshot:
        found = snapshot.memo.get("whole")
        return found if found is not None else self.inner.snapshot(snapshot.version, listing)

    def _restricted(self, whole: TableSnapshot) -> TableSnapshot:
        bound = self.bound(whole.metadata)
        key = (whole.version, bound.key)
        with self._lock:
            done = self._built.get(key)
            if done is not None:
                self._built.move_to_end(key)
                return done
            future = self._builds.get(key)
            if future is None:
                future = _builds.submit(self._build, whole, bound)
                self._builds[key] = future
        try:
            restricted = future.result(timeout=self.answer_budget)
        except FutureTimeout:
            raise DerivationPending(
                f"the restricted table {self.table.schema}.{self.table.name} is being prepared for this "
                f"recipient (version {whole.version}); retry in a few seconds",
                RETRY_AFTER_SECONDS,
            ) from None
        except Exception:
            with self._lock:
                if self._builds.get(key) is future:
                    del self._builds[key]  # a failed build is tried again by the next request
            raise
        with self._lock:
            self._builds.pop(key, None)
            self._built[key] = restricted
            while len(self._built) > KEPT_VERSIONS:
                self._built.popitem(last=False)
        return restricted

    def _build(self, whole: TableSnapshot, bound: BoundRestriction) -> TableSnapshot:
        columns = whole.partition_columns
        files = list(whole.adds)
        decided = self._decisions(files, bound, columns, "add")
        # The files to derive are made two at a time (pyarrow reads, filters and writes outside
        # the GIL); the ones decided by their metadata alone take no thread.
        todo = [index for index, found in enumerate(decided) if found is DERIVE]
        made = _files.map(lambda index: self._derived_action(files[index], bound, columns, "add"), todo)
        for index, action in zip(todo, made, strict=True):
            decided[index] = action
        adds = [action for action in decided if action is not None]
        restricted = dataclasses.replace(
            whole,
            protocol=without_deletion_vectors(whole.protocol),
            metadata=restricted_metadata(whole.metadata, bound),
            adds=FileSet(adds),
        )
        restricted.memo["whole"] = whole
        return restricted

    def bound(self, metadata: dict[str, Any]) -> BoundRestriction:
        """The restriction bound for this reader's audience against one version's schema."""
        schema = metadata["schemaString"]
        with self._lock:
            found = self._bound.get(schema)
        if found is None:
            assert self.table.restriction is not None and self.table.audience is not None
            found = bind(self.table.restriction, schema, self.table.audience)
            with self._lock:
                self._bound[schema] = found
        return found

    # -- commits -----------------------------------------------------------------------------------

    def commit(self, listing: Any, version: int) -> list[Action]:
        return self._actions(self.inner.commit(listing, version), listing, version)

    def parquet_commit(self, listing: Any, version: int) -> list[Action]:
        return self._actions(self.inner.parquet_commit(listing, version), listing, version)

    def _actions(self, actions: list[Action], listing: Any, version: int) -> list[Action]:
        """One version's actions as the restriction allows them (bound against its schema)."""
        metadata = next((a["metaData"] for a in actions if "metaData" in a), None)
        if metadata is None:
            metadata = self.inner.snapshot(version, listing).metadata
        bound = self.bound(metadata)
        columns = list(metadata.get("partitionColumns") or [])
        earlier = EarlierStats(self.inner, listing, version)
        served: list[Action] = []
        for action in actions:
            kind = next(iter(action), None)
            if kind not in SERVED_ACTIONS:
                continue
            body = action[kind]
            if kind == "protocol":
                served.append({"protocol": without_deletion_vectors(body)})
            elif kind == "metaData":
                served.append({"metaData": restricted_metadata(body, bound)})
            elif kind == "commitInfo":
                served.append({"commitInfo": restricted_commit_info(body)})
            else:
                if kind == "remove" and not body.get("stats"):
                    body = body | {"stats": earlier.stats(body["path"])}
                made = self._file_action(body, bound, columns, kind)
                if made is not None:
                    served.append({kind: made})
        return served

    # -- one file -----------------------------------------------------------------------------------

    def _file_action(
        self, action: Action, bound: BoundRestriction, partition_columns: list[str], kind: str
    ) -> Action | None:
        """`action` (an add, remove or cdc) as served: as it is, left out (None), or derived."""
        (found,) = self._decisions([action], bound, partition_columns, kind)
        if found is DERIVE:
            return self._derived_action(action, bound, partition_columns, kind)
        return found

    def _decisions(
        self, actions: list[Action], bound: BoundRestriction, partition_columns: list[str], kind: str
    ) -> list[Action | None]:
        """Each of `actions` (all of one `kind`) as served where its metadata decides (as it
        is, or None: left out), else `DERIVE`. One tight loop: a 10,000-file snapshot's first
        answer waits for it. A filter on partition columns only is decided by a file's partition
        values alone, once per distinct values (such a table has few of them)."""
        if kind == "cdc":  # change files hold no statistics of their own: always derived
            return [DERIVE] * len(actions)
        names, by_values = self._judging(bound, partition_columns)
        as_it_is = not self._cuts_file(bound, partition_columns)
        verdicts: dict[tuple[Any, ...], str] = {}
        decided: list[Action | None] = []
        append = decided.append
        for action in actions:
            values = action.get("partitionValues") or {}
            if by_values:
                # The partition values as the log wrote them (one dict per file, in one order).
                key = tuple(values.items())
                found = verdicts.get(key)
                if found is None:
                    facts = file_facts(bound.table_columns, partition_columns, values, {}, names)
                    found = verdicts[key] = verdict(bound.predicate, facts)
            else:
                facts = file_facts(
                    bound.table_columns, partition_columns, values, parsed_stats(action), names
                )
                found = verdict(bound.predicate, facts)
            if found == "none":
                append(None)
            elif found == "all" and as_it_is and not action.get("deletionVector"):
                append(action)  # no column list: its partition values are all served
            else:
                append(DERIVE)
        return decided

    def _judging(self, bound: BoundRestriction, partition_columns: list[str]) -> tuple[set[str], bool]:
        """The columns a filter names, and whether they are partition columns only (asked for
        every file: worked out once per restriction and partitioning)."""
        key = (bound.key, tuple(partition_columns))
        found = self._judged.get(key)
        if found is None:
            names = column_names(bound.predicate) if bound.predicate is not None else set()
            found = self._judged[key] = (names, on_partitions(names, partition_columns))
        return found

    def _derived_action(
        self, action: Action, bound: BoundRestriction, partition_columns: list[str], kind: str
    ) -> Action | None:
        """`action` served as its derived file (None when no row of it is left)."""
        served_values = served_partition_values(action.get("partitionValues") or {}, bound, partition_columns)
        derived = self._derived(action, bound, partition_columns, kind == "cdc")
        if derived.uri is None:
            return None
        made: Action = {
            key: value
            for key, value in action.items()
            if key not in ("deletionVector", "stats", "tags", "baseRowId", "defaultRowCommitVersion")
        }
        made.update(path=derived.uri, size=derived.size, partitionValues=served_values)
        if kind == "add":
            made["stats"] = derived.stats
        return made

    def _cuts_file(self, bound: BoundRestriction, partition_columns: list[str]) -> bool:
        """Whether a file may hold a column the restriction does not serve: with a column list,
        every file. A cut partition column is in a Delta file's path (`region=emea/`), which
        its URL shows, and a file written before a column was dropped (column mapping,
        Iceberg) still holds it, which no schema of today's says."""
        return bound.columns is not None

    def _derived(
        self, action: Action, bound: BoundRestriction, partition_columns: list[str], change_file: bool
    ) -> DerivedFile:
        task = task_for(action, bound, change_file, self.inner.locate, self.inner.locate_dv)
        return run_task(task, self.inner.storage, self.files)

    def derivation_tasks(self, version: int | None = None) -> list[DerivationTask]:
        """The derived files a version's snapshot still lacks, to be made elsewhere (by Spark:
        `sharing-server share derive`); nothing is derived here, nor kept by this reader."""
        whole = self.inner.snapshot(version)
        bound = self.bound(whole.metadata)
        files = list(whole.adds)
        decided = self._decisions(files, bound, whole.partition_columns, "add")
        tasks = [
            task_for(add, bound, False, self.inner.locate, self.inner.locate_dv)
            for add, found in zip(files, decided, strict=True)
            if found is DERIVE
        ]
        return [task for task in tasks if self.files.find(task.name) is None]
