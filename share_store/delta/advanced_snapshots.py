"""A held snapshot advanced by the commits after it, rather than replayed from a checkpoint.

A table that is written to while it is read gets a new version every few
commits: replaying the log from its checkpoint for each would cost as much as
a cold query (most of a second for 100,000 files), where applying the new
commits to the files already held costs a dictionary copy. The new snapshot
shares the unchanged files' actions, and keeps their pre-encoded lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from share_store.delta.collector import collector_paused
from share_store.delta.replay import ReplayState, file_identity
from share_store.tables.snapshot import TableSnapshot

#: A held snapshot's memo entry: its active files by identity, which later versions start from.
ACTIVE = "active files"


def advanced(base: TableSnapshot, version: int, commits: Iterable[list[dict[str, Any]]]) -> TableSnapshot:
    """`base` (a held snapshot) with `commits`, every commit after it up to `version`, applied."""
    with collector_paused():
        held = base.memo.get(ACTIVE) or {file_identity(add): add for add in base.adds}
        state = ReplayState(base.protocol, base.metadata, dict(held))
        touched = set()
        for commit in commits:
            for action in commit:
                state.apply(action)
                file = action.get("add") or action.get("remove")
                if file is not None:
                    touched.add(file_identity(file))
        assert state.protocol is not None and state.metadata is not None
        snapshot = TableSnapshot(version, state.protocol, state.metadata, state.files())
        snapshot.memo[ACTIVE] = state.active
        # Commits touch few files: only theirs can have gone.
        gone = [
            id(held[identity])
            for identity in touched
            if identity in held and state.active.get(identity) is not held[identity]
        ]
        for key, derived in list(base.memo.items()):
            if isinstance(key, tuple) and key[0] == "lines":  # keyed by their actions' ids
                kept = derived.copy()
                for action_id in gone:
                    kept.pop(action_id, None)
                snapshot.memo[key] = kept
    return snapshot
