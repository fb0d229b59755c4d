"""Many clients at once: a list/metadata/query mix, and what stalled streams cost the others."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx

from bench.delta_tables import make_delta_table
from bench.paths import BUCKET
from bench.procfs import connections_held, settle
from bench.results import record
from bench.servers import Server
from bench.stalled_sockets import close_all, stalled_readers, status_of
from bench.timing import timed_query


async def concurrent_mix(
    base: str, token: str | list[str], clients: int, requests_each: int
) -> tuple[list[float], int]:
    """`clients` at once, each sending `requests_each` list/metadata/query requests: latencies, errors.

    With several tokens, client n uses token n modulo their number.
    """
    tokens = [token] if isinstance(token, str) else token
    latencies: list[float] = []
    errors = 0
    paths = [
        ("GET", "/shares"),
        ("GET", "/shares/bench/all-tables"),
        ("GET", "/shares/bench/schemas/default/tables/t1k/metadata"),
        ("POST", "/shares/bench/schemas/default/tables/t1k/query"),
    ]

    async def one(worker: int) -> None:
        nonlocal errors
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {tokens[worker % len(tokens)]}"}, timeout=60
        ) as client:
            for i in range(requests_each):
                method, path = paths[(worker + i) % len(paths)]
                start = time.perf_counter()
                response = await client.request(method, path, json={} if method == "POST" else None)
                latencies.append(time.perf_counter() - start)
                errors += response.status_code >= 400

    await asyncio.gather(*(one(w) for w in range(clients)))
    return latencies, errors


def bench_concurrency(workers: int) -> None:
    """64 clients on a list/metadata/query mix against a server of `workers` processes.

    It queries the 1,000-file table bench_server generates. The clients are 8 recipients
    of 8 clients each (a token each): one token's 64 clients at once would meet the
    per-token cap on streams (`streams_per_token`, 16), which is there to stop that.
    """
    make_delta_table(BUCKET / "t1k", 1000)
    server = Server(f"run-workers-{workers}", workers=workers)
    _, token = server.share({"t1k": "delta:bench:t1k"})
    tokens = [token, *(server.token() for _ in range(7))]
    with server:
        latencies, errors = asyncio.run(concurrent_mix(server.base_url, tokens, clients=64, requests_each=10))
        latencies.sort()
        p50 = statistics.median(latencies) * 1000
        p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
        label = f"64 clients (8 tokens) x 10 requests, {workers} worker{'s' if workers > 1 else ''}"
        record(f"{label}: p50 / p99", f"{p50:.0f} / {p99:.0f} ms")
        record(f"{label}: errors", f"{errors} of {len(latencies)}")


def p99_ms(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1000


# How long the server waits on a stalled reader by default; the scenario waits past it.
STREAM_SEND_TIMEOUT = 30


def bench_stalled_streams(stalled: int, files: int = 10_000) -> None:
    """`stalled` clients ask for a `files`-file /query and never read: what do they cost the server?

    Twice: with the default limits, then with the stream caps out of the way, so that
    every stalled stream is held and the second run shows what each costs by itself.
    (Code without these settings ignores them, and runs the same way twice.)
    """
    name = f"t{files // 1000}k"
    make_delta_table(BUCKET / name, files)
    make_delta_table(BUCKET / "t1k", 1000)
    uncapped = {"SHARING_LIMITS_STREAMS_PER_TOKEN": "0", "SHARING_LIMITS_STREAMS_PER_PROCESS": "0"}
    for variant, env in (("default limits", {}), ("no stream caps", uncapped)):
        label = f"{stalled:,} stalled /query of {files // 1000}k files, {variant}"
        stalled_run(label, Server("run-stalled", env=env), name, stalled)


def stalled_run(label: str, server: Server, table: str, stalled: int) -> None:
    """One run of bench_stalled_streams against `server`, its rows headed `label`.

    The stalled readers have a token of their own; other clients, with another,
    run the list/metadata/query mix of bench_concurrency: idle, while the stalled
    readers connect, and once the server has settled with them.
    """
    _, token = server.share({"t1k": "delta:bench:t1k", table: f"delta:bench:{table}"})
    attacker = server.token()
    path = f"/shares/bench/schemas/default/tables/{table}/query"

    def others(runs: int = 3) -> tuple[float, int]:
        """The p99 of the mix, the median of `runs` runs (this machine is shared), and its errors."""
        results = [asyncio.run(concurrent_mix(server.base_url, token, 4, 50)) for _ in range(runs)]
        p99 = statistics.median(p99_ms(latencies) for latencies, _ in results)
        return p99, sum(errors for _, errors in results)

    with server:
        assert server.process
        pid = server.process.pid
        timed_query(server.client(token), path)  # its snapshot is cached, as a busy server's is
        idle_p99, _ = others()
        before = server.rss_mb()
        with ThreadPoolExecutor(1) as pool:
            # One run, begun with the flood of connections: the median of three hid it, or not,
            # depending on whether a second run still met the flood.
            connecting = pool.submit(others, 1)
            sockets = stalled_readers(server.port, f"/delta-sharing{path}", attacker, stalled)
            connecting_p99, connecting_errors = connecting.result()
        try:
            settled = settle(pid)
            held = server.rss_mb() - before
            stalled_p99, errors = others()
            errors += connecting_errors
            statuses = Counter(status_of(sock) for sock in sockets)
            time.sleep(max(STREAM_SEND_TIMEOUT + 15 - settled, 0))
            after_timeout = server.rss_mb() - before
            still_held = connections_held(server.port)
        finally:
            close_all(sockets)
        settle(pid)
        time.sleep(3)
        gone = server.rss_mb() - before
    record(f"{label}: server RSS growth", f"{held:.0f} MB", "<= 200 MB", "met" if held <= 200 else "missed")
    record(
        f"{label}: others' p99 idle / while they stall",
        f"{idle_p99:.0f} / {stalled_p99:.0f} ms",
        "<= 2x idle",
        "met" if stalled_p99 <= 2 * idle_p99 and not errors else "missed",
    )
    # Not the target, which is of the stalled state: 1,000 requests in a second or two
    # from one token are a flood, answered in the order they came, the others' among them.
    record(f"{label}: others' p99 as the 1,000 connect (one run)", f"{connecting_p99:.0f} ms")
    record(f"{label}: others' errors", f"{errors} of 800")  # four runs of 200 requests
    answers = ", ".join(f"{count} {status}" for status, count in statuses.most_common())
    record(f"{label}: stalled readers' answers", answers)
    wait = STREAM_SEND_TIMEOUT + 15
    record(f"{label}: connections still held {wait} s on", f"{still_held} of {stalled}")
    record(f"{label}: RSS growth {wait} s on / once they left", f"{after_timeout:.0f} / {gone:.0f} MB")
