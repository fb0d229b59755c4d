"""The rows a bench run measures: printed as they come, written to bench/RESULTS.md at the end.

One table for the whole run, so scenarios only say what they measured and against
which target; the layout of RESULTS.md is kept here alone.
"""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

# (measure, figure, target, verdict), in the order measured.
rows: list[tuple[str, str, str, str]] = []


def record(name: str, figure: str, target: str = "", verdict: str = "") -> None:
    rows.append((name, figure, target, verdict))
    print(f"{name:<58} {figure:>22}  {target:<18} {verdict}", flush=True)


def machine() -> str:
    """Cores, CPU model and Python: figures mean little without them."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}, Python {platform.python_version()}, {platform.system()}"


def write_results(path: Path = RESULTS) -> None:
    """Every row recorded so far as a Markdown table, after what the figures mean."""
    lines = [
        "# Benchmark results",
        "",
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M UTC} on: {machine()}.",
        "",
        "One server process per group of rows (Hypercorn, 1 worker unless said), the client on the",
        "same machine; local storage unless the row says S3 (SeaweedFS on loopback) or Iceberg (the",
        "embedded SQL catalog). Cold is a table's first request (the server started and settled,",
        "with no snapshot of it cached), warm the next (for a table first answered streamed while its",
        "snapshot is built behind, the next once the server settled; the one at once has its own",
        "row); ratios are measured side by side in the same run. Figures vary by a third between",
        "runs on this shared machine (compare boto3's presign).",
        "Rows on Iceberg deletes: warm is the best of the next three, and brackets give the last",
        "byte's time over that of the same table's snapshot before its DELETE (no deletes).",
        "",
        "| measure | figure | target | |",
        "|---|---|---|---|",
    ] + [f"| {name} | {figure} | {target} | {verdict} |" for name, figure, target, verdict in rows]
    path.write_text("\n".join(lines) + "\n")
