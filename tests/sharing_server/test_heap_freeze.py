"""What a started server holds is left out of later garbage collections, once per process."""

from __future__ import annotations

import gc
import threading

import pytest

from sharing_server import app


def test_the_heap_is_frozen_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each full collection walked the 200,000 objects a started server holds, a pause of 140 to 490 ms
    under load that every request in flight waited out."""
    monkeypatch.setattr(app, "_heap_frozen", threading.Event())
    app.freeze_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 0
    kept = [[index] for index in range(1000)]  # tracked objects made after the start
    app.freeze_heap()
    # Not frozen again (tests start many apps in one process): that would add the 1,000 lists. The
    # count may fall meanwhile, as frozen objects other threads held are freed.
    assert gc.get_freeze_count() <= frozen
    del kept
