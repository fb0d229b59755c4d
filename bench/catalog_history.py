"""The catalogs' commit and load_table against the table's history: at 10 snapshots and at 1,000.

Every commit writes the table's whole metadata file and answers it whole (the spec's
`CommitTableResponse`), so some cost grows with the snapshots a table keeps; issue 39 asks that
nothing else does. The table gets one real append (a manifest list), then its history grows by
commits that each add a snapshot reusing that manifest list, sent as a writer's append sends them
(`add-snapshot`, `set-snapshot-ref main`, asserting main's snapshot): quick to make 1,000 of, and
the same metadata a streaming writer leaves.

Ours and SeaweedFS's, interleaved, at each size: the commit call as pyiceberg makes it (its
parse of the answered metadata included, as in the side-by-side rows), the same commit over the
client's signed session with the answer read but not parsed (what the catalog itself costs), and
`load_table` both ways. The goal (issue 39) is on our catalog's own cost: pyiceberg's parse of an answer the
spec makes every catalog send grows with the table on every client and is shown beside it, as is
SeaweedFS's growth, which writes and answers the same metadata.

Beside them, what no catalog that writes the file before it answers can save: the storage's write
of the very file (its bytes put under a scratch key by the server's own S3 client, `S3Storage`),
and the answer's transfer (load_table's growth, which answers the same bytes from memory). Their
growth over the commit at 10 snapshots is the floor of the commit's growth. On SeaweedFS the write
grows about 7 µs per KB: it gzips every upload named `*.json` (`IsCompressableFileType`, in
`weed/operation`), which the metadata files all are, before storing it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import requests
from pyiceberg.catalog.rest import Endpoints, RestCatalog
from pyiceberg.table import CommitTableRequest, Table, TableIdentifier
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

from bench.results import record
from bench.timing import ratio_row
from bench.warehouse_catalog import OURS, PREFIX, create, guarded, rows
from bench.warehouse_sides import NAMESPACE, Side
from share_store.storage.s3 import S3Settings, S3Storage
from testbed.seaweed import SeaweedS3

#: The table sizes compared, in snapshots, and the goal on the catalog's commit between them.
SIZES = (10, 1000)
COMMIT_GOAL = 1.5
SAMPLES = 20
#: What is timed at each size: pyiceberg's calls, the same requests with the answer unparsed, and
#: the storage's write of the table's metadata file.
WHAT = ("commit", "raw commit", "load", "raw load", "file write", "raw commit after gap")
#: The idle gap an append leaves its catalog while its client writes to S3 (`bench.wake`): the
#: commit is also timed after one, each catalog (and the S3) idle alike.
GAP_SECONDS = 0.04
#: Where the file's write is timed: a bucket of no catalog's, named as the catalogs name their files
#: (SeaweedFS decides by the name whether to compress what it is sent).
SCRATCH_BUCKET, SCRATCH_KEY = "benchscratch", "table/metadata/00001-scratch.metadata.json"


class History:
    """One table of a catalog whose snapshots are added cheaply, with signed raw requests beside
    pyiceberg's."""

    def __init__(self, side: Side, name: str = "history") -> None:
        catalog = side.connect()
        assert isinstance(catalog, RestCatalog)
        self.catalog = catalog
        self.table: Table = create(catalog, name)
        self.table.append(rows(0, 10))
        first = self.table.current_snapshot()
        assert first is not None
        self.template = first
        self.snapshots = 1
        self.parent = first.snapshot_id
        path = catalog._split_identifier_for_path(f"{NAMESPACE}.{name}")
        self.commit_url = catalog.url(Endpoints.update_table, prefixed=True, **path)
        self.load_url = catalog.url(Endpoints.load_table, prefixed=True, **path)
        self.session: requests.Session = catalog._session  # signed as pyiceberg signs

    def _next(self) -> tuple[tuple[AssertRefSnapshotId], tuple[AddSnapshotUpdate, SetSnapshotRefUpdate]]:
        snapshot_id = self.template.snapshot_id + self.snapshots
        snapshot = Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=self.parent,
            sequence_number=(self.template.sequence_number or 0) + self.snapshots,
            timestamp_ms=self.template.timestamp_ms + self.snapshots,
            manifest_list=self.template.manifest_list,
            summary=Summary(
                Operation.APPEND, **(self.template.summary or Summary(Operation.APPEND)).additional_properties
            ),
            schema_id=self.template.schema_id,
        )
        requirement = AssertRefSnapshotId(ref="main", snapshot_id=self.parent)
        ref = SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot_id)
        return (requirement,), (AddSnapshotUpdate(snapshot=snapshot), ref)

    def _added(self, updates: tuple[AddSnapshotUpdate, SetSnapshotRefUpdate]) -> None:
        self.snapshots += 1
        self.parent = updates[0].snapshot.snapshot_id

    def raw_commit(self) -> int:
        """One commit over the signed session, its answer read whole but not parsed: its size."""
        requirements, updates = self._next()
        identifier = TableIdentifier(namespace=(NAMESPACE,), name=self.table.name()[-1])
        body = CommitTableRequest(identifier=identifier, requirements=requirements, updates=updates)
        response = self.session.post(self.commit_url, data=body.model_dump_json().encode())
        if response.status_code != 200:
            raise RuntimeError(f"commit answered {response.status_code}: {response.text[:200]}")
        self._added(updates)
        return len(response.content)

    def pyiceberg_commit(self) -> None:
        requirements, updates = self._next()
        self.catalog.commit_table(self.table, requirements, updates)
        self._added(updates)

    def raw_load(self) -> int:
        response = self.session.get(self.load_url)
        if response.status_code != 200:
            raise RuntimeError(f"load answered {response.status_code}: {response.text[:200]}")
        return len(response.content)

    def pyiceberg_load(self) -> None:
        self.catalog.load_table(f"{NAMESPACE}.{self.table.name()[-1]}")

    def metadata_file(self) -> bytes:
        """The bytes of the metadata file the table's pointer names now."""
        table = self.catalog.load_table(f"{NAMESPACE}.{self.table.name()[-1]}")
        with table.io.new_input(table.metadata_location).open() as stream:
            return stream.read()

    def grow_to(self, snapshots: int) -> None:
        while self.snapshots < snapshots:
            self.raw_commit()


