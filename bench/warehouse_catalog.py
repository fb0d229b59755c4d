"""AIStor Tables (`/_iceberg`) against SeaweedFS's own Iceberg REST catalog, side by side in one run.

Both catalogs keep their data in the same SeaweedFS S3 (bench.warehouse_sides) and are
driven by pyiceberg with SigV4, v2 tables (pyiceberg 0.12 cannot write v3):

1. `load_table` of a table of `snapshots` snapshots, `loads` times, ours and theirs
   interleaved: median and p95;
2. `appends` appends of 10 rows to a table, interleaved: median and p95 of the whole
   append (data file, manifests, commit) and of its commit call alone;
3. `writers` threads, each with its own catalog client, appending one row `per_writer`
   times at once, retrying after a reload on `CommitFailedException` (pyiceberg's own
   retries with backoff turned off for this table): commits per second, retries, and
   lost commits (appends that returned but whose row is not in the table; its append
   snapshots and rows must both be writers x per_writer: our server's own maintenance may
   add compaction snapshots meanwhile, counted apart), and the CPU of the clients (this process),
   our server and `weed` while they wrote.

Where SeaweedFS's catalog cannot be set up or fails a step, our figures stay and a row
says why the anchor is missing. `BENCH_WAREHOUSE=small` makes a shorter run.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

from bench.procfs import cpu_seconds
from bench.results import record
from bench.servers import running_seaweed
from bench.timing import ratio_row
from bench.warehouse_sides import NAMESPACE, Side, our_side, seaweed_side

T = TypeVar("T")
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
OURS = "ours"
PREFIX = "AIStor Tables"
#: Attempts of one concurrent append (CommitFailedException or any other error) before giving up.
MAX_ATTEMPTS = 200
#: Our commit call's median over SeaweedFS's, at most (issue 39).
COMMIT_GOAL = 1.0


@dataclass(frozen=True)
class Sizes:
    loads: int = 50
    snapshots: int = 20
    appends: int = 20
    writers: int = 16
    per_writer: int = 20
    #: Commits and loads timed at each table size of `bench.catalog_history`.
    history_samples: int = 20


SMALL = Sizes(loads=10, snapshots=5, appends=5, writers=4, per_writer=5, history_samples=6)


def sizes_from_env() -> Sizes:
    return SMALL if os.environ.get("BENCH_WAREHOUSE", "") == "small" else Sizes()


def rows(first_id: int, count: int) -> pa.Table:
    ids = list(range(first_id, first_id + count))
    return pa.table({"id": ids, "name": [f"r{i}" for i in ids]}, schema=SCHEMA)


def create(catalog: Catalog, name: str, **properties: str) -> Table:
    properties = {"format-version": "2", **properties}
    return catalog.create_table(f"{NAMESPACE}.{name}", schema=SCHEMA, properties=properties)


def describe(error: BaseException) -> str:
    """An error in one line, short enough for a row."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}"[:140]


def guarded(side: Side, failures: dict[str, str], action: Callable[[], T]) -> T | None:
    """`action()` for `side`: our errors propagate; the anchor's are noted and it leaves the step."""
    if side.label in failures:
        return None
    if side.label == OURS:
        return action()
    try:
        return action()
    except Exception as error:  # noqa: BLE001 - whatever stops the anchor is reported, ours still run
        failures[side.label] = describe(error)
        return None


def ms_stats(seconds: list[float]) -> tuple[float, float]:
    """Median and p95 in milliseconds."""
    p95 = statistics.quantiles(seconds, n=20, method="inclusive")[-1] if len(seconds) > 1 else seconds[0]
    return statistics.median(seconds) * 1000, p95 * 1000


def timing_rows(
    what: str, times: dict[str, list[float]], failures: dict[str, str], target: float | None = None
) -> None:
    """Median and p95 of each side, and the ratio of the medians (judged against `target`, where an
    issue sets one); or why the anchor is missing."""
    ours_median, ours_p95 = ms_stats(times[OURS])
    theirs = [label for label in times if label != OURS and times[label] and label not in failures]
    if not theirs:
        record(f"{PREFIX}: {what}, median / p95, ours", f"{ours_median:.1f} / {ours_p95:.1f} ms")
        return
    label = theirs[0]
    their_median, their_p95 = ms_stats(times[label])
    record(f"{PREFIX}: {what}, median, ours / {label}", f"{ours_median:.1f} / {their_median:.1f} ms")
    record(f"{PREFIX}: {what}, p95, ours / {label}", f"{ours_p95:.1f} / {their_p95:.1f} ms")
    ratio_row(f"{PREFIX}: {what}, median ratio ours / {label}", ours_median / their_median, target)


def missing_rows(step: str, failures: dict[str, str]) -> None:
    for label, why in failures.items():
        record(f"{PREFIX}: {step}: no {label} anchor ({why})", "-")


