"""Timings of /query answers and of reads: first and last byte, side-by-side ratios, best-of runs.

Each records its rows (bench.results). A ratio is of runs interleaved in the same
process, since shared machines are noisy.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass
from typing import Any

import httpx

from bench.results import record


def timed_query(client: httpx.Client, path: str) -> tuple[float, float, int]:
    """One POST to a /query path: seconds to first and last byte, lines received."""
    start = time.perf_counter()
    first = None
    lines = 0
    with client.stream("POST", path, json={}) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if first is None:
                first = time.perf_counter() - start
            lines += chunk.count(b"\n")
    return first or 0.0, time.perf_counter() - start, lines


@dataclass(frozen=True)
class Answer:
    """One /query answer: seconds to its first and last byte, and its body."""

    first: float
    last: float
    body: bytes

    @property
    def lines(self) -> int:
        return self.body.count(b"\n")


def answer(
    client: httpx.Client,
    path: str,
    body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """One POST to a /query path, kept whole (for answers of thousands of lines, not millions)."""
    start = time.perf_counter()
    first = None
    chunks = []
    with client.stream("POST", path, json=dict(body or {}), headers=dict(headers or {})) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            if first is None:
                first = time.perf_counter() - start
            chunks.append(chunk)
    return Answer(first or 0.0, time.perf_counter() - start, b"".join(chunks))


def query_rows(
    client: httpx.Client,
    label: str,
    name: str,
    files: int,
    targets: bool = False,
    settled: Callable[[], object] | None = None,
) -> float:
    """Cold and warm /query of one table: first byte, last byte, lines per second; the warm last byte.

    With `settled` (which waits for the server to settle), warm is the query once it has: a big
    table's first reader is answered streamed while its held snapshot is built behind it, and
    warm means that snapshot built. The query made at once after the first, which shares the
    server with that build, gets a row of its own.
    """
    path = f"/shares/bench/schemas/default/tables/{name}/query"
    cold_first, cold_last, lines = timed_query(client, path)
    if settled is not None:
        at_once_first, at_once_last, _ = timed_query(client, path)
        settled()
    warm_first, warm_last, _ = timed_query(client, path)
    assert lines == files + 2, (lines, files)
    if settled is not None:
        record(
            f"/query {label}: second query at once after the first, first / last byte",
            f"{at_once_first * 1000:.0f} ms / {at_once_last:.2f} s",
        )
    record(
        f"/query {label}: first byte (cold / warm)",
        f"{cold_first * 1000:.0f} / {warm_first * 1000:.0f} ms",
        "<= 100 ms, warm" if targets else "",
        ("met" if warm_first <= 0.1 else "missed") if targets else "",
    )
    record(
        f"/query {label}: last byte (cold / warm)",
        f"{cold_last:.2f} / {warm_last:.2f} s",
        "<= 1.5 s, warm" if targets else "",
        ("met" if warm_last <= 1.5 else "missed") if targets else "",
    )
    record(f"/query {label}: lines per second (warm)", f"{lines / warm_last:,.0f}")
    return warm_last


#: Interleaved runs of each side of a `read_ratio`.
READ_RUNS = 5


def read_ratio(
    label: str,
    shared: Callable[[], Sized],
    direct: Callable[[], Sized],
    target: float | None = None,
    runs: int = READ_RUNS,
    sides: str = "through share / direct",
) -> None:
    """Time `load_as_pandas` through the share against a direct read, side by side.

    One untimed read of each first (imports, the server's snapshot, the page cache),
    then `runs` of each, interleaved; the ratio is of the medians. A single pair
    of reads swung from 1.5x to 2.4x between runs on this 2-core machine.
    """
    assert len(shared()) == len(direct())
    through_times, direct_times = [], []
    for _ in range(runs):
        for action, times in ((shared, through_times), (direct, direct_times)):
            start = time.perf_counter()
            action()
            times.append(time.perf_counter() - start)
    through_time, direct_time = statistics.median(through_times), statistics.median(direct_times)
    ratio = through_time / direct_time
    timing = f"{through_time:.2f} / {direct_time:.2f} s"
    record(f"{label}: {sides} (medians of {runs})", timing)
    ratio_row(f"{label}: ratio", ratio, target)


def ratio_row(name: str, ratio: float, target: float | None) -> None:
    """A ratio's row, judged against `target` where an issue sets one."""
    if target is None:
        record(name, f"{ratio:.2f}x")
    else:
        record(name, f"{ratio:.2f}x", f"<= {target}x", "met" if ratio <= target else "missed")


def best_of(action: Callable[[], object], times: int = 5) -> float:
    """The fastest of `times` runs of `action`, in seconds: the least disturbed by other load."""
    durations = []
    for _ in range(times):
        start = time.perf_counter()
        action()
        durations.append(time.perf_counter() - start)
    return min(durations)


def limit_rows(label: str, ours: httpx.Client, path: str, limit: httpx.Client, runs: int = 5) -> None:
    """Warm /query of `path` against the minimal producer's same answer, interleaved: medians, ratio."""
    timed_query(ours, path)  # warm: the snapshot is cached
    ours_times, limit_times = [], []
    for _ in range(runs):
        ours_times.append(timed_query(ours, path)[1])
        limit_times.append(timed_query(limit, "/")[1])
    mine, best = statistics.median(ours_times), statistics.median(limit_times)
    ratio = mine / best
    record(f"{label}: warm last byte, ours / minimal producer", f"{mine:.2f} / {best:.2f} s")
    ratio_row(f"{label}: warm /query over the limit (medians of {runs}, interleaved)", ratio, 1.2)