class FileWrites:
    """The storage's write of a metadata file, by the server's own S3 client, to a scratch key."""

    def __init__(self, seaweed: SeaweedS3) -> None:
        settings = S3Settings(endpoint=seaweed.endpoint, access_key=seaweed.access_key,
                              secret_key=seaweed.secret_key, region=seaweed.region)  # fmt: skip
        self.storage = S3Storage(settings)
        self.storage.create_bucket(SCRATCH_BUCKET)

    def write(self, data: bytes) -> None:
        self.storage.write(SCRATCH_BUCKET, SCRATCH_KEY, data)


def _floor_rows(got: dict[int, dict[str, float]], at: str) -> None:
    """Our metadata file's write, and the growth of our commit that it and the answer's transfer
    alone make: what the commit's growth cannot go below while the file is written before the
    answer (and the answer carries the whole metadata, as the spec has it)."""
    small, large = SIZES
    record(f"{PREFIX}: the metadata file's write to the storage (the server's S3 client), median {at}",
           f"{got[small]['file write']:.1f} / {got[large]['file write']:.1f} ms")  # fmt: skip

    def growth(what: str) -> float:
        return got[large][what] - got[small][what]

    grown = growth("file write") + growth("raw load")
    floor = (got[small]["raw commit"] + grown) / got[small]["raw commit"]
    ratio_row(f"{PREFIX}: commit at {large:,} / at {small:,}, its floor: the file's write and the answer's "
              "transfer grown, nothing else, ours", floor, None)  # fmt: skip


def _rounds(
    sides: list[Side],
    histories: dict[str, History],
    times: dict[str, dict[str, list[float]]],
    failures: dict[str, str],
    samples: int,
    step: Callable[[History, dict[str, list[float]]], object],
) -> None:
    """`samples` rounds of `step`, each side still standing in turn (`guarded`), its times in `times`."""
    for _ in range(samples):
        for side in sides:
            if side.label in histories and side.label not in failures:
                guarded(side, failures, partial(step, histories[side.label], times[side.label]))


def _sample(
    history: History,
    spent: dict[str, list[float]],
    ours: History | None = None,
    file_write: Callable[[], None] | None = None,
) -> None:
    """One of each timed call; for our side, the metadata file's write after them."""
    _timed(history.raw_commit, spent["raw commit"])
    _timed(history.pyiceberg_commit, spent["commit"])
    _timed(history.raw_load, spent["raw load"])
    _timed(history.pyiceberg_load, spent["load"])
    if history is ours and file_write is not None:
        _timed(file_write, spent["file write"])


