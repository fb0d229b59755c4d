"""A `/query`'s predicate hint applied to its files within a CPU budget, and stopped if the client leaves.

Hints are advisory: a file a hint keeps needlessly costs the recipient a read,
never a wrong answer. So once a listing has spent its budget evaluating the
hint, it stops applying it and keeps every file after that point; the files it
skipped before were skipped rightly. The budget is CPU time of the evaluating
thread (other requests' threads do not eat into it), taken in batches of files
so that reading the clock stays off the per-file path.

Pages of one listing must cut the same list, and a budget spent at slightly
different files each time would not. So each page token carries how far the
hint went: the file index where it stopped (`hc`), or how many files it was
applied to without stopping (`hn`). The next page applies it to those files
again whatever the time, and only beyond them may it stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from share_store.tables.actions import FileEntry
from share_store.tables.compiled_hints import FileCheck
from share_store.tables.predicates import MAX_NODES
from sharing_server.http.errors import ClientGone

#: Files in a budgeted table: a table of N files gets N / BUDGET_FILES budgets (at least one).
BUDGET_FILES = 10_000
#: Batches of files between clock readings grow up to this, and while a batch takes under a ms.
MAX_BATCH = 256
BATCH_SECONDS = 0.001


@dataclass(frozen=True)
class HintLimits:
    """How much of a predicate hint the server evaluates ([limits] in the configuration)."""

    max_nodes: int = MAX_NODES
    # CPU ms per 10,000 files of the table (at least this for a smaller one); 0: no budget.
    budget_ms: float = 50.0

    def budget_seconds(self, files: int) -> float | None:
        """The CPU time a listing of `files` files may spend on its hint; None when unlimited."""
        if self.budget_ms <= 0:
            return None
        return self.budget_ms / 1000 * max(1.0, files / BUDGET_FILES)


class HintFilter:
    """The files of one listing that its compiled hint keeps, within `budget` CPU seconds.

    `resumed` is the page token's payload when this listing continues an
    earlier page; `gone` is set when the client disconnects, which ends the
    listing with ClientGone; `spent` is what parsing and compiling the hint
    already took of the budget.
    """

    def __init__(
        self,
        check: FileCheck,
        budget: float | None,
        resumed: dict[str, Any] | None = None,
        gone: threading.Event | None = None,
        spent: float = 0.0,
    ) -> None:
        self.check = check
        self.budget = budget
        self.gone = gone
        resumed = resumed or {}
        #: The index from which the hint no longer applies, once known.
        self.cut: int | None = int(resumed["hc"]) if "hc" in resumed else None
        #: Files that must be judged by the hint whatever the time: earlier pages did.
        self.forced = self.cut if self.cut is not None else int(resumed.get("hn", 0))
        self.examined = 0
        self.spent = spent

    def page_state(self) -> dict[str, Any]:
        """What the next page's token must carry for that page to cut the list as this one did."""
        if self.cut is not None:
            return {"hc": self.cut}
        return {"hn": max(self.examined, self.forced)}

    def apply(self, entries: Iterable[FileEntry]) -> Iterator[FileEntry]:
        """`entries` without those the hint proves hold no matching row."""
        iterator = iter(entries)
        check = self.check
        batch = 1
        while True:
            if self.gone is not None and self.gone.is_set():
                raise ClientGone()
            spent = self.budget is not None and self.spent > self.budget
            if spent and self.cut is None and self.examined >= self.forced:
                self.cut = self.examined
            if self.cut is not None and self.examined >= self.cut:
                yield from iterator  # the hint is spent: every file from here on is kept
                return
            # A batch ends where the hint must stop, or where it may start to.
            limit = min(batch, self.cut - self.examined) if self.cut is not None else batch
            if self.examined < self.forced:
                limit = min(limit, self.forced - self.examined)
            kept = []
            count = 0
            started = time.thread_time()
            for entry in iterator:
                count += 1
                if check(entry) is not False:
                    kept.append(entry)
                if count == limit:
                    break
            took = time.thread_time() - started
            self.examined += count
            self.spent += took
            yield from kept
            if count < limit:
                return  # no files left
            if took < BATCH_SECONDS and batch < MAX_BATCH:
                batch *= 2
