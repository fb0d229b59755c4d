"""A snapshot's ancestry by hand, against pyiceberg's own `ancestors_of`: the same snapshots in the
same order, for a chain, a rolled-back branch, an expired parent and a parent loop."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pyiceberg.table.snapshots import ancestors_of

from share_store.iceberg.ancestry import ancestors


def snap(snapshot_id: int, parent: int | None) -> Any:
    return SimpleNamespace(snapshot_id=snapshot_id, parent_snapshot_id=parent)


def metadata(*snapshots: Any) -> Any:
    by_id = {s.snapshot_id: s for s in snapshots}
    return SimpleNamespace(snapshots=list(snapshots), snapshot_by_id=by_id.get)


def test_the_same_ancestry_as_pyicebergs() -> None:
    chain = [snap(1, None), snap(2, 1), snap(3, 2), snap(4, 2), snap(5, 4)]  # 3: rolled back
    table = metadata(*chain)
    for current in chain:
        assert ancestors(table, current) == list(ancestors_of(current, table))
    assert [s.snapshot_id for s in ancestors(table, chain[-1])] == [5, 4, 2, 1]


def test_an_expired_parent_ends_it_and_a_loop_is_walked_once() -> None:
    assert [s.snapshot_id for s in ancestors(metadata(snap(7, 6), snap(8, 7)), snap(8, 7))] == [8, 7]
    looped = metadata(snap(1, 2), snap(2, 1))
    assert [s.snapshot_id for s in ancestors(looped, looped.snapshots[0])] == [1, 2]
