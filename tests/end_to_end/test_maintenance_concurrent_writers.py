"""Maintenance runs over and over while several writers commit to the same table: no commit is lost.

A served deployment; four pyiceberg clients of the REST catalog write `race.db.events`
(format v2, partitioned by writer), each its own identifiable rows: three append small
batches, one (`d`) appends, then deletes all its live rows or overwrites them with new ones.
Every writer retries a commit that loses the catalog's compare-and-swap as a streaming writer
does: refresh, then make the commit again on the new head (a delete or overwrite that a
compaction made stale is made again from the start). Meanwhile the provider asks the
catalog's HTTP API to run maintenance, again and again, until the writers are done (they go
on appending until a compaction has landed among their commits), and a recipient follows the
shared table's change data feed as a streaming reader does. The table starts with a tag past
its age, so that snapshot expiry commits during the race too.

Then, whatever the interleaving: the table holds exactly the rows the writers committed (none
lost, none doubled); the recipient reads the same; the change data feed from version 0, and
the one followed version by version, hold each inserted row once as an insert and each deleted
row once as a delete, with no row for a compaction; every version the server lists answers
with as many rows as its changes add up to, and the compactions' versions read the rows of the
version before them.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation, ancestors_of
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import ADMIN_TOKEN, Deployment
from tests.end_to_end.test_warehouse_engines import share

WAREHOUSE = "race"
IDENTIFIER = "db.events"
TABLE_PATH = f"/{WAREHOUSE}/namespaces/db/tables/events"
APPENDERS = ("a", "b", "c")
#: Commits each appender makes at least, rows in each; at most MOST_APPENDS while no compaction landed.
APPENDS, MOST_APPENDS, ROWS = 20, 40, 5
#: A streaming writer's trigger interval: it commits a micro-batch at most this often.
TRIGGER_SECONDS = 0.05
#: The deleting writer's rounds: two appends, then a delete of all it has (even) or an overwrite (odd).
ROUNDS = 6
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "writer", StringType(), required=False),
    NestedField(3, "v", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("writer", pa.string()), pa.field("v", pa.string())])
Row = tuple[int, str, str]


@pytest.fixture(scope="module")
def api(server: Deployment) -> Iterator[httpx.Client]:
    """The catalog's HTTP API as the provider."""
    with server.catalog_api(ADMIN_TOKEN) as client:
        yield client