def _after_gap(history: History, spent: dict[str, list[float]]) -> None:
    time.sleep(GAP_SECONDS)
    _timed(history.raw_commit, spent["raw commit after gap"])


def _timed(action: Callable[[], Any], times: list[float]) -> None:
    start = time.perf_counter()
    action()
    times.append(time.perf_counter() - start)


def history_rows(
    sides: list[Side],
    samples: int = SAMPLES,
    failures: dict[str, str] | None = None,
    seaweed: SeaweedS3 | None = None,
) -> None:
    """Commit and load_table medians of each catalog at each of `SIZES` snapshots, the sides
    interleaved, and their ratios; the goal is on ours. A side that fails leaves (`guarded`).
    With `seaweed` (the storage), our table's metadata file's write too, and the floor it sets."""
    failures = {} if failures is None else failures
    writes = FileWrites(seaweed) if seaweed is not None else None
    histories: dict[str, History] = {}
    for side in sides:
        history = guarded(side, failures, lambda side=side: History(side))
        if history is not None:
            histories[side.label] = history
    figures: dict[str, dict[int, dict[str, float]]] = {label: {} for label in histories}
    answers: dict[str, int] = {}
    for size in SIZES:
        for label, history in histories.items():
            side = next(s for s in sides if s.label == label)
            guarded(side, failures, lambda history=history, size=size: history.grow_to(size))
        times = {label: {what: [] for what in WHAT} for label in histories}
        ours_file = histories[OURS].metadata_file() if writes is not None and OURS in histories else None

        file_write = (
            partial(writes.write, ours_file) if writes is not None and ours_file is not None else None
        )
        sample = partial(_sample, ours=histories.get(OURS), file_write=file_write)
        _rounds(sides, histories, times, failures, samples, sample)
        # Apart, so that the rows above keep their conditions: each commit after the same idle gap.
        _rounds(sides, histories, times, failures, samples, _after_gap)
        for label, history in histories.items():
            if label not in failures:
                figures[label][size] = {
                    what: statistics.median(spent) * 1000 for what, spent in times[label].items() if spent
                }
                answers[label] = history.raw_load()
    small, large = SIZES
    at = f"at {small:,} / {large:,} snapshots"
    for label in histories:
        if label in failures:
            continue
        got = figures[label]

        def pair(what: str, got: dict[int, dict[str, float]] = got) -> str:
            return f"{got[small][what]:.1f} / {got[large][what]:.1f} ms"

        def growth(what: str, got: dict[int, dict[str, float]] = got) -> float:
            return got[large][what] / got[small][what]

        mine = label == OURS
        record(f"{PREFIX}: commit, answer read unparsed, median {at}, {label}", pair("raw commit"))
        record(
            f"{PREFIX}: commit, answer read unparsed, at {small:,} snapshots, interleaved (above) / each "
            f"after {GAP_SECONDS * 1000:.0f} ms idle (the gap an append leaves), medians, {label}",
            f"{got[small]['raw commit']:.1f} / {got[small]['raw commit after gap']:.1f} ms",
        )
        ratio_row(
            f"{PREFIX}: commit, answer read unparsed, median at {large:,} / at {small:,}, {label}",
            growth("raw commit"),
            COMMIT_GOAL if mine else None,
        )
        record(
            f"{PREFIX}: pyiceberg's commit call (its parse included), median {at}, {label}", pair("commit")
        )
        ratio_row(f"{PREFIX}: pyiceberg's commit call, median at {large:,} / at {small:,}, {label}",
                  growth("commit"), None)  # fmt: skip
        record(f"{PREFIX}: load_table, answer read unparsed, median {at}, {label}", pair("raw load"))
        ratio_row(f"{PREFIX}: load_table, answer read unparsed, median at {large:,} / at {small:,}, {label}",
                  growth("raw load"), None)  # fmt: skip
        record(f"{PREFIX}: pyiceberg's load_table (its parse included), median {at}, {label}", pair("load"))
        record(
            f"{PREFIX}: load_table's answer at {large:,} snapshots, {label}",
            f"{answers[label] / 1000:.0f} KB",
        )
        if mine and "file write" in got[small]:
            _floor_rows(got, at)
    for label, why in failures.items():
        record(f"{PREFIX}: history: no {label} figures ({why})", "-")
