"""Where the benchmarks keep what they generate, and the URL paths they query."""

from __future__ import annotations

from pathlib import Path

# Generated tables, server state and SeaweedFS data; kept between runs (and out of git)
# so that a second run need not generate the large tables again.
DATA = Path(__file__).resolve().parent / ".data"


# Where the Delta tables are generated: bucket `bench` of the local storage.
BUCKET = DATA / "buckets" / "bench"
QUERY = "/shares/bench/schemas/default/tables"
FIRST_COMMIT = f"{0:020d}.json"
