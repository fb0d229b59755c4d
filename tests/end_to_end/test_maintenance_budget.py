"""Maintenance within the budget the provider sets, whatever a caller's files and table say.

The attacker of `test_catalog_hostile_maintenance.py` (a catalog user with `s3tables:*` on one
namespace, writing with pyiceberg) makes its own tables cost the server what it likes:

- a ~60 KB Parquet file that decodes to 1 GB (one string value of 50 KB repeated 20,001 times,
  which dictionary and RLE encoding store once; or the same without a dictionary, zstd-compressed),
  added with pyiceberg's `add_files` beside two honest small files, then a run asked for: the
  server's peak RSS must not jump by the decoded size, the file is left in the table as it is and
  the run's status names it, the honest files are compacted;
- `write.parquet.row-group-limit = 1` (and one-byte pages and row groups, zstd level 22) on a
  table of 20,001 rows: compaction writes its own row groups, not 20,001 of them;
- runs asked for 40 tables at once: beyond the per-caller and the server's limits the requests
  answer 429 with `Retry-After` in the Iceberg error model, while the provider's own requests
  (`GET /v1/warehouses`, a run of its own) are answered;
- a run past its CPU or wall-clock budget commits nothing and says so.

On local storage, and the bomb on S3 (SeaweedFS) too.
"""

from __future__ import annotations

import io
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from share_store.authentication.tokens import hash_secret
from tests.catalog_attacks import ATT, V2, keys_under, rand, rows_table, table_prefix
from tests.catalog_worlds import World, make_world, name_of, own_table, write_bytes
from tests.conftest import Deployment, deploy

ADMIN_TOKEN = "dsa_maintenance-budget-admin-0123456789abcdef"
COMPACTION = "icebergCompaction"
#: The bomb: 20,001 rows of one 50 KB value, 1 GB decoded.
BOMB_ROWS, BOMB_VALUE = 20_001, 50_000
MB = 1024 * 1024


def served(tmp: Path, **settings: str) -> Deployment:
    """A server on local storage under `tmp` with `[maintenance]` settings (as SHARING_MAINTENANCE_*)."""
    (tmp / "storage").mkdir()
    env = {"SHARING_ADMIN_TOKEN_HASH": hash_secret(ADMIN_TOKEN)}
    env |= {f"SHARING_MAINTENANCE_{key.upper()}": value for key, value in settings.items()}
    return deploy(tmp, {"type": "local", "root": str(tmp / "storage")}, env=env)


@pytest.fixture(scope="module", params=["local", "s3"])
def world(request: pytest.FixtureRequest) -> World:
    return make_world(request.getfixturevalue(request.param))


def run_maintenance(world: World, name: str) -> dict[str, Any]:
    answer = world.attacker.call("POST", world.own_path(name) + "/maintenance/run")
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["runs"])


def job_status(world: World, name: str) -> dict[str, Any]:
    answer = world.attacker.call("GET", world.own_path(name) + "/maintenance-job-status")
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["status"])


def live_files(table: Table) -> dict[str, int]:
    """The table's live data files and their row counts, from its manifests (no row is read)."""
    return {task.file.file_path: task.file.record_count for task in table.refresh().scan().plan_files()}


def bomb_bytes(dictionary: bool) -> bytes:
    """Parquet of ROWS' columns, as any engine writes it: 20,001 ids and one 50 KB name repeated,
    1 GB decoded, in one row group; dictionary-encoded, or plain and zstd-compressed.

    Made from dictionary chunks of 1,000 rows, which the writer decodes one at a time (without a
    dictionary), so that this process never holds the gigabyte; with no Arrow schema stored, the
    column reads as the plain strings it is."""
    value = pa.array(["x" * BOMB_VALUE])
    sizes = [1000] * (BOMB_ROWS // 1000) + [BOMB_ROWS % 1000]
    names = pa.chunked_array(
        [pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), value) for n in sizes]
    )
    ids = pa.array(range(1000, 1000 + BOMB_ROWS), pa.int64())
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", names.type)])
    buffer = io.BytesIO()
    pq.write_table(
        pa.Table.from_arrays([ids, names], schema=schema), buffer, compression="zstd",
        use_dictionary=dictionary, row_group_size=BOMB_ROWS, store_schema=False,
    )  # fmt: skip
    return buffer.getvalue()


def memory_mb(field: str) -> float:
    """The server's memory (it runs in this process: tests/live_server.py), from /proc."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE).group(1)) / 1024  # type: ignore[union-attr]


def reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux: 5 > clear_refs)."""
    Path("/proc/self/clear_refs").write_text("5")