def load_latency(sides: list[Side], sizes: Sizes, failures: dict[str, str]) -> None:
    """`load_table` of a table of `sizes.snapshots` snapshots, the sides interleaved."""
    name = f"{NAMESPACE}.loads"
    catalogs: dict[str, Catalog] = {}
    for side in sides:

        def prepare(side: Side = side) -> Catalog:
            catalog = side.connect()
            table = create(catalog, "loads")
            for n in range(sizes.snapshots):
                table.append(rows(n, 1))
            seen = len(catalog.load_table(name).metadata.snapshots)  # and warm
            if seen != sizes.snapshots:
                raise RuntimeError(f"its table shows {seen} snapshots of {sizes.snapshots}")
            return catalog

        catalog = guarded(side, failures, prepare)
        if catalog is not None:
            catalogs[side.label] = catalog
    times: dict[str, list[float]] = {label: [] for label in catalogs}
    for _ in range(sizes.loads):
        for side in sides:
            if side.label in catalogs and side.label not in failures:

                def load(catalog: Catalog = catalogs[side.label]) -> Table:
                    return catalog.load_table(name)

                start = time.perf_counter()
                if guarded(side, failures, load) is not None:
                    times[side.label].append(time.perf_counter() - start)
    what = f"load_table, {sizes.snapshots} snapshots (of {sizes.loads})"
    timing_rows(what, times, failures)
    missing_rows("load_table", failures)


def timed_commits(catalog: Catalog) -> list[float]:
    """The durations of `catalog.commit_table` calls from now on, as they happen."""
    durations: list[float] = []
    commit = catalog.commit_table

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return commit(*args, **kwargs)
        finally:
            durations.append(time.perf_counter() - start)

    catalog.commit_table = timed  # type: ignore[method-assign]
    return durations


def append_latency(sides: list[Side], sizes: Sizes, failures: dict[str, str]) -> None:
    """`sizes.appends` appends of 10 rows each, the sides interleaved: whole, and the commit call."""
    tables: dict[str, tuple[Table, list[float]]] = {}
    for side in sides:

        def prepare(side: Side = side) -> tuple[Table, list[float]]:
            catalog = side.connect()
            table = create(catalog, "appends")
            table.append(rows(0, 10))  # untimed: the first append writes the first manifest list
            return table, timed_commits(catalog)

        prepared = guarded(side, failures, prepare)
        if prepared is not None:
            tables[side.label] = prepared
    whole: dict[str, list[float]] = {label: [] for label in tables}
    for n in range(1, sizes.appends + 1):
        for side in sides:
            if side.label in tables and side.label not in failures:

                def append(table: Table = tables[side.label][0], first: int = n * 10) -> bool:
                    table.append(rows(first, 10))
                    return True

                start = time.perf_counter()
                if guarded(side, failures, append):
                    whole[side.label].append(time.perf_counter() - start)
    commits = {label: durations for label, (_, durations) in tables.items()}
    timing_rows(f"append 10 rows (of {sizes.appends})", whole, failures)
    # Issue 39: the catalog's commit no slower than SeaweedFS's.
    timing_rows("its commit call", commits, failures, COMMIT_GOAL)
    missing_rows("append", failures)


@dataclass
class Tally:
    """One side's concurrent writers: acknowledged appends, retries, and the table they left."""

    seconds: float = 0.0
    acknowledged: list[int] = field(default_factory=list)  # ids whose append returned
    retries: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # other than CommitFailedException
    given_up: int = 0
    snapshots: int = 0  # appends: the writers' own
    #: Snapshots of other operations (our server's compaction, `replace`), by operation.
    others: Counter[str] = field(default_factory=Counter)
    ids: list[int] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # seconds, by process, while they wrote

    def lost(self) -> int:
        return len(set(self.acknowledged) - set(self.ids))

    def whole(self, expected: int) -> bool:
        return self.lost() == 0 and self.snapshots == len(self.ids) == expected


