"""The cyclic garbage collector held off while a replay builds its dictionaries."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_pause_lock = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a replay builds its dictionaries.

    A replay makes a few dictionaries per file, long-lived and free of cycles;
    the collector, set off by every few hundred allocations, would walk them
    again and again: a quarter of a cold 100,000-file replay. Reference counting
    still frees everything meanwhile. Replays in several threads share one
    pause, which ends with the last of them.
    """
    global _pauses, _resume
    with _pause_lock:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()
