"""A streaming writer's table, kept by the server's background maintenance or not (issue 38's table).

Two `sharing-server serve` processes on local storage, each with a warehouse, driven by pyiceberg
through the writable catalog with the admin token:

- "off": `[maintenance] background = false`, and the table keeps every metadata file
  (`write.metadata.delete-after-commit.enabled = false`): the server as it was before it kept
  its tables;
- "on": the defaults (background maintenance, metadata files beyond the log deleted), with
  rounds every `INTERVAL` seconds instead of 60 so that a run of this length sees a few.

The same `appends` appends of 100 rows go to both, interleaved; then the "on" server gets one
round after the last append (as a writer's pause would give it), and both are measured: the
append's median (its commit included), the current metadata file, the metadata on storage,
`load_table`, Delta Sharing `/query` (time and file lines), `load_as_pandas` and a pyiceberg scan.
A third table, on the "off" server, holds the same rows written at once: the table compacted from
the start, which the kept table's recipients should read within 2x of. The maintenance's CPU is the
"on" server's CPU less the "off" server's over the same appends. `BENCH_APPENDS` sets the count.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
import uuid
from pathlib import Path

import delta_sharing
import httpx
import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.table import Table

from bench.results import record
from bench.servers import Server, local_storage
from bench.timing import best_of, ratio_row
from share_store.authentication.tokens import hash_secret

ADMIN_TOKEN = "dsa_bench-maintenance-admin-token-0123456789"
NAMESPACE = "stream"
INTERVAL = 5
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
PREFIX = "Maintenance"


def _rows(first: int, count: int) -> pa.Table:
    ids = list(range(first, first + count))
    return pa.table({"id": ids, "name": [f"r{i}" for i in ids]}, schema=SCHEMA)


def _warehouse(server: Server) -> str:
    """Each server's warehouse (a bucket of the same local storage root): named after the server."""
    return server.workdir.name


def _server(name: str, background: bool) -> Server:
    shutil.rmtree(Path(local_storage()["root"]) / name, ignore_errors=True)  # the last run's
    env = {
        "SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN),
        "SHARING_MAINTENANCE_BACKGROUND": "true" if background else "false",
        "SHARING_MAINTENANCE_INTERVAL_SECONDS": str(INTERVAL),
    }
    return Server(name, local_storage(), env=env)


def _catalog(server: Server) -> Catalog:
    root = f"http://127.0.0.1:{server.port}/_iceberg"
    made = httpx.post(f"{root}/v1/warehouses", json={"name": _warehouse(server)},
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
    if made.status_code != 200:
        raise RuntimeError(f"warehouse not made: {made.status_code} {made.text[:200]}")
    catalog = load_catalog(f"m-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": root, "warehouse": _warehouse(server), "token": ADMIN_TOKEN})  # fmt: skip
    catalog.create_namespace(NAMESPACE)
    return catalog


def _metadata_bytes(table: Table) -> tuple[int, list[Path], list[Path]]:
    """The current metadata file's size; the metadata files, and all files of the metadata folder."""
    current = Path(table.metadata_location.removeprefix("file://"))
    files = list(current.parent.iterdir())
    return current.stat().st_size, [f for f in files if f.name.endswith(".metadata.json")], files


def _sized(files: list[Path]) -> str:
    return f"{len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB"


def _settle(server: Server, table: str, after: float, timeout: float = 600) -> None:
    """Until the "on" server's round after `after` has compacted the table."""
    url = f"http://127.0.0.1:{server.port}/_iceberg/v1/{_warehouse(server)}/namespaces/{NAMESPACE}/tables/{table}"
    deadline = time.monotonic() + timeout
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(after))
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/maintenance-job-status",
                           headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()["status"]  # fmt: skip
        kinds = ("icebergCompaction", "icebergSnapshotManagement")
        runs = [status[kind].get("lastRunTimestamp", "") for kind in kinds]
        if all(run > since for run in runs):
            return
        time.sleep(0.5)
    raise RuntimeError("the background did not keep the table in time")