def client(server: Deployment) -> Catalog:
    """A writer's own catalog client, as a separate engine would have."""
    return load_catalog(f"race-{uuid.uuid4().hex[:8]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip


def batch(rows: list[Row]) -> pa.Table:
    ids, writers, values = zip(*rows, strict=True)
    return pa.table({"id": list(ids), "writer": list(writers), "v": list(values)}, schema=ARROW)


@dataclass
class Writer:
    """What one writer committed, as it knows it: the truth the table is checked against."""

    name: str
    inserted: list[Row] = field(default_factory=list)
    deleted: list[Row] = field(default_factory=list)
    live: set[Row] = field(default_factory=set)
    commits: int = 0
    attempts: int = 0
    conflicts: int = 0  # a lost compare-and-swap, once pyiceberg's own retries are spent
    stale: int = 0  # a delete or overwrite planned on files a compaction rewrote meanwhile

    def commit(self, table: Table, change: Callable[[Table], None]) -> None:
        """`change` committed once, made again on a fresh head for as long as it conflicts. Both
        exceptions mean the commit did not land (pyiceberg deletes its files before raising)."""
        while True:
            self.attempts += 1
            try:
                change(table)
            except CommitFailedException:
                self.conflicts += 1
            except ValidationException:
                self.stale += 1
            else:
                self.commits += 1
                return
            table.refresh()

    def rows(self, count: int) -> list[Row]:
        start = ord(self.name) * 1_000_000 + len(self.inserted)
        return [(start + i, self.name, f"{self.name}{start + i}") for i in range(count)]

    def append(self, table: Table, count: int) -> None:
        time.sleep(TRIGGER_SECONDS)
        rows = self.rows(count)
        self.commit(table, lambda t: t.append(batch(rows)))
        self.inserted += rows
        self.live |= set(rows)

    def delete_all(self, table: Table) -> None:
        # All of its partition: whole files go, so the change data feed holds these rows alone.
        self.commit(table, lambda t: t.delete(f"writer == '{self.name}'"))
        self.deleted += sorted(self.live)
        self.live = set()

    def overwrite_all(self, table: Table, count: int) -> None:
        rows = self.rows(count)
        self.commit(
            table,
            lambda t: t.overwrite(batch(rows), overwrite_filter=f"writer == '{self.name}'"),
        )
        self.deleted += sorted(self.live)
        self.inserted += rows
        self.live = set(rows)


@dataclass
class Runs:
    """The maintenance runs asked for, each kind's status, message and details."""

    answers: list[dict[str, Any]] = field(default_factory=list)
    compacted: threading.Event = field(default_factory=threading.Event)

    def compactions(self) -> list[int]:
        found = (runs["icebergCompaction"]["details"].get("snapshot_id") for runs in self.answers)
        return [snapshot_id for snapshot_id in found if snapshot_id]

    def expired_refs(self) -> int:
        return sum(
            runs["icebergSnapshotManagement"]["details"].get("refs_removed", 0) for runs in self.answers
        )

    def seconds(self) -> dict[str, list[float]]:
        return {kind: [runs[kind]["details"]["seconds"] for runs in self.answers] for kind in self.answers[0]}

    def failures(self) -> list[tuple[str, Any]]:
        return [
            (kind, run)
            for runs in self.answers
            for kind, run in runs.items()
            if run["status"] != "Successful"
        ]

    def run(self, api: httpx.Client) -> None:
        answer = api.post(f"{TABLE_PATH}/maintenance/run")
        assert answer.status_code == 200, answer.text
        self.answers.append(answer.json()["runs"])
        if self.compactions():
            self.compacted.set()


def appender(writer: Writer, catalog: Catalog, runs: Runs) -> None:
    table = catalog.load_table(IDENTIFIER)
    while writer.commits < APPENDS or (not runs.compacted.is_set() and writer.commits < MOST_APPENDS):
        writer.append(table, ROWS)


def deleter(writer: Writer, catalog: Catalog) -> None:
    table = catalog.load_table(IDENTIFIER)
    for round_ in range(ROUNDS):
        writer.append(table, ROWS)
        writer.append(table, ROWS)
        if round_ % 2 == 0:
            writer.delete_all(table)
        else:
            writer.overwrite_all(table, 2)


@dataclass
class Follower:
    """A recipient reading the change data feed as it grows, from the version after the last read."""

    url: str
    changes: list[pd.DataFrame] = field(default_factory=list)
    last: int = -1

    def follow(self) -> None:
        latest = delta_sharing.get_table_version(self.url)
        if latest > self.last:
            self.changes.append(
                delta_sharing.load_table_changes_as_pandas(
                    self.url, starting_version=self.last + 1, ending_version=latest
                )
            )
            self.last = latest

    def run(self, done: threading.Event) -> None:
        while not done.wait(0.5):
            self.follow()


def changed(changes: pd.DataFrame, kind: str) -> Counter[Row]:
    picked = changes[changes["_change_type"] == kind]
    return as_rows(picked)


def as_rows(frame: pd.DataFrame) -> Counter[Row]:
    return Counter(zip(frame["id"].astype(int), frame["writer"], frame["v"], strict=True))


def version_rows(server: Deployment, url: str, version: int) -> int:
    """How many rows the server's answer for `version` holds, by its files' stats (nothing read)."""
    profile, name = url.split("#")
    share_name, schema, table = name.split(".")
    token = json.loads(open(profile).read())["bearerToken"]
    answer = httpx.post(f"{server.endpoint}/shares/{share_name}/schemas/{schema}/tables/{table}/query",
                        json={"version": version}, headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert answer.status_code == 200, (version, answer.text)
    files = [json.loads(line)["file"] for line in answer.text.splitlines() if '"file"' in line]
    return sum(json.loads(file["stats"])["numRecords"] for file in files)


def test_maintenance_loses_no_commit_of_concurrent_writers(server: Deployment, api: httpx.Client) -> None:
    started = time.monotonic()
    assert api.post("/warehouses", json={"name": WAREHOUSE}).status_code == 200
    admin = client(server)
    admin.create_namespace("db")
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "writer"))
    table = admin.create_table(
        IDENTIFIER, schema=SCHEMA, partition_spec=spec, properties={"format-version": "2"}
    )
    seed = Writer("s")
    seed.append(table, ROWS)
    # A tag already past its age: snapshot expiry removes it in its first run, among the writers' commits.
    seeded = table.current_snapshot()
    assert seeded is not None
    table.manage_snapshots().create_tag(seeded.snapshot_id, "seed", max_ref_age_ms=1).commit()
    url = share(server, WAREHOUSE, "db", "events")
    follower = Follower(url)
    follower.follow()  # subscribed before the race: version 0 is the seed's append
    assert follower.last == 0

    runs = Runs()
    writers = [Writer(name) for name in (*APPENDERS, "d")]
    work = [threading.Thread(target=appender, args=(w, client(server), runs)) for w in writers[:-1]]
    work.append(threading.Thread(target=deleter, args=(writers[-1], client(server))))
    done = threading.Event()

    def maintain() -> None:
        while not done.is_set():
            runs.run(api)

    side = [threading.Thread(target=maintain), threading.Thread(target=follower.run, args=(done,))]
    for thread in (*work, *side):
        thread.start()
    for thread in work:
        thread.join()
    done.set()
    for thread in side:
        thread.join()
    raced, during = time.monotonic() - started, len(runs.compactions())
    runs.run(api)  # one more, alone: what the race left small is compacted now
    writers.append(seed)
    report = {w.name: (w.commits, w.attempts, w.conflicts, w.stale) for w in writers}
    print(f"\nrace {raced:.1f}s: {len(runs.answers) - 1} maintenance runs, {during} compactions; "
          f"writers' (commits, attempts, lost swaps, stale plans) {report}")  # fmt: skip
    print(f"each run's seconds, by kind: {runs.seconds()}")
    assert runs.failures() == []
    assert during >= 1, "no compaction landed among the writers' commits"
    assert runs.expired_refs() == 1 and "seed" not in admin.load_table(IDENTIFIER).metadata.refs
    assert writers[-2].commits == ROUNDS * 3 and all(w.commits >= APPENDS for w in writers[:-2])

    inserted = Counter(row for w in writers for row in w.inserted)
    deleted = Counter(row for w in writers for row in w.deleted)
    live = Counter(row for w in writers for row in w.live)
    assert max(inserted.values()) == 1 and max(deleted.values()) == 1 and live == inserted - deleted

    # The table, as its writers' catalog reads it: every committed row once, no deleted one.
    final = admin.load_table(IDENTIFIER)
    assert as_rows(final.scan().to_pandas()) == live
    # A recipient of the shared table reads the same.
    assert as_rows(delta_sharing.load_as_pandas(url)) == live

    # Versions were numbered as the follower saw snapshots appear: one per snapshot of main, in
    # order, none expired (the tag alone was).
    head = final.current_snapshot()
    assert head is not None
    snapshots = list(reversed(list(ancestors_of(head, final.metadata))))
    latest = delta_sharing.get_table_version(url)
    assert latest == len(snapshots) - 1
    compactions = {
        v for v, s in enumerate(snapshots) if s.summary and s.summary.operation == Operation.REPLACE
    }
    assert {snapshots[v].snapshot_id for v in compactions} == set(runs.compactions())

    # The change data feed from version 0: each row inserted once, deleted once, and no row for
    # the compactions (they change no data). Followed as it grew, the feed is the same.
    feed = delta_sharing.load_table_changes_as_pandas(url, starting_version=0, ending_version=latest)
    assert set(feed["_change_type"]) == {"insert", "delete"}
    assert changed(feed, "insert") == inserted and changed(feed, "delete") == deleted
    assert compactions.isdisjoint(set(feed["_commit_version"]))
    follower.follow()
    followed = pd.concat(follower.changes)
    assert changed(followed, "insert") == inserted and changed(followed, "delete") == deleted

    # Every version answers with the rows its changes add up to; the feed read every file a
    # writer added, and the compactions' versions are read whole here: the files they added too.
    by_version = {int(version): frame for version, frame in feed.groupby("_commit_version")}
    state: Counter[Row] = Counter()
    for version in range(latest + 1):
        before = state.copy()
        if version in by_version:
            state += changed(by_version[version], "insert")
            state -= changed(by_version[version], "delete")
        assert version_rows(server, url, version) == state.total(), version
        if version in compactions:
            assert state == before
            assert as_rows(delta_sharing.load_as_pandas(url, version=version)) == state, version
    assert state == live
    print(f"checked in {time.monotonic() - started:.1f}s: {latest + 1} versions")
