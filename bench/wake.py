"""What this machine adds to a request that follows a few idle seconds: a bare HTTP server's answer.

On this VM an idle vCPU sleeps deeply, and the first request after a few idle seconds takes
tens of milliseconds longer to be answered, by any server: Python's own `http.server` (a
file, a new connection each request, nothing of ours) answers in about 2 ms at once and
40 to 80 ms after 3 to 7 s idle. Rows measured after the server settled (a first query
after a start, a warm query once a build behind has finished) include it; this row says how
much, in the same run.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.results import record
from testbed.seaweed import free_port

IDLE_SECONDS = 5.0
SAMPLES = 5
#: The idle gap an Iceberg append leaves its catalog (its client writes the data files, the
#: manifest and the manifest list to S3 between loading the table and committing), and how many
#: answers after it are timed.
APPEND_GAP_SECONDS, GAP_SAMPLES = 0.04, 40


def wake_rows() -> None:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "f").write_bytes(b"x" * 100)
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d", folder],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                for _ in range(100):  # until it listens
                    try:
                        client.get("/f")
                        break
                    except httpx.TransportError:
                        time.sleep(0.05)

                def answer() -> float:
                    start = time.perf_counter()
                    client.get("/f").raise_for_status()
                    return time.perf_counter() - start

                at_once = statistics.median(answer() for _ in range(SAMPLES * 4))
                after_gap = []
                for _ in range(GAP_SAMPLES):
                    time.sleep(APPEND_GAP_SECONDS)
                    after_gap.append(answer())
                after_idle = []
                for _ in range(SAMPLES):
                    time.sleep(IDLE_SECONDS)
                    after_idle.append(answer())
        finally:
            process.terminate()
            process.wait(timeout=10)
    record(
        f"machine: a bare HTTP server's answer at once / after {IDLE_SECONDS:.0f} s idle (medians)",
        f"{at_once * 1000:.1f} / {statistics.median(after_idle) * 1000:.1f} ms",
    )
    # Every process a request goes through pays it: the catalog rows' append commits follow such a
    # gap for our server, which waits while the client writes to S3, but not for SeaweedFS's catalog,
    # which is the S3 those writes kept busy.
    record(
        f"machine: a bare HTTP server's answer at once / after {APPEND_GAP_SECONDS * 1000:.0f} ms idle "
        "(an append's gap between its catalog calls), medians",
        f"{at_once * 1000:.1f} / {statistics.median(after_gap) * 1000:.1f} ms",
    )