def _measure(label: str, server: Server, catalog: Catalog, table: str, url: str, token: str) -> float:
    """Rows for one table as a recipient and an engine see it; `load_as_pandas`'s best time."""
    loaded = catalog.load_table(f"{NAMESPACE}.{table}")
    current, metadata_files, folder = _metadata_bytes(loaded)
    record(f"{PREFIX}: {label}: current metadata.json", f"{current / 1024:.0f} KB")
    record(f"{PREFIX}: {label}: metadata.json files on storage", _sized(metadata_files))
    record(f"{PREFIX}: {label}: metadata folder (with manifests)", _sized(folder))
    load = best_of(lambda: catalog.load_table(f"{NAMESPACE}.{table}"), 5)
    record(f"{PREFIX}: {label}: load_table", f"{load * 1000:.0f} ms")
    query_path = f"/shares/bench/schemas/default/tables/{table}/query"
    with server.client(token) as client:
        answer = client.post(query_path, json={})
        lines = sum(1 for line in answer.text.splitlines() if '"file"' in line)
        query = best_of(lambda: client.post(query_path, json={}).raise_for_status(), 5)
    record(f"{PREFIX}: {label}: Delta Sharing /query", f"{query * 1000:.0f} ms, {lines} files")
    pandas = best_of(lambda: delta_sharing.load_as_pandas(url), 3)
    record(f"{PREFIX}: {label}: load_as_pandas", f"{pandas:.2f} s")
    scan = best_of(lambda: loaded.scan().to_arrow(), 3)
    record(f"{PREFIX}: {label}: pyiceberg scan", f"{scan:.2f} s")
    return pandas


def bench_maintenance(appends: int | None = None) -> None:
    appends = appends or int(os.environ.get("BENCH_APPENDS", "1000"))
    off, on = _server("maintenance-off", False), _server("maintenance-on", True)
    with off, on:
        catalogs = {"off": _catalog(off), "on": _catalog(on)}
        kept_all = {"write.metadata.delete-after-commit.enabled": "false"}
        tables = {
            "off": catalogs["off"].create_table(f"{NAMESPACE}.streamed", SCHEMA, properties=kept_all),
            "on": catalogs["on"].create_table(f"{NAMESPACE}.streamed", SCHEMA),
        }
        once = catalogs["off"].create_table(f"{NAMESPACE}.once", SCHEMA)
        shared = {}
        for side, server in (("off", off), ("on", on)):
            specs = {"streamed": f"uniform:{_warehouse(server)}:{NAMESPACE}:streamed"}
            if side == "off":
                specs["once"] = f"uniform:{_warehouse(server)}:{NAMESPACE}:once"
            shared[side] = server.share(specs)
        times: dict[str, list[float]] = {"off": [], "on": []}
        cpu = {"off": off.cpu_seconds(), "on": on.cpu_seconds()}
        for n in range(appends):
            for side, table in tables.items():
                start = time.perf_counter()
                table.append(_rows(n * 100, 100))
                times[side].append(time.perf_counter() - start)
        last = time.time()
        once.append(_rows(0, appends * 100))
        _settle(on, "streamed", last)
        worked = (on.cpu_seconds() - cpu["on"]) - (off.cpu_seconds() - cpu["off"])
        for side in ("off", "on"):
            median = statistics.median(times[side][-50:]) * 1000
            record(f"{PREFIX}: {side}: append 100 rows (last 50 of {appends}), median", f"{median:.1f} ms")
        record(f"{PREFIX}: maintenance CPU for the table over {appends} appends", f"{worked:.1f} s")
        reads = {}
        for side, label in (("off", "off"), ("on", "on")):
            profile, token = shared[side]
            url = f"{profile}#bench.default.streamed"
            reads[side] = _measure(f"{label}, {appends} appends", off if side == "off" else on,
                                   catalogs[side], "streamed", url, token)  # fmt: skip
        profile, token = shared["off"]
        reads["once"] = _measure("the same rows written once", off, catalogs["off"], "once",
                                 f"{profile}#bench.default.once", token)  # fmt: skip
    ratio_row(f"{PREFIX}: load_as_pandas, kept / written once", reads["on"] / reads["once"], 2.0)
    ratio_row(f"{PREFIX}: load_as_pandas, not kept / kept", reads["off"] / reads["on"], None)
