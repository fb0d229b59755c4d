"""A snapshot's ancestry, newest first, as pyiceberg's `ancestors_of` gives it, in linear time.

Written by hand because pyiceberg 0.12 looks each parent up with `snapshot_by_id`, a scan of all
the table's snapshots: quadratic, 23 ms per call at 1,100 snapshots (a streaming writer's table
within the default 120 hours of history), paid on every query of the shared table.
"""

from __future__ import annotations

from typing import Any


def ancestors(metadata: Any, snapshot: Any) -> list[Any]:
    """`snapshot` and its parents, newest first, up to the first whose parent is gone (expired)."""
    by_id = {s.snapshot_id: s for s in metadata.snapshots}
    chain: list[Any] = []
    seen: set[int] = set()
    current = snapshot
    while current is not None and current.snapshot_id not in seen:  # `seen`: no loop, whatever a file says
        chain.append(current)
        seen.add(current.snapshot_id)
        parent = current.parent_snapshot_id
        current = by_id.get(parent) if parent is not None else None
    return chain
