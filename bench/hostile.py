"""Figures of the hostile-recipient review: answers while a writer commits, and header tricks.

Both run against a `sharing-server serve` process of their own (bench.servers),
the requests sent by asyncio clients in this process:

- 10,000 requests while delta-rs overwrites the table every 100 ms: how many
  failed other than with a 4xx, and how many answers were not one whole
  version (version N is one file whose statistics say `id` is N: an answer
  mixing versions lists another count, or a file of another version);
- one token at 20 requests/s (burst 20) asked as fast as the clients can, its
  Authorization header spelled one way, then with each trick a recipient
  might try: none may get more than the limit plus the burst through. (The
  limit is low so that a loaded 2-core machine still asks faster than it.)
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pyarrow as pa
from deltalake import write_deltalake

from bench.paths import DATA
from bench.results import record
from bench.servers import Server

BUCKET = DATA / "buckets" / "bench"
PER_TOKEN_RPS = 20  # its burst is as large


@dataclass
class Tally:
    requests: int = 0
    queries: int = 0
    errors: int = 0  # 5xx, or no answer at all
    refused: int = 0  # 4xx
    torn: int = 0  # an answer that is not one whole version
    versions: set[int] | None = None


def rows(version: int) -> pa.Table:
    """Version `version`'s one row, which its file's statistics repeat."""
    return pa.table({"id": pa.array([version], pa.int64())})


def whole_version(response: httpx.Response) -> bool:
    """Whether a /query answer is protocol, metadata and the one file of its one version."""
    lines = [json.loads(line) for line in response.text.splitlines()]
    version = int(response.headers["delta-table-version"])
    files = [line["file"] for line in lines if "file" in line]
    shape = len(lines) == 3 and "protocol" in lines[0] and "metaData" in lines[1]
    return shape and len(files) == 1 and json.loads(files[0]["stats"])["minValues"]["id"] == version


async def ask_while_writing(base: str, token: str, requests: int, clients: int) -> Tally:
    tally = Tally(versions=set())
    table = "/shares/bench/schemas/default/tables/live"
    # Mostly queries, with the version and metadata requests clients make around them.
    asks = [("POST", f"{table}/query")] * 3 + [("GET", f"{table}/version"), ("GET", f"{table}/metadata")]

    async def client() -> None:
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as http:
            while tally.requests < requests:
                method, path = asks[tally.requests % len(asks)]
                tally.requests += 1
                try:
                    response = await http.request(method, path, json={} if method == "POST" else None)
                except httpx.HTTPError:
                    tally.errors += 1
                    continue
                if response.status_code >= 500:
                    tally.errors += 1
                elif response.status_code >= 400:
                    tally.refused += 1
                elif path.endswith("/query"):
                    tally.queries += 1
                    assert tally.versions is not None
                    tally.versions.add(int(response.headers["delta-table-version"]))
                    tally.torn += not whole_version(response)

    await asyncio.gather(*(client() for _ in range(clients)))
    return tally


def bench_writer_commits(requests: int = 10_000, clients: int = 8, interval: float = 0.1) -> None:
    """`requests` list, version and query requests while delta-rs commits every `interval` seconds."""
    location = BUCKET / "live"
    shutil.rmtree(location, ignore_errors=True)
    write_deltalake(str(location), rows(0))
    server = Server("run-writer")
    _, token = server.share({"live": "delta:bench:live"})
    stop = threading.Event()
    commits = 0

    def writer() -> None:
        nonlocal commits
        due = time.monotonic()
        while not stop.is_set():
            # The only writer: the next version is one more than the commits so far.
            write_deltalake(str(location), rows(commits + 1), mode="overwrite")
            commits += 1
            due += interval
            stop.wait(max(0.0, due - time.monotonic()))

    with server:
        thread = threading.Thread(target=writer, daemon=True)
        start = time.perf_counter()
        thread.start()
        try:
            tally = asyncio.run(ask_while_writing(server.base_url, token, requests, clients))
        finally:
            stop.set()
            thread.join()
        elapsed = time.perf_counter() - start
    label = f"{requests:,} requests while delta-rs commits every {interval * 1000:.0f} ms"
    errors, torn = tally.errors, tally.torn
    record(f"{label}: errors other than 4xx", f"{errors} of {tally.requests:,}", "0", _met(not errors))
    record(f"{label}: answers not of one whole version", f"{torn} of {tally.queries:,}", "0", _met(not torn))
    rate = tally.requests / elapsed
    versions = len(tally.versions or ())
    record(f"{label}: commits, versions answered, requests/s", f"{commits}, {versions}, {rate:.0f}/s")


def _met(ok: bool) -> str:
    return "met" if ok else "missed"


# One token's Authorization header, from its secret and the request's number.
Spelling = Callable[[str, int], list[tuple[str, str]]]
SCHEMES = ("Bearer", "bearer", "BEARER")
SPACES = [" " * n for n in range(1, 9)]
TRICKS: dict[str, Spelling] = {
    "plain": lambda secret, i: [("Authorization", f"Bearer {secret}")],
    "spaces after Bearer varied": lambda secret, i: [("Authorization", f"Bearer{SPACES[i % 8]}{secret}")],
    "scheme's case varied": lambda secret, i: [("Authorization", f"{SCHEMES[i % 3]} {secret}")],
    "a junk Authorization header after it": lambda secret, i: [
        ("Authorization", f"Bearer {secret}"),
        ("Authorization", f"junk-{i}"),
    ],
    "a junk Authorization header before it": lambda secret, i: [
        ("Authorization", f"junk-{i}"),
        ("Authorization", f"Bearer {secret}"),
    ],
}


async def hammer(base: str, secret: str, spell: Spelling, seconds: float, clients: int) -> tuple[int, int]:
    """Requests for `seconds` from `clients` at once: how many were sent, how many answered 200."""
    admitted = 0
    sent = 0
    deadline = time.monotonic() + seconds

    async def client() -> None:
        nonlocal admitted, sent
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            while time.monotonic() < deadline:
                sent += 1
                response = await http.get("/shares", headers=spell(secret, sent))
                admitted += response.status_code == 200

    await asyncio.gather(*(client() for _ in range(clients)))
    return sent, admitted


def bench_rate_limit_tricks(seconds: float = 3.0, clients: int = 16) -> None:
    """One token at PER_TOKEN_RPS, asked as fast as possible with each header trick."""
    server = Server("run-rate-limits", limits={"per_token_rps": PER_TOKEN_RPS, "global_rps": 0})
    server.cli("share", "create", "bench")
    with server:
        for trick, spell in TRICKS.items():
            # A token of its own per trick, so that each starts with a full burst.
            secret = server.token()
            start = time.monotonic()
            sent, admitted = asyncio.run(hammer(server.base_url, secret, spell, seconds, clients))
            elapsed = time.monotonic() - start
            allowed = PER_TOKEN_RPS * elapsed + PER_TOKEN_RPS
            record(
                f"one token at {PER_TOKEN_RPS}/s, {trick}: admitted of sent",
                f"{admitted} of {sent} in {elapsed:.1f} s ({admitted / elapsed:.0f}/s)",
                f"<= {allowed:.0f} (limit + burst)",
                _met(admitted <= allowed),
            )
