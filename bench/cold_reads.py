"""The first /query of a big table nobody has read yet, on local storage and on S3.

The warmer builds at start only the tables read in the last day, so a table shared
but not yet read (or not read lately) meets its first recipient cold. The table is
the common shape of a long-lived one: 100,000 files in a checkpoint, then a few
small commits. The server runs with its defaults, started and settled, and the
table is queried for the first time: the first byte comes while its held snapshot
is built behind that answer; the next query is served from the held snapshot.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import httpx
from deltalake import DeltaTable

from bench.delta_tables import make_delta_table
from bench.paths import BUCKET, QUERY
from bench.procfs import settle
from bench.results import record
from bench.servers import Server, upload_all
from bench.timing import timed_query
from bench.wake import wake_rows

FILES = 100_000
#: Commits after the checkpoint, each adding and removing a few files.
TAIL_COMMITS = 5
TAIL_FILES = 10
NAME = "k100k"
FIRST_BYTE_GOAL = 0.15


def make_checkpointed_table(location: Path, files: int = FILES) -> int:
    """`make_delta_table`'s table, then an empty commit checkpointed and `TAIL_COMMITS` commits after
    it; how many files the last version holds. Left alone when complete."""
    make_delta_table(location, files)
    log = location / "_delta_log"
    last = 1 + TAIL_COMMITS
    if not (log / f"{last:020d}.json").exists():
        (log / f"{1:020d}.json").write_text(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")
        DeltaTable(str(location)).create_checkpoint()
        for version in range(2, last + 1):
            lines = []
            for index in range(TAIL_FILES):
                name = f"part-tail-{version}-{index}.parquet"
                if not (location / name).exists():
                    os.link(location / f"part-{index:07d}.parquet", location / name)
                size = (location / name).stat().st_size
                add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": version}
                lines.append({"add": add | {"dataChange": True, "stats": '{"numRecords":100}'}})
                removed = f"part-{version * TAIL_FILES + index:07d}.parquet"
                lines.append({"remove": {"path": removed, "deletionTimestamp": version, "dataChange": True}})
            (log / f"{version:020d}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return files  # each tail commit adds as many files as it removes


def upload_log_and_tail(client: Any, location: Path, bucket: str, prefix: str) -> None:
    """What `make_checkpointed_table` adds to a table already uploaded under `prefix`: its log and
    the tail's data files (the checkpoint's files are those `make_delta_table` made)."""
    paths = [*(location / "_delta_log").iterdir(), *location.glob("part-tail-*.parquet")]
    upload_all(client, location, bucket, prefix, paths)


def cold_rows(
    where: str, storage: dict[str, str] | None, table: str, files: int, shape: str | None = None
) -> None:
    """A started, settled server's first /query of `table`, then the next ones."""
    shape = shape or f"checkpoint + {TAIL_COMMITS} commits"
    server = Server("run-cold" + where.replace(" ", "-"), storage)
    _, token = server.share({NAME: f"delta:bench:{table}"})
    with server:
        assert server.process is not None
        settle(server.process.pid)
        client: httpx.Client = server.client(token)
        # A running server has answered requests before: a process's very first one also pays
        # for what is made on first use (some 100 ms), whatever the table.
        client.get("/shares").raise_for_status()
        path = f"{QUERY}/{NAME}/query"
        first, last, lines = timed_query(client, path)
        assert lines == files + 2, (lines, files)
        record(
            f"/query {files:,} files, {shape}{where}: never read, first byte",
            f"{first * 1000:.0f} ms",
            f"<= {FIRST_BYTE_GOAL * 1000:.0f} ms",
            "met" if first <= FIRST_BYTE_GOAL else "missed",
        )
        record(
            f"/query {files:,} files, {shape}{where}: never read, last byte",
            f"{last:.2f} s",
        )
        settle(server.process.pid)  # the held snapshot, built behind the first answer
        again_first, again_last, _ = timed_query(client, path)
        time.sleep(0.1)
        warm_first, warm_last, _ = timed_query(client, path)
        record(
            f"/query {files:,} files, {shape}{where}: second / third query, first byte",
            f"{again_first * 1000:.0f} / {warm_first * 1000:.0f} ms",
        )
        record(
            f"/query {files:,} files, {shape}{where}: second / third query, last byte",
            f"{again_last:.2f} / {warm_last:.2f} s",
        )


#: A table loaded in one go: one commit of every file, no checkpoint yet (see `streamed_commits`).
ONE_COMMIT = "one commit, no checkpoint"


def bench_cold_local() -> None:
    # First: the wake-up every after-idle row below (and the server scenario's) includes.
    wake_rows()
    make_delta_table(BUCKET / f"t{FILES // 1000}k", FILES)
    cold_rows("", None, f"t{FILES // 1000}k", FILES, ONE_COMMIT)
    files = make_checkpointed_table(BUCKET / NAME)
    cold_rows("", None, NAME, files)


def bench_cold_s3(seaweed: Any) -> None:
    """The same tables on SeaweedFS: `bench_s3` uploaded `make_delta_table`'s files under t100k, read
    first as they are (one commit), then with the checkpoint and tail added to them here."""
    cold_rows(" on S3", seaweed.storage_config(path_style="true"), f"t{FILES // 1000}k", FILES, ONE_COMMIT)
    files = make_checkpointed_table(BUCKET / NAME)
    upload_log_and_tail(seaweed.client(), BUCKET / NAME, "bench", f"t{FILES // 1000}k")
    cold_rows(" on S3", seaweed.storage_config(path_style="true"), f"t{FILES // 1000}k", files)
