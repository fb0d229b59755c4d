"""A table's first reader gets its files streamed from the checkpoint, byte for byte what the held
snapshot built behind that answer gives the next readers, and what the server gave before.

The cold threshold is lowered so the test tables stream on their first read. Each request
is made on a table alias of its own (a reader and cache of its own), so every first answer
is cold: once with the threshold as it was (held: the answer as the server gave it before),
once streamed, and again after the held snapshot was built behind it. Signatures and expiry
times are the only bytes that may differ (they change with the time of signing); paged
answers are followed to their end, and a page read cold continued from the held snapshot.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from share_store.delta import reader as delta_reader
from share_store.delta import replay
from testbed.seaweed import SeaweedS3, upload_tree
from tests.conftest import TESTDATA_BUCKET, Deployment, deploy
from tests.end_to_end.test_client_local import table_name

TESTDATA_TABLES = [
    "simple_table_with_checkpoint",
    "delta-1.2.1-only-struct-stats",
    "table_with_deletion_logs",
    "table-with-dv-small",  # commits only, deletion vectors
    "checkpoint-v2-table",  # sidecars
]
SYNTHETIC = "checkpoint_and_tail"
#: The same actions with no checkpoint: every version streamed from its commits (`streamed_commits`).
COMMITS_ONLY = "commits_only"
PARQUET = {"delta-sharing-capabilities": "responseformat=parquet"}
DELTA = {"delta-sharing-capabilities": "responseformat=delta;readerfeatures=deletionVectors"}
HINT = json.dumps(
    {
        "op": "lessThan",
        "children": [
            {"op": "column", "name": "id", "valueType": "long"},
            {"op": "literal", "value": "1500", "valueType": "long"},
        ],
    }
)
#: Request bodies: plain, a predicate hint, a limit, pages, time travel, a refresh token.
BODIES: dict[str, dict[str, Any]] = {
    "plain": {},
    "hint": {"jsonPredicateHints": HINT},
    "limit": {"limitHint": 250},
    "pages": {"maxFiles": 7},
    "hint-pages": {"jsonPredicateHints": HINT, "maxFiles": 5},
    "version": {"version": 1},
    "refresh": {"includeRefreshToken": True},
}


def write_synthetic(location: Path) -> None:
    """40 files in a checkpoint (version 1), then commits that remove files, add new ones, add two
    checkpoint files again in their place (new stats, never removed), and remove and re-add one."""
    log = location / "_delta_log"
    log.mkdir(parents=True)
    data = location / "data.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100), pa.int64())}), data)
    size = data.stat().st_size
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}

    def add(index: int, low: int) -> dict[str, Any]:
        name = f"part-{index:04d}.parquet"
        if not (location / name).exists():
            os.link(data, location / name)
        stats = json.dumps({"numRecords": 100, "minValues": {"id": low}, "maxValues": {"id": low + 99}})
        action = {"path": name, "partitionValues": {}, "size": size, "modificationTime": index}
        return {"add": action | {"dataChange": True, "stats": stats}}

    def remove(index: int) -> dict[str, Any]:
        return {"remove": {"path": f"part-{index:04d}.parquet", "deletionTimestamp": 1, "dataChange": True}}

    metadata = {
        "id": "cold",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 0,
    }
    head: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": metadata},
    ]
    commits = [head + [add(i, i * 100) for i in range(40)], [{"commitInfo": {"operation": "WRITE"}}]]
    for version, actions in enumerate(commits):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    DeltaTable(str(location)).create_checkpoint()
    tail = [
        [remove(3), remove(17)],
        [add(40, 4_000), add(41, 4_100), add(42, 4_200)],
        [add(5, 50_000), add(22, 1_000)],  # again, in their checkpoint place
        [remove(9)],
        [add(9, 900)],  # removed, then added again: listed among the new files
        [remove(40), add(43, 4_300)],
    ]
    for version, actions in enumerate(tail, start=2):
        (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def write_commits_only(location: Path) -> None:
    write_synthetic(location)
    for checkpoint in (location / "_delta_log").glob("*checkpoint*"):
        checkpoint.unlink()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("cold")
    bucket = tmp / "buckets" / TESTDATA_BUCKET
    for table in TESTDATA_TABLES:
        shutil.copytree(testdata / table, bucket / table)
    write_synthetic(bucket / SYNTHETIC)
    write_commits_only(bucket / COMMITS_ONLY)
    deployment = deploy(tmp, {"type": "local", "root": str(tmp / "buckets")})
    tables = [*TESTDATA_TABLES, SYNTHETIC, COMMITS_ONLY]
    aliases = {}
    # An alias per table, request, format and way of serving it: each first request is cold.
    for table, body, form, way in itertools.product(
        tables, BODIES, ("parquet", "delta"), ("held", "cold", "mixed")
    ):
        aliases[alias(table, body, form, way)] = table
    deployment.share_tables("cold", aliases)
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def alias(table: str, body: str, form: str, way: str) -> str:
    return f"{table_name(table)}__{body.replace('-', '_')}__{form}__{way}"


SIGNATURE = re.compile(rb'(https?://[^"?]*)\?[^"]*"')
EXPIRY = re.compile(rb'"(expirationTimestamp|minUrlExpirationTimestamp)":\d+')
TOKEN = re.compile(rb'"(nextPageToken|refreshToken)":"[^"]*"')


def unsigned(body: bytes) -> bytes:
    """`body` without what depends on the moment of signing: URLs' query strings, expiry, tokens."""
    body = SIGNATURE.sub(rb'\1"', body)
    body = EXPIRY.sub(rb'"\1":0', body)
    return TOKEN.sub(rb'"\1":"-"', body)


