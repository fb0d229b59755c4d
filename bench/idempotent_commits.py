"""A table commit with an `Idempotency-Key` against one without (issue 52), on our server over
SeaweedFS: two tables, two pyiceberg clients (one adding a UUID key to each mutation, as Iceberg
1.11's Java client does once `/v1/config` advertises a lifetime), appends of 10 rows interleaved;
the commit call's median and p95 on each, and the ratio of the medians (goal <= 1.1x: a key is a
claim and a finalize in the store, and one more authentication, around the same commit).
`BENCH_WAREHOUSE=small` makes a shorter run.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import requests
from pyiceberg.catalog import Catalog
from requests.adapters import BaseAdapter

from bench.results import record
from bench.servers import running_seaweed
from bench.timing import ratio_row
from bench.warehouse_catalog import create, ms_stats, rows, timed_commits
from bench.warehouse_sides import our_side

#: The keyed commit's median over the plain one's, at most (issue 52).
GOAL = 1.1
PREFIX = "Idempotency-Key"


class KeyEachMutation(BaseAdapter):
    """In front of pyiceberg's own (SigV4) adapter: a fresh key on each POST, PUT and DELETE."""

    def __init__(self, inner: BaseAdapter) -> None:
        super().__init__()
        self.inner = inner

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        if request.method in ("POST", "PUT", "DELETE"):
            request.headers["Idempotency-Key"] = str(uuid.uuid4())
        return self.inner.send(request, **kwargs)

    def close(self) -> None:
        self.inner.close()


def keyed(catalog: Catalog) -> Catalog:
    uri = catalog.properties["uri"]
    session = catalog._session  # type: ignore[attr-defined]
    session.mount(uri, KeyEachMutation(session.get_adapter(uri)))
    return catalog


def bench_idempotent_commits(appends: int | None = None) -> None:
    appends = appends or (10 if os.environ.get("BENCH_WAREHOUSE", "") == "small" else 40)
    with running_seaweed() as seaweed, our_side(seaweed, name="run-idempotency") as (ours, _):
        plain, with_keys = ours.connect(), keyed(ours.connect())
        tables = {"without": create(plain, "plain_commits"), "with a key": create(with_keys, "keyed_commits")}
        for table in tables.values():
            table.append(rows(0, 10))  # untimed: the first append writes the first manifest list
        durations = {"without": timed_commits(plain), "with a key": timed_commits(with_keys)}
        order = list(tables.values())
        for n in range(1, appends + 1):
            # Each goes first every other round: neither always follows the other's leftovers (a
            # commit's old metadata files deleted once it answered, a key kept as it answers).
            for table in order if n % 2 else reversed(order):
                table.append(rows(n * 10, 10))
        stats = {label: ms_stats(seconds) for label, seconds in durations.items()}
        for label, (median, p95) in stats.items():
            record(
                f"{PREFIX}: commit of a 10-row append ({appends}), {label}, median / p95",
                f"{median:.1f} / {p95:.1f} ms",
            )
        ratio = stats["with a key"][0] / stats["without"][0]
        ratio_row(f"{PREFIX}: commit median ratio with a key / without", ratio, GOAL)
