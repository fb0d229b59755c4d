"""Writers' access delegation: an append with vended keys, and with remote signing, against one
with the store's static keys, on the same server and table layout (`[warehouses] access_delegation`).

Three pyiceberg clients of our catalog on SeaweedFS, interleaved: static S3 keys (as AIStor's
documentation configures pyiceberg), no S3 keys with `vended-credentials`, no S3 keys with
`remote-signing`. Each appends 10 rows `sizes.appends` times; the rows give the medians and each
mode's ratio to the static keys'. Vended keys cost an STS call per table load (kept while more
than half their life is left); remote signing costs one signing request per S3 request.
"""

from __future__ import annotations

import time

from bench.results import record
from bench.servers import running_seaweed
from bench.timing import ratio_row
from bench.warehouse_catalog import PREFIX, Sizes, create, describe, ms_stats, rows, sizes_from_env
from bench.warehouse_sides import our_side
from testbed.seaweed import WRITER_ROLE_ARN

MODES = {"static keys": None, "vended keys": "vended-credentials", "remote signing": "remote-signing"}


def bench_delegation(sizes: Sizes | None = None) -> None:
    sizes = sizes or sizes_from_env()
    env = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": "vended-credentials,remote-signing",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    with running_seaweed() as seaweed, our_side(seaweed, env, "run-delegation") as (side, _pid):
        tables = {}
        for label, mode in MODES.items():
            if mode is None:
                catalog = side.connect()
            else:
                catalog = side.connect(s3_keys=False, **{"header.X-Iceberg-Access-Delegation": mode})
            try:
                table = create(catalog, f"appends_{label.split()[0]}")
                table.append(rows(0, 10))  # untimed: the first append writes the first manifest list
                tables[label] = table
            except Exception as error:  # noqa: BLE001 - the row says why the mode is missing
                record(f"{PREFIX}: append with {label}", f"- ({describe(error)})")
        times: dict[str, list[float]] = {label: [] for label in tables}
        for n in range(1, sizes.appends + 1):
            for label, table in tables.items():
                start = time.perf_counter()
                table.append(rows(n * 10, 10))
                times[label].append(time.perf_counter() - start)
    if "static keys" not in times:
        return
    static, _ = ms_stats(times["static keys"])
    for label, taken in times.items():
        median, p95 = ms_stats(taken)
        what = f"{PREFIX}: append 10 rows (of {sizes.appends}) with {label}, median / p95"
        record(what, f"{median:.1f} / {p95:.1f} ms")
        if label != "static keys":
            ratio_row(f"{PREFIX}: append with {label} / with static keys, medians", median / static, 1.5)
