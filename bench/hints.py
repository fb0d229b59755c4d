"""Predicate hints: the server's CPU per /query with wide jsonPredicateHints, against a plain /query."""

from __future__ import annotations

import json
from typing import Any

import httpx

from bench.delta_tables import make_partitioned_table
from bench.paths import BUCKET
from bench.results import record
from bench.servers import Server
from share_store.tables.predicates import MAX_NODES

HINT_PARTITIONS = 100
HINT_MAX_NODES = MAX_NODES  # the widest hints below stay within the default node cap


def _leaf(op: str, column: str, value: int) -> dict[str, Any]:
    return {
        "op": op,
        "children": [
            {"op": "column", "name": column, "valueType": "int"},
            {"op": "literal", "value": str(value), "valueType": "int"},
        ],
    }


def _any(children: list[dict[str, Any]]) -> dict[str, Any]:
    return {"op": "or", "children": children}


def hint_shapes(files: int, max_nodes: int) -> list[tuple[str, dict[str, Any]]]:
    """Hints of growing cost on `make_partitioned_table`'s table, the widest just within `max_nodes`.

    An OR of comparisons has 1 + 3 nodes per child; of ranges (an AND of two), 1 + 7.
    """
    wide = (max_nodes - 1) // 3
    ranges = (max_nodes - 1) // 7

    def on_ids(count: int) -> list[int]:
        # One id in each of `count` files spread over the table (file i holds ids i*100..i*100+99).
        step = max(files // count, 1)
        return [(k * step % files) * 100 + 50 for k in range(count)]

    def range_of(value: int) -> dict[str, Any]:
        return {
            "op": "and",
            "children": [_leaf("greaterThanOrEqual", "id", value), _leaf("lessThanOrEqual", "id", value + 9)],
        }

    return [
        ("60-way OR, partition column", _any([_leaf("equal", "p", k) for k in range(60)])),
        ("60-way OR, stats column", _any([_leaf("equal", "id", i) for i in on_ids(60)])),
        (f"{wide:,}-way OR, partition column", _any([_leaf("equal", "p", k + 50) for k in range(wide)])),
        (f"{wide:,}-way OR, stats column", _any([_leaf("equal", "id", i) for i in on_ids(wide)])),
        (f"{ranges:,}-way OR of id ranges", _any([range_of(i) for i in on_ids(ranges)])),
    ]


def query_cpu(server: Server, client: httpx.Client, path: str, body: dict[str, Any]) -> tuple[float, int]:
    """Server CPU seconds per request (the mean of up to 10, fewer once they take seconds) and lines."""
    spent = 0.0
    count = 0
    lines = 0
    while count < 10 and (spent < 2.0 or count == 0):
        before = server.cpu_seconds()
        with client.stream("POST", path, json=body) as response:
            response.raise_for_status()
            lines = sum(chunk.count(b"\n") for chunk in response.iter_bytes())
        spent += server.cpu_seconds() - before
        count += 1
    return spent / count, lines


def bench_hints(files: int) -> None:
    """Server CPU per /query with wide predicate hints, against a plain /query of the same table."""
    name = f"p{files // 1000}k"
    make_partitioned_table(BUCKET / name, files, HINT_PARTITIONS)
    server = Server("run-hints")
    _, token = server.share({name: f"delta:bench:{name}"})
    path = f"/shares/bench/schemas/default/tables/{name}/query"
    with server:
        client = server.client(token)
        query_cpu(server, client, path, {})  # the snapshot is cached from here on
        plain, lines = query_cpu(server, client, path, {})
        assert lines == files + 2, (lines, files)
        record(f"/query {files:,} partitioned files: server CPU, plain", f"{plain * 1000:.0f} ms")
        for label, tree in hint_shapes(files, HINT_MAX_NODES):
            cpu, lines = query_cpu(server, client, path, {"jsonPredicateHints": json.dumps(tree)})
            ratio = cpu / plain
            record(
                f"  with a {label} ({lines - 2:,} files)",
                f"{cpu * 1000:,.0f} ms, {ratio:.1f}x",
                "<= 2x plain",
                "met" if ratio <= 2 else "missed",
            )
        # One comparison more than the node cap allows: refused before any table work.
        width = HINT_MAX_NODES // 3 + 1
        over = {"jsonPredicateHints": json.dumps(_any([_leaf("equal", "id", i) for i in range(width)]))}
        before = server.cpu_seconds()
        refused = [client.post(path, json=over).status_code for _ in range(10)]
        assert refused == [400] * 10, refused
        cpu = (server.cpu_seconds() - before) / 10
        record(
            f"  with a {width:,}-way OR, over the node cap (400)", f"{cpu * 1000:,.0f} ms, {cpu / plain:.1f}x"
        )