@pytest.mark.parametrize("dictionary", [True, False], ids=["dictionary", "compressed"])
def test_a_file_that_decodes_to_a_gigabyte_is_left_as_it_is_and_named(world: World, dictionary: bool) -> None:
    own = own_table(world)  # one honest small file
    name = name_of(own)
    own.append(rows_table([(11, "y")]))  # and another: something to compact
    data = bomb_bytes(dictionary)
    assert len(data) < 200_000, len(data)  # small on disk
    bomb = f"{own.location()}/data/bomb-{rand()}.parquet"
    write_bytes(own, bomb, data)
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    own.add_files([bomb])
    before = live_files(own)
    assert before[bomb] == BOMB_ROWS and len(before) == 3

    reset_peak()
    idle = memory_mb("VmRSS")
    runs = run_maintenance(world, name)
    peak = memory_mb("VmHWM")

    # Its row group's decoded size was found before its rows were read: the server never held them.
    assert peak - idle < 256, f"peak RSS rose {peak - idle:.0f} MB over {idle:.0f} MB during the run"
    compaction = runs[COMPACTION]
    assert compaction["status"] == "Successful", compaction
    skipped = compaction["details"]["files_skipped"]
    assert [entry["path"] for entry in skipped] == [bomb], compaction
    assert "MiB" in skipped[0]["reason"], skipped
    assert bomb in compaction["message"], compaction
    # The honest files were compacted around it; the bomb stays, its rows neither lost nor doubled.
    assert compaction["details"]["files_rewritten"] == 2, compaction
    after = live_files(own)
    assert after[bomb] == BOMB_ROWS and len(after) == 2
    assert sum(after.values()) == sum(before.values())
    status = job_status(world, name)[COMPACTION]
    assert bomb in status["message"] and status["details"]["files_skipped"] == skipped, status


def stored_parquet(world: World, path: str) -> pq.ParquetFile:
    bucket, prefix = table_prefix(world.deployment, path)
    return pq.ParquetFile(pa.BufferReader(world.deployment.storage.read(bucket, prefix.rstrip("/"))))


HOSTILE_WRITES = {
    "write.parquet.row-group-limit": "1",
    "write.parquet.row-group-size-bytes": "1",
    "write.parquet.page-size-bytes": "1",
    "write.parquet.page-row-limit": "1",
    "write.parquet.dict-size-bytes": "1",
    "write.parquet.compression-codec": "zstd",
    "write.parquet.compression-level": "22",
}


