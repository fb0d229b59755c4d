"""Attacks through maintenance: the attacker of `test_catalog_hostile.py` (`s3tables:*` on the tables
of one namespace, `att`, writing files inside its own tables as engines do) asks the server to
compact, expire and clean its own tables after making their metadata name a victim's files, a
victim's folder as `write.data.path`, or a victim's metadata file in its metadata log; and calls
the maintenance API with names spelled to leave its namespace. Then it purges its table.

Nothing of the victim may be read into the attacker's table, written, deleted or changed; each
test fails while its attack works. On local storage and on S3.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from share_store.maintenance.settings import UnreferencedFileRemoval
from share_store.maintenance.unreferenced import remove_unreferenced
from share_store.own_warehouses.catalog import WarehouseCatalog
from share_store.own_warehouses.names import TableName
from tests.catalog_attacks import (
    ATT,
    BAD_REQUEST,
    Victim,
    assert_intact,
    assert_refused,
    keys_under,
    make_victim,
    rand,
    rows_table,
    split,
    table_prefix,
)
from tests.catalog_worlds import (
    World,
    current_manifests,
    make_world,
    name_of,
    new_snapshot_id,
    own_table,
    snapshot_updates,
    write_bytes,
    write_manifest,
)


@pytest.fixture(scope="module", params=["local", "s3"])
def world(request: pytest.FixtureRequest) -> World:
    return make_world(request.getfixturevalue(request.param))


def run_maintenance(world: World, name: str) -> dict[str, Any]:
    answer = world.attacker.call("POST", world.own_path(name) + "/maintenance/run")
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["runs"])


def victim_keys(world: World, victim: Victim) -> set[str]:
    return keys_under(world.deployment, victim.bucket, victim.prefix)


def new_parquet_rows(world: World, location: str, before: set[str]) -> list[dict[str, Any]]:
    """The rows of every parquet file that appeared under `location` since `before`."""
    bucket, prefix = table_prefix(world.deployment, location)
    rows: list[dict[str, Any]] = []
    for key in sorted(keys_under(world.deployment, bucket, prefix) - before):
        if key.endswith(".parquet"):
            data = world.deployment.storage.read(bucket, key)
            rows += pq.read_table(pa.BufferReader(data)).to_pylist()
    return rows


def purge(world: World, name: str) -> None:
    answer = world.attacker.call("DELETE", world.own_path(name) + "?purgeRequested=true")
    assert answer.status_code == 204, answer.text


def test_compacting_a_table_whose_manifest_names_a_victims_file_copies_none_of_it(world: World) -> None:
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    stolen = next(iter(world.admin.catalog(world.wh).load_table(victim.identifier).scan().plan_files())).file
    own = own_table(world)
    name = name_of(own)
    own.append(own_table_rows())
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    snapshot_id = new_snapshot_id()
    # The attacker's engine writes, inside its own table, a manifest naming the victim's data file.
    manifests = [*current_manifests(own), write_manifest(own, snapshot_id, [stolen], deletes=False)]
    world.attack(snapshot_updates(own, snapshot_id, manifests, operation="append"), name)
    bucket, prefix = table_prefix(world.deployment, own.location())
    before = keys_under(world.deployment, bucket, prefix)
    before_victim = victim_keys(world, victim)

    runs = run_maintenance(world, name)

    rows = new_parquet_rows(world, own.location(), before)
    victims_rows = {(row[0], row[1]) for row in victim.rows}
    copied = [row for row in rows if (row.get("id"), row.get("name")) in victims_rows]
    assert not copied, f"the compaction copied the victim's rows into the attacker's table: {copied}"
    # The compaction could not read the victim's file through the table's confined FileIO.
    assert runs["icebergCompaction"]["status"] == "Failed", runs
    purge(world, name)
    assert_intact(world.deployment, world.admin, victim)
    assert victim_keys(world, victim) == before_victim


def own_table_rows() -> pa.Table:
    return rows_table([(11, "y")])


def crafted_register(world: World, victim: Victim, properties: dict[str, str]) -> tuple[str, Any]:
    """The attacker drops its own table (no purge), then registers, under a new name, a metadata
    file it wrote beside the table's own: the same table, but with `properties` and a metadata log
    naming the victim's metadata file. The name asked for, and the catalog's answer."""
    own = own_table(world)
    name = name_of(own)
    own.append(own_table_rows())  # two data files: something to compact
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    metadata = json.loads(own.metadata.model_dump_json(by_alias=True, exclude_none=True))
    metadata["properties"] = {**metadata.get("properties", {}), **properties}
    metadata["metadata-log"] = [
        *metadata.get("metadata-log", []),
        {"metadata-file": victim.metadata_location, "timestamp-ms": 1},
    ]
    crafted = f"{own.location()}/metadata/99999-{rand()}.metadata.json"
    write_bytes(own, crafted, json.dumps(metadata).encode())
    dropped = world.attacker.call("DELETE", world.own_path(name))
    assert dropped.status_code == 204, dropped.text
    registered = f"again_{rand()}"
    body = {"name": registered, "metadata-location": crafted}
    return registered, world.attacker.call("POST", f"/{world.wh}/namespaces/{ATT}/register", body)


def test_a_registered_write_data_path_into_a_victims_folder_gets_no_file_there(world: World) -> None:
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    before = victim_keys(world, victim)
    name, answer = crafted_register(world, victim, {"write.data.path": f"{victim.location}/data"})
    assert_refused(answer, 400, BAD_REQUEST)  # as a create's or a commit's write paths are
    missing = world.attacker.call("DELETE", world.own_path(name) + "?purgeRequested=true")
    assert_refused(missing, 404)
    assert victim_keys(world, victim) == before
    assert_intact(world.deployment, world.admin, victim)


def test_a_metadata_log_naming_a_victims_metadata_file_deletes_nothing_of_the_victim(world: World) -> None:
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    before = victim_keys(world, victim)
    name, answer = crafted_register(world, victim, {
        "write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1",
    })  # fmt: skip
    assert answer.status_code == 200, answer.text  # a metadata log is the attacker's to write
    for n in range(3):
        answer = world.attack([{"action": "set-properties", "updates": {"n": str(n)}}], name)
        assert answer.status_code == 200, answer.text
    run_maintenance(world, name)
    purge(world, name)
    assert victim_keys(world, victim) == before
    assert_intact(world.deployment, world.admin, victim)


SPELLINGS = ["..%2F{ns}%2Fkept", "%2E%2E%2F{ns}%2Fkept", "kept%23", "kept%3Fx=1", "..", "{wh}%2F{ns}%2Fkept"]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_maintenance_calls_with_names_that_leave_the_namespace_touch_no_victim(
    world: World, spelling: str
) -> None:
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    before = victim_keys(world, victim)
    table = spelling.format(ns=victim.namespace, wh=world.wh)
    path = f"/{world.wh}/namespaces/{ATT}/tables/{table}/maintenance"
    value = {"value": {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 64}}}}
    answers = [
        world.attacker.call("POST", path + "/run"),
        world.attacker.call("PUT", path + "/icebergCompaction", value),
        world.attacker.call("GET", path),
        world.attacker.call("GET", path + "-job-status"),
    ]
    for answer in answers:
        assert 400 <= answer.status_code < 500, (answer.request.url, answer.status_code, answer.text[:200])
    configured = world.admin.call("GET", f"/{world.wh}/namespaces/{victim.namespace}/tables/kept/maintenance")
    assert configured.json()["configuration"]["icebergCompaction"]["settings"]["icebergCompaction"][
        "targetFileSizeMB"] == 512  # fmt: skip
    assert victim_keys(world, victim) == before
    assert_intact(world.deployment, world.admin, victim)


def test_a_link_in_the_attackers_folder_to_a_victims_file_is_never_deleted_by_cleaning(world: World) -> None:
    """On local storage the attacker's engine plants a symbolic link to the victim's data file in its
    own table's folder: unreferenced-file removal, run long after, must not delete the victim's file."""
    if world.s3:
        pytest.skip("links are a file system's")
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    name = name_of(own)
    target = world.root / victim.bucket / split(world.deployment, victim.data_files[0])[1]
    link = world.root / victim.bucket / split(world.deployment, own.location())[1] / "data" / "link.parquet"
    link.symlink_to(target)
    catalog = WarehouseCatalog(world.deployment.store.transactions, world.deployment.storage)
    table = TableName.of(world.wh, (ATT,), name)
    for days in (4, 20, 40):
        try:
            later = datetime.now(UTC) + timedelta(days=days)
            remove_unreferenced(catalog, table, UnreferencedFileRemoval(), later)
        except PermissionError:
            pass  # the store refuses to delete through a link: the run says so, the victim keeps its file
    assert target.exists() and not target.is_symlink()
    purge(world, name)
    assert_intact(world.deployment, world.admin, victim)