def cpu_now(processes: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of this process (the pyiceberg clients: every thread) and of `processes`."""
    return {"clients": time.process_time(), **{name: cpu_seconds(pid) for name, pid in processes.items()}}


def concurrent_writers(side: Side, sizes: Sizes, processes: dict[str, int]) -> Tally:
    """`sizes.writers` threads with a client each, all appending at once; the clock runs while they do."""
    name = f"{NAMESPACE}.busy"
    # pyiceberg's own retries (4, from 100 ms of backoff) off: every conflict comes back to
    # the writer, which reloads and appends again at once, and is counted.
    create(side.connect(), "busy", **{"commit.retry.num-retries": "0"})
    clients = [side.connect() for _ in range(sizes.writers)]
    tables = [catalog.load_table(name) for catalog in clients]
    tally = Tally()
    lock = threading.Lock()
    start_line = threading.Barrier(sizes.writers + 1)
    problems: list[BaseException] = []

    def write(writer: int) -> None:
        catalog, table = clients[writer], tables[writer]
        start_line.wait()
        try:
            for n in range(sizes.per_writer):
                row = writer * 1_000_000 + n
                for attempt in range(1, MAX_ATTEMPTS + 1):
                    try:
                        table.append(rows(row, 1))
                        with lock:
                            tally.acknowledged.append(row)
                        break
                    except CommitFailedException:
                        with lock:
                            tally.retries += 1
                    except Exception as error:  # noqa: BLE001 - counted, reloaded and tried again
                        with lock:
                            tally.errors[describe(error)] += 1
                    if attempt == MAX_ATTEMPTS:
                        with lock:
                            tally.given_up += 1
                    else:
                        table = catalog.load_table(name)
        except BaseException as error:  # noqa: BLE001 - a reload failed: the step fails, after the join
            problems.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(sizes.writers)]
    for thread in threads:
        thread.start()
    before = cpu_now(processes)
    start_line.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    tally.seconds = time.perf_counter() - start
    tally.cpu = {name: seconds - before[name] for name, seconds in cpu_now(processes).items()}
    if problems:
        raise problems[0]
    final = side.connect().load_table(name)
    operations = Counter(
        snapshot.summary.operation.value if snapshot.summary else "none"
        for snapshot in final.metadata.snapshots
    )
    tally.snapshots = operations.pop("append", 0)
    tally.others = operations
    tally.ids = pc.cast(final.scan().to_arrow()["id"], pa.int64()).to_pylist()
    return tally


def writer_rows(sides: list[Side], sizes: Sizes, failures: dict[str, str], processes: dict[str, int]) -> None:
    expected = sizes.writers * sizes.per_writer
    tallies: dict[str, Tally] = {}
    for side in sides:  # one side at a time: both would share the 2 cores otherwise

        def run(side: Side = side) -> Tally:
            return concurrent_writers(side, sizes, processes)

        tally = guarded(side, failures, run)
        if tally is not None:
            tallies[side.label] = tally
    what = f"{sizes.writers} writers x {sizes.per_writer} appends"
    labels = list(tallies)
    names = " / ".join(labels)
    rates = [len(tallies[label].acknowledged) / tallies[label].seconds for label in labels]
    record(f"{PREFIX}: {what}, commits/s, {names}", " / ".join(f"{rate:.2f}" for rate in rates))
    if len(rates) > 1:
        ratio_row(f"{PREFIX}: {what}, commits/s ratio ours / {labels[1]}", rates[0] / rates[1], None)
    record(f"{PREFIX}: {what}, retries, {names}", " / ".join(str(tallies[lb].retries) for lb in labels))
    record(
        f"{PREFIX}: {what}, lost commits, {names}",
        " / ".join(f"{tallies[label].lost()} lost" for label in labels),
        f"0 lost of {expected}",
        "met" if all(tally.whole(expected) for tally in tallies.values()) else "missed",
    )
    for label, tally in tallies.items():
        # Where the time goes: the clients' CPU against the wall shows when they are the bottleneck.
        record(
            f"{PREFIX}: {what}, {label}: wall / CPU of {', '.join(tally.cpu)}",
            f"{tally.seconds:.1f} / " + ", ".join(f"{cpu:.1f}" for cpu in tally.cpu.values()) + " s",
        )
        if tally.others:
            record(
                f"{PREFIX}: {what}, {label}: other snapshots meanwhile (its maintenance)",
                ", ".join(f"{count} {operation}" for operation, count in sorted(tally.others.items())),
            )
        if not tally.whole(expected):
            duplicated = len(tally.ids) - len(set(tally.ids))
            record(
                f"{PREFIX}: {what}, {label}: append snapshots / rows / duplicated rows",
                f"{tally.snapshots} / {len(tally.ids)} / {duplicated}",
                f"{expected} / {expected} / 0",
            )
        for error, count in tally.errors.most_common(3):
            record(f"{PREFIX}: {what}, {label}: other errors, retried ({error})", str(count))
        if tally.given_up:
            record(f"{PREFIX}: {what}, {label}: appends given up after {MAX_ATTEMPTS}", str(tally.given_up))
    missing_rows("concurrent writers", failures)


def bench_warehouse(sizes: Sizes | None = None) -> None:
    sizes = sizes or sizes_from_env()
    with running_seaweed() as seaweed, our_side(seaweed) as (ours, server_pid):
        sides = [ours]
        processes = {"our server": server_pid, "weed": seaweed.process.pid}
        setup: dict[str, str] = {}
        try:
            sides.append(seaweed_side(seaweed))
        except Exception as error:  # noqa: BLE001 - our figures stand alone, the row says why
            setup["SeaweedFS"] = f"its catalog could not be set up: {describe(error)}"
        load_latency(sides, sizes, dict(setup))
        append_latency(sides, sizes, dict(setup))
        # Imported here: bench.catalog_history builds on this module's tables and rows.
        from bench.catalog_history import history_rows

        history_rows(sides, sizes.history_samples, dict(setup), seaweed)
        writer_rows(sides, sizes, dict(setup), processes)
