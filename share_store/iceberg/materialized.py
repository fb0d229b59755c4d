"""An Iceberg table's files with deletes, in the forms the parquet response format can carry.

The parquet format has no deletion vectors. With `deletes_in_parquet =
"materialize"`, a data file with deletes is served as a copy without its
deleted rows, and a version that deletes rows gets `cdc` files of the rows it
deleted and inserted, as Delta writes them for a DELETE with deletion vectors.
Every file is written once to the cache of derived files (`derived.py`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from share_store.iceberg.deletes import positions
from share_store.iceberg.derived import (
    DerivedFiles,
    change_rows,
    materialized_add,
    vector_payload,
    without_rows,
)
from share_store.iceberg.mapping import without_deletion_vectors
from share_store.tables.active_files import FileSet
from share_store.tables.snapshot import TableSnapshot

Action = dict[str, Any]
Location = tuple[str, str]

#: Memo keys of a held snapshot: its files' copies by the originals' ids, and the memo of its copy.
COPIES = "materialized copies"
COPIES_MEMO = "materialized memo"


class Materialized:
    """Materialized copies and change files of one table, made on first use and remembered."""

    def __init__(
        self,
        derived: DerivedFiles,
        read: Callable[[str, str], bytes],
        locate: Callable[[str], Location],
        locate_dv: Callable[[Action], Location | None],
    ) -> None:
        self.derived = derived
        self.read = read
        self.locate = locate
        self.locate_dv = locate_dv
        self._copies: dict[tuple[str, str], tuple[str, int]] = {}
        self._lock = threading.Lock()

    def snapshot(self, snapshot: TableSnapshot) -> TableSnapshot:
        """`snapshot` with each file that has a vector replaced by its copy.

        The copies' actions are kept in the held snapshot's memo, and the result
        gets a memo of its own kept there too: its pre-encoded lines are then
        made once, not by every response (they are keyed by the actions' ids,
        which the kept copies hold). A planned subset shares its held snapshot's
        memo (`TableSnapshot.narrowed`), so it finds the same copies and lines.
        """
        copies: dict[int, Action] = snapshot.memo.setdefault(COPIES, {})
        adds = []
        for add in snapshot.adds:
            if add.get("deletionVector"):
                copy = copies.get(id(add))
                if copy is None:
                    copy = copies[id(add)] = self.add(add)
                add = copy
            adds.append(add)
        materialized = dataclasses.replace(
            snapshot, adds=FileSet(adds), protocol=without_deletion_vectors(snapshot.protocol)
        )
        object.__setattr__(materialized, "memo", snapshot.memo.setdefault(COPIES_MEMO, {}))
        return materialized

    def commit(self, commit: list[Action]) -> list[Action]:
        """A version's actions with copies for files with vectors, and `cdc` files of its rows."""
        removes = {a["remove"]["path"]: a["remove"] for a in commit if "remove" in a}
        adds = {a["add"]["path"]: a["add"] for a in commit if "add" in a}
        actions = [a for a in commit if "add" not in a and "remove" not in a]
        changes = []
        if not any(body.get("dataChange", True) for body in (*removes.values(), *adds.values())):
            # A rewrite that changes no rows (Iceberg's `replace`): no change rows, and no copies,
            # since readers of changes skip files that are no data change.
            return commit
        for path, remove in removes.items():
            before = self.vector(remove)
            add = adds.get(path)
            if add is None:  # the file's live rows are deleted
                changes.append(self._change(remove, before, b"", set(positions(before)), False, "delete"))
            else:  # its vector grew: the rows only the new one holds are deleted
                after = self.vector(add)
                deleted = set(positions(after)) - set(positions(before))
                changes.append(self._change(add, before, after, deleted, True, "delete"))
            actions.append({"remove": self.remove(remove) if before else remove})
        for path, add in adds.items():
            after = self.vector(add)
            if path not in removes:
                changes.append(self._change(add, b"", after, set(positions(after)), False, "insert"))
            actions.append({"add": self.add(add) if after else add})
        return actions + [{"cdc": change} for change in changes]

    def add(self, add: Action) -> Action:
        uri, size = self._copy(add)
        return materialized_add(add, uri, size)

    def remove(self, remove: Action) -> Action:
        uri, size = self._copy(remove)
        return {key: value for key, value in remove.items() if key != "deletionVector"} | {
            "path": uri,
            "size": size,
        }

    def vector(self, action: Action) -> bytes:
        """The serialized vector of an add or remove; empty when it has none."""
        descriptor = action.get("deletionVector")
        if not descriptor:
            return b""
        location = self.locate_dv(descriptor)
        return vector_payload(descriptor, self.read(*location) if location else None)

    def _copy(self, action: Action) -> tuple[str, int]:
        """URI and size of the file's copy without the rows its vector deletes."""
        key = (action["path"], action["deletionVector"]["pathOrInlineDv"])
        with self._lock:
            found = self._copies.get(key)
        if found is None:
            payload = self.vector(action)
            source = self.locate(action["path"])
            found = self.derived.materialized(
                action["path"], payload, lambda: without_rows(self.read(*source), set(positions(payload)))
            )
            with self._lock:
                self._copies[key] = found
        return found

    def _change(
        self, action: Action, before: bytes, after: bytes, rows: set[int], inside: bool, change_type: str
    ) -> Action:
        """A `cdc` action of the file's rows at `rows` (or, not `inside`, all the others)."""
        source = self.locate(action["path"])
        uri, size = self.derived.change_file(
            action["path"],
            before,
            after,
            change_type,
            lambda: change_rows(self.read(*source), rows, inside, change_type),
        )
        return {"path": uri, "partitionValues": action["partitionValues"], "size": size, "dataChange": False}
