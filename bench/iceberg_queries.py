"""/query of Iceberg tables: the embedded catalog's, and Spark-written ones with row-level deletes.

bench_iceberg also reads a 2M-row table whole through the share against pyiceberg.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from bench.iceberg_tables import SparkUnavailable, make_iceberg_tables, spark_iceberg_deletes
from bench.paths import DATA
from bench.results import record
from bench.servers import Server
from bench.timing import Answer, answer, query_rows, read_ratio


def bench_iceberg(rows_table: pa.Table, files: int) -> None:
    """Iceberg tables in the embedded SQL catalog: one of `files` data files, one of 2M rows."""
    warehouse = DATA / "buckets" / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)
    server = Server("run-iceberg")
    # Where a local-storage server without [catalogs] opens its embedded `default` catalog.
    server.state.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        "default", uri=f"sqlite:///{server.state / 'iceberg.db'}", warehouse=warehouse.as_uri()
    )
    make_iceberg_tables(catalog, warehouse, rows_table, files)
    profile, token = server.share(
        {"readable": "uniform:default:bench:readable", "many": "uniform:default:bench:many"}
    )
    with server:
        query_rows(server.client(token), f"{files:>7,} files, Iceberg", "many", files)
        read_ratio(
            "load_as_pandas 2M rows / 8 files, Iceberg",
            lambda: delta_sharing.load_as_pandas(f"{profile}#bench.default.readable"),
            lambda: catalog.load_table("bench.readable").scan().to_pandas(),
        )


# The delta response format with what Iceberg deletes need; without it, the parquet format.
DELTA_FORMAT = {
    "delta-sharing-capabilities": "responseformat=delta;readerfeatures=deletionvectors,columnmapping"
}
DELETE_KINDS = {"pos_v2": ("v2", "position deletes"), "dv_v3": ("v3", "deletion vectors")}
CACHE_BUCKET = "bench-cache"
CACHE_PREFIX = ".delta-sharing-cache"


def bench_iceberg_deletes(files: int) -> None:
    """Spark-written Iceberg tables of `files` data files, a tenth of them with row-level deletes.

    Against each table's snapshot before its DELETE (no deletes): /query in the delta
    format, cold (planning reads manifests and delete files and builds the vectors)
    and warm; cold again after a restart, the vectors read from the index; with every
    vector a DV file in the cache; and in the parquet format, cold materializing a copy
    of each file with deletes. Each setting starts with an empty cache.
    """
    try:
        base = spark_iceberg_deletes(files)
    except SparkUnavailable as error:
        record(f"/query {files:,} files, Iceberg with deletes", f"skipped: {error}")
        return
    summary = json.loads((base / "summary.json").read_text())
    tables: dict[str, dict[str, Any]] = summary["tables"]
    cache = base / "buckets" / CACHE_BUCKET / CACHE_PREFIX
    server, token = deletes_server(base, tables)
    with server:
        baseline = {name: cold_warm(server.client(token), name, files, {"version": 0}) for name in tables}
    server, token = deletes_server(base, tables)
    with server:
        deleted = {name: cold_warm(server.client(token), name, files) for name in tables}
    with server:  # a second process over the same state and cache: its index is there
        restarted = {name: cold_warm(server.client(token), name, files) for name in tables}
    server, token = deletes_server(base, tables, {"inline_dv_bytes": "0"})
    with server:
        filed = {name: cold_warm(server.client(token), name, files) for name in tables}
    dv_files = count_files(cache / "dv")
    server, token = deletes_server(base, tables, {"deletes_in_parquet": "materialize"})
    with server:
        parquet = {name: cold_warm(server.client(token), name, files, headers={}) for name in tables}
    copies = count_files(cache / "data")
    shutil.rmtree(base / "buckets" / CACHE_BUCKET, ignore_errors=True)

    seconds = summary["seconds"]
    record(
        f"Spark writing the 2 Iceberg tables of {files:,} files with deletes (once, then cached)",
        f"{sum(seconds.values()):.0f} s",
    )
    entries = {name: int(table["delete_entries"]) for name, table in tables.items()}
    assert dv_files == sum(entries.values()) and copies == dv_files, (dv_files, copies, entries)
    for name, (version, kind) in DELETE_KINDS.items():
        # None before the DELETE; inline by default (each a few dozen bytes); DV files with 0.
        assert all(vectors(a) == {} for a in baseline[name]), name
        assert all(vectors(a) == {"i": entries[name]} for a in deleted[name] + restarted[name]), name
        assert all(vectors(a) == {"p": entries[name]} for a in filed[name]), name
        label = f"{files:>7,} files, Iceberg {version}"
        with_deletes = f"{label}, {entries[name]:,} with {kind}"
        cold_warm_rows(f"{label}, no deletes (before the DELETE)", baseline[name])
        cold_warm_rows(with_deletes, deleted[name], baseline[name])
        cold_warm_rows(f"{with_deletes}, restarted (index)", restarted[name], baseline[name])
        cold_warm_rows(f"{with_deletes}, all DV files", filed[name], baseline[name])
        cold_warm_rows(f"{with_deletes}, parquet, materialized", parquet[name], baseline[name])


def deletes_server(
    base: Path, tables: dict[str, dict[str, Any]], iceberg: dict[str, str] | None = None
) -> tuple[Server, str]:
    """A server of the Spark-written tables, registered in its embedded catalog; its cache emptied."""
    shutil.rmtree(base / "buckets" / CACHE_BUCKET, ignore_errors=True)
    server = Server(
        "run-iceberg-deletes",
        {"type": "local", "root": str(base / "buckets")},
        iceberg={"cache_bucket": CACHE_BUCKET, **(iceberg or {})},
    )
    # Where a local-storage server without [catalogs] opens its embedded `default` catalog.
    server.state.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("default", uri=f"sqlite:///{server.state / 'iceberg.db'}")
    catalog.create_namespace("bench")
    for name, table in tables.items():
        catalog.register_table(("bench", name), table["metadata"])
    _, token = server.share({name: f"uniform:default:bench:{name}" for name in tables})
    return server, token


def cold_warm(
    client: httpx.Client,
    name: str,
    files: int,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] = DELTA_FORMAT,
) -> list[Answer]:
    """The first /query of a table on this server (cold), then the fastest of the next three (warm).

    The best of three, as this shared machine's load comes and goes within a second.
    """
    path = f"/shares/bench/schemas/default/tables/{name}/query"
    answers = [answer(client, path, body, headers) for _ in range(4)]
    assert all(a.lines == files + 2 for a in answers), [a.lines for a in answers]
    return [answers[0], min(answers[1:], key=lambda a: a.last)]


def vectors(found: Answer) -> dict[str, int]:
    """How many files of a delta-format answer have a deletion vector, by storage type."""
    counts: dict[str, int] = {}
    for line in found.body.splitlines():
        add = json.loads(line).get("file", {}).get("deltaSingleAction", {}).get("add") or {}
        if add.get("deletionVector"):
            kind = add["deletionVector"]["storageType"]
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def count_files(directory: Path) -> int:
    return sum(1 for path in directory.rglob("*") if path.is_file())


def cold_warm_rows(label: str, answers: list[Answer], baseline: list[Answer] | None = None) -> None:
    """First and last byte, cold and warm; against `baseline`, the last byte's ratios in brackets."""
    cold, warm = answers
    record(
        f"/query {label}: first byte (cold / warm)", f"{cold.first * 1000:.0f} / {warm.first * 1000:.0f} ms"
    )
    last = f"{cold.last:.2f} / {warm.last:.2f} s"
    if baseline:
        last += f" ({cold.last / baseline[0].last:.1f}x / {warm.last / baseline[1].last:.1f}x)"
    record(f"/query {label}: last byte (cold / warm)", last)