def test_a_tables_parquet_settings_cannot_make_compaction_write_a_row_group_per_row(world: World) -> None:
    """20,001 rows in three appends, then the table's writer settings set to one row per row group
    (and one-byte pages, zstd's slowest level): the compacted file has the server's row groups."""
    if world.s3:
        pytest.skip("the writer's settings are storage's alike: local storage is enough")
    catalog = world.attacker.catalog(world.wh)
    identifier = f"{ATT}.rg_{rand()}"
    table = catalog.create_table(identifier, schema=rows_table([]).schema, properties=V2)
    for first in (0, 6667, 13334):
        count = min(6667, 20_001 - first)
        table.append(rows_table([(i, f"name-{i % 97}") for i in range(first, first + count)]))
    table = catalog.load_table(identifier)
    inputs = sum(task.file.file_size_in_bytes for task in table.scan().plan_files())
    with table.transaction() as transaction:
        transaction.set_properties(HOSTILE_WRITES)
    name = name_of(table)

    runs = run_maintenance(world, name)

    assert runs[COMPACTION]["status"] == "Successful", runs
    assert runs[COMPACTION]["details"]["files_rewritten"] == 3, runs
    (path,) = live_files(table)
    written = stored_parquet(world, path)
    # 20,001 rows are under the floor of a row group (100,000 rows or 64 MiB): one.
    assert written.metadata.num_row_groups == 1
    assert written.metadata.num_rows == 20_001
    assert table.io.new_input(path).exists()
    assert runs[COMPACTION]["details"]["bytes_written"] <= 2 * inputs, (runs, inputs)
    ids = sorted(written.read(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(20_001))


# -- the queue -------------------------------------------------------------------------------------

FLOOD = 40


@pytest.fixture(scope="module")
def queued(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A server of its own with the default limits, and the attacker's world on it."""
    deployment = served(tmp_path_factory.mktemp("maintenance-queue"))
    try:
        yield make_world(deployment)
    finally:
        deployment.server.stop()
        deployment.store.close()


def test_forty_runs_at_once_are_429_beyond_the_limits_and_the_provider_is_answered(queued: World) -> None:
    world = queued
    names = []
    for _ in range(FLOOD):
        table = own_table(world)
        table.append(rows_table([(11, "y")]))
        names.append(name_of(table))
    admin = world.deployment.catalog_api(ADMIN_TOKEN)
    catalog = f"{world.deployment.server.url}/_iceberg"
    provider = {"type": "rest", "uri": catalog, "warehouse": world.wh, "token": ADMIN_TOKEN}
    mine = load_catalog(f"p-{rand()}", **provider)
    namespace = f"prov_{rand()}"
    mine.create_namespace(namespace)
    kept = mine.create_table(f"{namespace}.kept", schema=rows_table([]).schema)
    kept.append(rows_table([(1, "a")]))
    kept.append(rows_table([(2, "b")]))

    flooding = threading.Event()
    listed: list[int] = []

    def list_warehouses() -> None:
        while not flooding.is_set():
            listed.append(admin.get("/warehouses").status_code)
            time.sleep(0.02)

    lister = threading.Thread(target=list_warehouses)
    lister.start()
    try:
        with ThreadPoolExecutor(FLOOD) as pool:
            answers = list(pool.map(lambda name: world.attacker.call(
                "POST", world.own_path(name) + "/maintenance/run"), names))  # fmt: skip
            # The provider's own run, asked for while the attacker's wait: another caller, served.
            own_run = admin.post(f"/{world.wh}/namespaces/{namespace}/tables/kept/maintenance/run")
    finally:
        flooding.set()
        lister.join()
    ran = [answer for answer in answers if answer.status_code == 200]
    refused = [answer for answer in answers if answer.status_code != 200]
    assert all(answer.status_code == 429 for answer in refused), [a.text for a in refused][:3]
    # Two of the attacker's at a time (running or waiting): most of the 40 found it at its limit.
    assert len(refused) >= FLOOD // 2, (len(ran), len(refused))
    for answer in refused:
        error = answer.json()["error"]
        assert error["type"] == "TooManyRequestsException" and error["code"] == 429, error
        assert int(answer.headers["Retry-After"]) >= 1, answer.headers
    assert all(a.json()["runs"][COMPACTION]["status"] == "Successful" for a in ran)
    assert own_run.status_code == 200, own_run.text
    assert own_run.json()["runs"][COMPACTION]["details"]["files_rewritten"] == 2
    # The provider's listing was answered throughout (its time is the bench's).
    assert listed and set(listed) == {200}, listed
    # A refused run ran nothing: asked again once the flood is over, it runs.
    first_refused = names[answers.index(refused[0])]
    again = world.attacker.call("POST", world.own_path(first_refused) + "/maintenance/run")
    assert again.status_code == 200, again.text


# -- the budget ------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", ["run_cpu_seconds", "run_seconds"])
def test_a_run_past_its_budget_commits_nothing_and_says_so(
    tmp_path_factory: pytest.TempPathFactory, budget: str
) -> None:
    deployment = served(tmp_path_factory.mktemp("maintenance-budget"), **{budget: "0.000001"})
    try:
        world = make_world(deployment)
        own = own_table(world)
        name = name_of(own)
        own.append(rows_table([(11, "y")]))
        bucket, prefix = table_prefix(deployment, own.location())
        before_keys = {k for k in keys_under(deployment, bucket, prefix) if k.endswith(".parquet")}
        before = live_files(own)
        snapshot = own.refresh().current_snapshot()

        compaction = run_maintenance(world, name)[COMPACTION]

        assert compaction["status"] == "Successful", compaction
        assert "budget" in compaction["message"], compaction
        assert compaction["details"]["snapshot_id"] is None, compaction
        assert live_files(own) == before
        assert own.refresh().current_snapshot().snapshot_id == snapshot.snapshot_id  # type: ignore[union-attr]
        # What it had written before it stopped is gone: no file of a half rewrite stays behind.
        after_keys = {k for k in keys_under(deployment, bucket, prefix) if k.endswith(".parquet")}
        assert after_keys == before_keys
        assert "budget" in job_status(world, name)[COMPACTION]["message"]
    finally:
        deployment.server.stop()
        deployment.store.close()


def test_the_run_limits_are_checked_when_the_server_starts(tmp_path: Path) -> None:
    from sharing_server.config import load_config
    from sharing_server.http.errors import ConfigError

    for key, value in [("RUNS_AT_ONCE", "0"), ("RUN_CPU_SECONDS", "-1"), ("ROW_GROUP_DECODED_MB", "x")]:
        with pytest.raises(ConfigError, match=r"\[maintenance\]"):
            env = {"SHARING_SERVER_DATA_DIR": str(tmp_path), f"SHARING_MAINTENANCE_{key}": value}
            assert load_config(env=env).options is None


def test_the_dictionary_bombs_footer_does_not_say_what_it_decodes_to() -> None:
    """What the attack relies on: the footer's uncompressed sizes are a quarter of a megabyte (the
    value stored once, the rows as one run of its index), not the gigabyte the rows decode to."""
    metadata = pq.ParquetFile(pa.BufferReader(bomb_bytes(True))).metadata
    assert metadata.num_row_groups == 1 and metadata.num_rows == BOMB_ROWS
    assert metadata.row_group(0).total_byte_size < MB
