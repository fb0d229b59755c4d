"""The files of one `/query` page: planned with its predicate hint, filtered, cut at its limit and page.

The order matters for cost: the hint is parsed before any table work (a hint
over the node cap costs next to nothing), compiled within the same CPU budget
that evaluating it gets, and files are cut to the page before encoding, so
earlier pages' files are neither signed nor counted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from share_store.tables import actions
from share_store.tables.compiled_hints import compile_hint
from share_store.tables.predicates import parse_hint
from share_store.tables.reader import TableReader
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing.hint_filter import HintFilter, HintLimits
from sharing_server.delta_sharing.paging import PageOf
from sharing_server.delta_sharing.responses import PageRequest


@dataclass(frozen=True)
class Hint:
    """A parsed predicate hint, and the CPU parsing it took (charged to its budget)."""

    tree: dict[str, Any]
    parsing: float


def parse_query_hint(text: str | None, max_nodes: int) -> Hint | None:
    """The request's `jsonPredicateHints`, parsed; None without one."""
    if not text:
        return None
    started = time.thread_time()
    tree = parse_hint(text, max_nodes)
    return Hint(tree, time.thread_time() - started) if tree is not None else None


@dataclass(frozen=True)
class QueryFiles:
    """What a `/query` page lists: the snapshot its files come from, and which of them.

    `selected` is None when every file goes (no hint, no limit, no page cut):
    then no entry need be made for each file.
    """

    files_of: TableSnapshot
    selected: Iterator[actions.FileEntry] | None
    hint_filter: HintFilter | None
    cut: PageOf[Any] | None


def query_files(
    reader: TableReader,
    snapshot: TableSnapshot,
    response_format: str,
    hint: Hint | None,
    limits: HintLimits,
    page: PageRequest,
    limit: int | None,
    gone: threading.Event | None,
) -> QueryFiles:
    """`snapshot`'s files for one page, checked present in storage first."""
    # Head lines keep describing the whole snapshot; only the files are planned.
    files_of = snapshot if hint is None else reader.planned(snapshot, hint.tree)
    if response_format == "parquet" and files_of is not snapshot:
        files_of = reader.for_parquet(files_of)
    hint_filter = None
    if hint is not None:
        budget = limits.budget_seconds(snapshot.num_files)
        hint_filter = _hint_filter(hint, files_of, budget, page.resumed, gone)
    reader.check_files_exist(files_of, with_dvs=response_format == "delta")
    selected = None if hint_filter is None and limit is None else _selected(files_of, hint_filter, limit)
    cut = None
    if page.cuts:
        entries = selected if selected is not None else actions.entries(files_of)
        cut = PageOf(entries, page.paging.offset, page.paging.size)
        selected = iter(cut)
    return QueryFiles(files_of, selected, hint_filter, cut)


def _hint_filter(
    hint: Hint,
    files_of: TableSnapshot,
    budget: float | None,
    resumed: dict[str, Any] | None,
    gone: threading.Event | None,
) -> HintFilter:
    """The hint compiled for `files_of`; its budget covers parsing and compiling it too."""
    started = time.thread_time()
    check = compile_hint(hint.tree, files_of.partition_columns, actions.physical_names(files_of))
    spent = hint.parsing + time.thread_time() - started
    return HintFilter(check, budget, resumed, gone, spent)


def _selected(
    snapshot: TableSnapshot, hint: HintFilter | None, limit: int | None
) -> Iterator[actions.FileEntry]:
    """Files left after predicate hints, cut once `limitHint` rows are covered."""
    entries = actions.entries(snapshot)
    if hint is not None:
        entries = hint.apply(entries)
    records = 0
    for entry in entries:
        if limit is not None and records >= limit:
            return
        yield entry
        if limit is not None:
            # Files without stats count as zero rows: we keep listing rather
            # than risk returning fewer rows than asked for.
            records += max((entry.num_records or 0) - entry.deleted_rows, 0)