def answers(
    api: httpx.Client,
    name: str,
    body: dict[str, Any],
    headers: dict[str, str],
    between: Callable[[], None] | None = None,
) -> list[bytes]:
    """Every page of a /query, following its page tokens; `between` is called after the first."""
    return answers_at(api, f"/shares/cold/schemas/default/tables/{name}/query", body, headers, between)


def answers_at(
    api: httpx.Client,
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    between: Callable[[], None] | None = None,
) -> list[bytes]:
    pages, token = [], None
    while True:
        response = api.post(path, json=body | ({"pageToken": token} if token else {}), headers=headers)
        assert response.status_code == 200, response.text
        pages.append(response.content)
        if between is not None and len(pages) == 1:
            between()
        token = json.loads(response.content.splitlines()[-1]).get("endStreamAction", {}).get("nextPageToken")
        if not token:
            return pages


def built_behind() -> None:
    """Wait for the held snapshots being built behind first readers (one build at a time)."""
    delta_reader._builds.submit(lambda: None).result(timeout=60)


@pytest.fixture
def api(served: Deployment) -> Iterator[httpx.Client]:
    token = served.token("cold")
    with httpx.Client(base_url=served.endpoint, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client


@pytest.mark.parametrize("form", ["parquet", "delta"])
@pytest.mark.parametrize("body", list(BODIES))
@pytest.mark.parametrize("table", [*TESTDATA_TABLES, SYNTHETIC, COMMITS_ONLY])
def test_first_answers_are_those_of_the_held_snapshot(
    api: httpx.Client, monkeypatch: pytest.MonkeyPatch, table: str, body: str, form: str
) -> None:
    headers = PARQUET if form == "parquet" else DELTA
    if form == "parquet" and table in ("table_with_deletion_logs", "table-with-dv-small"):
        headers = DELTA  # the parquet format cannot carry deletion vectors: refused either way
    request = BODIES[body]
    held = answers(api, alias(table, body, form, "held"), request, headers)
    monkeypatch.setattr(replay, "COLD_STREAM_BYTES", -1)
    cold_alias = alias(table, body, form, "cold")
    cold = answers(api, cold_alias, request, headers)
    assert [unsigned(page) for page in cold] == [unsigned(page) for page in held]
    built_behind()
    again = answers(api, cold_alias, request, headers)
    assert [unsigned(page) for page in again] == [unsigned(page) for page in held]
    if len(held) > 1:
        # The first page read while streamed, the next ones once the held snapshot was built.
        mixed = answers(api, alias(table, body, form, "mixed"), request, headers, between=built_behind)
        assert [unsigned(page) for page in mixed] == [unsigned(page) for page in held]


@pytest.mark.parametrize("body", ["plain", "pages", "hint"])
def test_first_answers_on_s3(
    s3: Deployment, seaweed: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    """On S3 the streamed checkpoint is a downloaded copy: the same answers as the held snapshot."""
    write_synthetic(tmp_path / SYNTHETIC)
    prefix = f"cold-{body}"
    upload_tree(seaweed.client(), tmp_path / SYNTHETIC, TESTDATA_BUCKET, prefix)
    s3.share_tables(f"cold_s3_{body}", {"held": prefix, "cold": prefix, "mixed": prefix})
    token = s3.token(f"cold_s3_{body}")
    with httpx.Client(base_url=s3.endpoint, headers={"Authorization": f"Bearer {token}"}) as api:

        def pages(name: str, between: Callable[[], None] | None = None) -> list[bytes]:
            path = f"/shares/cold_s3_{body}/schemas/default/tables/{name}/query"
            return answers_at(api, path, BODIES[body], DELTA, between)

        held = pages("held")
        monkeypatch.setattr(replay, "COLD_STREAM_BYTES", -1)
        assert [unsigned(page) for page in pages("cold")] == [unsigned(page) for page in held]
        assert [unsigned(page) for page in pages("mixed", built_behind)] == [unsigned(page) for page in held]
        built_behind()
        assert [unsigned(page) for page in pages("cold")] == [unsigned(page) for page in held]
    # The recipient's client reads the table as written.
    frame = delta_sharing.load_as_pandas(f"{s3.profile(f'cold_s3_{body}')}#cold_s3_{body}.default.cold")
    assert len(frame) == 100 * 41  # 41 files of 100 rows once the tail removed 4 and added 5
