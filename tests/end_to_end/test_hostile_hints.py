"""Hostile `jsonPredicateHints` against a live server: node cap, wide ORs, the CPU budget, hang-ups.

A hint is evaluated for every file, so one request could burn minutes of CPU
(a 6,000-way OR on 10,000 files took 203 s), and kept at it after its client
left. Now a hint of more nodes than the cap is refused, one within it is
compiled once, one that spends its CPU budget stops filtering (every later file
is returned: hints are advisory), and a client that hangs up stops the work.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from share_store.tables.actions import FileEntry
from share_store.tables.predicates import MAX_NODES
from sharing_server.delta_sharing.hint_filter import HintFilter
from sharing_server.http.errors import ClientGone
from tests.conftest import TESTDATA_BUCKET, Deployment, audit_records, deploy

FILES = 1_000
PARTITIONS = 20
QUERY = "/shares/hostile/schemas/s/tables/t/query"


def make_table(root: Path) -> list[str]:
    """A Delta table of FILES files over PARTITIONS values of `p`; file i holds ids i*100..i*100+99.

    Its data files are empty stand-ins: the server only checks that they exist.
    """
    (root / "_delta_log").mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "integer", "nullable": True, "metadata": {}},
        ],
    }
    metadata = {
        "id": "hostile",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": ["p"],
        "configuration": {},
        "createdTime": 0,
    }
    lines: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": metadata},
    ]
    paths = []
    for i in range(FILES):
        path = f"p={i % PARTITIONS}/part-{i:05d}.parquet"
        (root / path).parent.mkdir(exist_ok=True)
        (root / path).touch()
        stats = {
            "numRecords": 100,
            "minValues": {"id": i * 100},
            "maxValues": {"id": i * 100 + 99},
            "nullCount": {"id": 0},
        }
        add = {
            "path": path,
            "partitionValues": {"p": str(i % PARTITIONS)},
            "size": 1,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps(stats),
        }
        lines.append({"add": add})
        paths.append(path)
    (root / "_delta_log" / "00000000000000000000.json").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    return paths


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("hostile-table") / "buckets"
    return root, make_table(root / TESTDATA_BUCKET / "hostile")


def serve(tmp: Path, root: Path, limits: dict[str, str]) -> Deployment:
    deployment = deploy(
        tmp,
        {"type": "local", "root": str(root)},
        env={
            "SHARING_LIMITS_PER_TOKEN_RPS": "0",
            **{f"SHARING_LIMITS_{k.upper()}": v for k, v in limits.items()},
        },
    )
    deployment.share_tables("hostile", {"t": "hostile"}, schema="s")
    return deployment


@pytest.fixture(scope="module")
def hostile_table_server(
    tmp_path_factory: pytest.TempPathFactory, table: tuple[Path, list[str]]
) -> Iterator[Deployment]:
    """The default node cap, and a budget no hint here spends, so that file skipping can be checked exactly.

    (The budget counts all the CPU a hint costs, garbage collection included,
    and this test process has a far larger heap than a server.)
    """
    deployment = serve(tmp_path_factory.mktemp("hostile"), table[0], {"hint_budget_ms": "60000"})
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def leaf(op: str, column: str, value: int) -> dict[str, Any]:
    return {
        "op": op,
        "children": [
            {"op": "column", "name": column, "valueType": "int"},
            {"op": "literal", "value": str(value), "valueType": "int"},
        ],
    }


def any_of(children: list[dict[str, Any]]) -> dict[str, Any]:
    return {"op": "or", "children": children}


def id_range(low: int, high: int) -> dict[str, Any]:
    return {
        "op": "and",
        "children": [leaf("greaterThanOrEqual", "id", low), leaf("lessThanOrEqual", "id", high)],
    }


def query(server: Deployment, hint: dict[str, Any] | None, **body: Any) -> httpx.Response:
    token = server.token("hostile")
    if hint is not None:
        body["jsonPredicateHints"] = json.dumps(hint)
    return httpx.post(
        server.endpoint + QUERY,
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def file_paths(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    lines = [json.loads(line) for line in response.text.splitlines()]
    urls = [line["file"]["url"] for line in lines if "file" in line]
    return [unquote(url.split("?")[0].split("/hostile/", 1)[1]) for url in urls]


def paged_paths(server: Deployment, hint: dict[str, Any], max_files: int) -> list[str]:
    """Every file of a paged listing, page after page."""
    token = server.token("hostile")
    body: dict[str, Any] = {"jsonPredicateHints": json.dumps(hint), "maxFiles": max_files}
    paths: list[str] = []
    while True:
        response = httpx.post(
            server.endpoint + QUERY, json=body, headers={"Authorization": f"Bearer {token}"}
        )
        paths += file_paths(response)
        end = json.loads(response.text.splitlines()[-1])["endStreamAction"]
        if "nextPageToken" not in end:
            return paths
        body["pageToken"] = end["nextPageToken"]


def test_a_hint_over_the_node_cap_is_refused(hostile_table_server: Deployment) -> None:
    # An OR of n equalities has 1 + 3n nodes: 3,334 of them make 10,003, past the cap of 10,000.
    response = query(hostile_table_server, any_of([leaf("equal", "p", k) for k in range(MAX_NODES // 3 + 1)]))
    assert response.status_code == 400
    assert response.json()["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert f"more than {MAX_NODES:,} nodes" in response.json()["message"]


def test_wide_ors_within_the_cap_skip_exactly_the_files_they_rule_out(
    hostile_table_server: Deployment, table: tuple[Path, list[str]]
) -> None:
    _, paths = table
    width = (MAX_NODES - 1) // 3  # 10,000 nodes: the widest OR of equalities allowed
    # Partition values 3 and 7 exist; the other 3,331 values match no file.
    partitions = any_of([leaf("equal", "p", k) for k in [3, 7, *range(1000, 1000 + width - 2)]])
    assert sorted(file_paths(query(hostile_table_server, partitions))) == sorted(
        path for path in paths if path.startswith(("p=3/", "p=7/"))
    )
    # Ids in files 5, 500 and 999 (by their stats), the rest beyond every file.
    ids = any_of(
        [leaf("equal", "id", value) for value in [550, 50_042, 99_999, *range(10**6, 10**6 + width - 3)]]
    )
    assert sorted(file_paths(query(hostile_table_server, ids))) == sorted([paths[5], paths[500], paths[999]])
    # Ranges, merged into one set of intervals; the widest OR of them the cap allows.
    ranges = any_of([id_range(10_000 * k + 10, 10_000 * k + 20) for k in range(100)])
    expected = [paths[100 * k] for k in range(FILES // 100)]
    assert sorted(file_paths(query(hostile_table_server, ranges))) == sorted(expected)
    widest = any_of([id_range(10_000 * k + 10, 10_000 * k + 20) for k in range((MAX_NODES - 1) // 7)])
    assert sorted(file_paths(query(hostile_table_server, widest))) == sorted(expected)
    # Partition values are looked at before stats, and decide alone where they can.
    both = {
        "op": "and",
        "children": [leaf("equal", "p", 3), any_of([id_range(300, 399), id_range(2300, 2399)])],
    }
    assert sorted(file_paths(query(hostile_table_server, both))) == sorted([paths[3], paths[23]])


@pytest.fixture(scope="module")
def stingy(tmp_path_factory: pytest.TempPathFactory, table: tuple[Path, list[str]]) -> Iterator[Deployment]:
    """A budget no hint fits in (a nanosecond per 10,000 files)."""
    deployment = serve(tmp_path_factory.mktemp("stingy"), table[0], {"hint_budget_ms": "0.000001"})
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def test_a_hint_over_its_budget_is_ignored_not_failed(
    stingy: Deployment, table: tuple[Path, list[str]]
) -> None:
    _, paths = table
    hint = any_of([leaf("equal", "p", 3), leaf("equal", "p", 7)])
    assert sorted(file_paths(query(stingy, hint))) == sorted(paths)
    # Pages of such a listing still add up to every file once.
    paged = paged_paths(stingy, hint, max_files=700)
    assert sorted(paged) == sorted(paths)
    # limitHint still cuts the (unfiltered) listing.
    assert len(file_paths(query(stingy, hint, limitHint=250))) == 3


def test_paged_listings_with_a_hint_list_each_file_once(
    hostile_table_server: Deployment, table: tuple[Path, list[str]]
) -> None:
    _, paths = table
    hint = any_of([leaf("equal", "p", 3), leaf("equal", "p", 7)])
    expected = sorted(path for path in paths if path.startswith(("p=3/", "p=7/")))
    assert sorted(paged_paths(hostile_table_server, hint, max_files=30)) == expected


@pytest.fixture(scope="module")
def unbudgeted(
    tmp_path_factory: pytest.TempPathFactory, table: tuple[Path, list[str]]
) -> Iterator[Deployment]:
    """No budget at all (hint_budget_ms = 0): only a hang-up stops an expensive hint."""
    deployment = serve(tmp_path_factory.mktemp("unbudgeted"), table[0], {"hint_budget_ms": "0"})
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def test_a_client_that_hangs_up_stops_the_work(unbudgeted: Deployment) -> None:
    # 999 ranges of three bounds each (ranges of two merge into one bisected set of intervals)
    # that no file's stats can decide at once: seconds of work for 1,000 files.
    ranges = any_of(
        [
            {
                "op": "and",
                "children": [
                    *id_range(1000 * k + 10, 1000 * k + 20)["children"],
                    leaf("lessThan", "id", 10**9),
                ],
            }
            for k in range((MAX_NODES - 1) // 10)
        ]
    )
    body = json.dumps({"jsonPredicateHints": json.dumps(ranges)}).encode()
    host, port = "127.0.0.1", unbudgeted.config.port
    request = (
        f"POST /delta-sharing{QUERY} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Authorization: Bearer {unbudgeted.token('hostile')}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, port)) as connection:
        connection.sendall(request + body)
        time.sleep(0.5)  # the server is busy with the hint: nothing has come back yet
        connection.setblocking(False)
        with pytest.raises(BlockingIOError):
            connection.recv(1)
    # The audit line is written once the request's work ends: it says the work was stopped.
    records: list[dict[str, Any]] = []
    while not records and time.monotonic() - started < 30:
        time.sleep(0.05)
        records = [r for r in audit_records(unbudgeted) if r["route"] == "table_query"]
    assert records, "the request never ended"
    assert records[-1]["status"] == 499
    assert records[-1]["error_code"] == "CLIENT_CLOSED_REQUEST"


# -- the budget and page horizons, without a server -----------------------------------------


def entries(count: int) -> list[FileEntry]:
    return [FileEntry({"path": f"f{i}", "partitionValues": {}}) for i in range(count)]


def odd_only(entry: FileEntry) -> bool:
    return int(entry.path[1:]) % 2 == 1


def test_a_spent_budget_keeps_every_file_from_then_on() -> None:
    spent = HintFilter(odd_only, budget=0.5, spent=1.0)  # parsing and compiling took it all
    assert [e.path for e in spent.apply(entries(6))] == [f"f{i}" for i in range(6)]
    assert spent.page_state() == {"hc": 0}
    unlimited = HintFilter(odd_only, budget=None, spent=1.0)
    assert [e.path for e in unlimited.apply(entries(6))] == ["f1", "f3", "f5"]
    assert unlimited.page_state() == {"hn": 6}


def test_later_pages_apply_the_hint_as_far_as_earlier_ones_did() -> None:
    # An earlier page judged 4 files by the hint: so does this one, though its budget is spent.
    resumed = HintFilter(odd_only, budget=0.5, resumed={"hn": 4}, spent=1.0)
    assert [e.path for e in resumed.apply(entries(8))] == ["f1", "f3", "f4", "f5", "f6", "f7"]
    assert resumed.page_state() == {"hc": 4}
    # An earlier page stopped at file 2: this one stops there too, with budget to spare.
    cut = HintFilter(odd_only, budget=None, resumed={"hc": 2})
    assert [e.path for e in cut.apply(entries(5))] == ["f1", "f2", "f3", "f4"]
    assert cut.page_state() == {"hc": 2}


def test_a_hang_up_ends_the_listing() -> None:
    gone = threading.Event()
    listing = HintFilter(odd_only, budget=None, gone=gone).apply(entries(1000))
    assert next(listing).path == "f1"
    gone.set()
    with pytest.raises(ClientGone):
        list(listing)
