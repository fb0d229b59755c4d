"""A compaction's input files: measured before any of their rows are read, then read in batches.

Within the provider's `Limits`, whatever the table says: each input file (and its delete files) is
measured from its footer before any of its rows are read (`parquet_bounds.measure`); one that
decodes past `row_group_decoded_mb` per row group, or `file_decoded_mb` in all, is left as it is
and named in the result. Rows are read in batches of about 16 MiB decoded, with the file's deletes
applied (`parquet_bounds.read_rows`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyiceberg.manifest import DataFile, FileFormat
from pyiceberg.table import Table

from share_store.catalog.maintenance.budget import Budget
from share_store.catalog.maintenance.configuration import Limits
from share_store.parquet_bounds import (
    DELETE_FILE_PATH,
    Shape,
    TooBig,
    measure,
    read_deletes,
    read_rows,
)


class Inputs:
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
