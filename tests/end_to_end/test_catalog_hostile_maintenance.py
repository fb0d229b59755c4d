"""Attacks through maintenance: the attacker of `test_catalog_hostile.py` (`s3tables:*` on the tables
of one namespace, `att`, writing files inside its own tables as engines do) asks the server to
compact, expire and clean its own tables after making their metadata name a victim's files, a
victim's folder as `write.data.path`, or a victim's metadata file in its metadata log; and calls
the maintenance API with names spelled to leave its namespace. Then it purges its table.

Nothing of the victim may be read into the attacker's table, written, deleted or changed; each
test fails while its attack works. On local storage and on S3.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.commits import DELETE_AFTER_COMMIT
from share_store.catalog.maintenance.background import BackgroundMaintenance
from share_store.catalog.maintenance.configuration import KINDS, UnreferencedFileRemoval
from share_store.catalog.maintenance.maintainer import Maintainer
from share_store.catalog.maintenance.rows import Run
from share_store.catalog.maintenance.schedule import Background
from share_store.catalog.maintenance.unreferenced import remove_unreferenced
from share_store.catalog.names import TableName
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
    uri,
)
from tests.catalog_worlds import (
    World,
    current_manifests,
    make_world,
    name_of,
    new_snapshot_id,
    own_table,
    snapshot_updates,
    statistics_naming,
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


def crafted_register(
    world: World,
    victim: Victim,
    properties: dict[str, str],
    own: Table | None = None,
    logged: list[str] | None = None,
) -> tuple[str, Any]:
    """The attacker drops its own table (no purge), then registers, under a new name, a metadata
    file it wrote beside the table's own: the same table, but with `properties` and a metadata log
    naming the victim's metadata file (or `logged`). The name asked for, and the catalog's answer."""
    own = own or own_table(world)
    name = name_of(own)
    own.append(own_table_rows())  # two data files: something to compact
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    metadata = json.loads(own.metadata.model_dump_json(by_alias=True, exclude_none=True))
    metadata["properties"] = {**metadata.get("properties", {}), **properties}
    metadata["metadata-log"] = [
        *metadata.get("metadata-log", []),
        *({"metadata-file": path, "timestamp-ms": 1} for path in logged or [victim.metadata_location]),
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


# -- the server's background rounds ------------------------------------------------------------------
#
# As the server runs them (`BackgroundMaintenance.run_round`, fast), on the attacker's table alone:
# the deployment is the session's, and its other tables are other tests'.

#: One holder for every round here, so that each round takes the lease the last one left.
HOLDER = f"hostile-maintenance-{rand()}"
FAST = Background(interval_seconds=0.05, cpu_share=1.0)


class OneTable(Maintainer):
    """The server's maintainer, keeping one table only; the runs it made."""

    def __init__(self, catalog: WarehouseCatalog, table: TableName, clock: Callable[[], datetime]) -> None:
        super().__init__(catalog, clock)
        self.table = table
        self.runs: dict[str, Run] = {}

    def run(self, table: TableName, kinds: tuple[str, ...] = KINDS) -> dict[str, Run]:
        if table != self.table:
            return {}
        self.runs = super().run(table, kinds)
        return self.runs


class NoPurges(WarehouseCatalog):
    """The catalog as these rounds see it: the tables other tests dropped (without purge) are theirs,
    so a round days ahead purges none of them, as it maintains no other table (`OneTable`)."""

    def purge_expired(self, now: datetime) -> list[TableName]:
        return []


def background_round(world: World, name: str, days: float = 0) -> dict[str, Run]:
    """One background round `days` from now on the attacker's table `name`: each kind's run."""
    catalog = NoPurges(world.deployment.store.transactions, world.deployment.storage)

    def clock() -> datetime:
        return datetime.now(UTC) + timedelta(days=days)

    maintainer = OneTable(catalog, TableName.of(world.wh, (ATT,), name), clock)
    BackgroundMaintenance(maintainer, FAST, clock, holder=HOLDER).run_round()
    return maintainer.runs


@pytest.fixture(scope="module")
def elsewhere(world: World) -> Victim:
    """A victim in another warehouse, which the attacker's policy does not name at all."""
    warehouse = f"other-wh-{rand()}"
    made = world.admin.call("POST", "/warehouses", {"name": warehouse})
    assert made.status_code == 200, made.text
    return make_victim(world.deployment, world.admin, warehouse, f"victims_{rand()}")


Files = dict[tuple[str, str], bytes]


def everything_but(world: World, own: str, buckets: list[str]) -> Files:
    """Every object of `buckets` with its bytes, except those under the attacker's table `own`."""
    bucket, prefix = table_prefix(world.deployment, own)
    return {
        (name, key): read_or_not(world, name, key)
        for name in buckets
        for key in keys_under(world.deployment, name, "")
        if not (name == bucket and key.startswith(prefix))
    }


def read_or_not(world: World, bucket: str, key: str) -> bytes:
    try:
        return world.deployment.storage.read(bucket, key)
    except OSError:  # a link another test left (the store reads through none)
        return b"(not read)"


def assert_untouched(world: World, own: str, buckets: list[str], before: Files) -> None:
    """Nothing outside the attacker's table was written, deleted or overwritten since `before`."""
    now = everything_but(world, own, buckets)
    written = sorted(set(now) - set(before))
    deleted = sorted(set(before) - set(now))
    changed = sorted(key for key in before if key in now and now[key] != before[key])
    assert not (written or deleted or changed), (
        f"outside the attacker's table {own}: written {written}, deleted {deleted}, overwritten {changed}"
    )


def purged_leaving_others_intact(
    world: World, name: str, own: str, buckets: list[str], before: Files, *victims: Victim
) -> None:
    """The attacker purges its table `name` (at `own`): nothing else in `buckets` changed since
    `before`, and every victim reads as it was made."""
    purge(world, name)
    assert_untouched(world, own, buckets, before)
    for victim in victims:
        assert_intact(world.deployment, world.admin, victim)


def add_own_file(world: World, name: str) -> None:
    """The attacker's engine writes a small data file inside its table (by hand, at the table's
    `data/` folder whatever its properties say) and commits it: something to compact."""
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    schema = pa.schema([
        pa.field("id", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "1"}),
        pa.field("name", pa.string(), metadata={"PARQUET:field_id": "2"}),
    ])  # fmt: skip
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": [12], "name": ["z"]}, schema=schema), buffer)
    path = f"{own.location()}/data/own-{rand()}.parquet"
    write_bytes(own, path, buffer.getvalue())
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=1, file_size_in_bytes=len(buffer.getvalue()),
    )  # fmt: skip
    snapshot_id = new_snapshot_id()
    manifests = [*current_manifests(own), write_manifest(own, snapshot_id, [data_file], deletes=False)]
    answer = world.attack(snapshot_updates(own, snapshot_id, manifests, operation="append"), name)
    assert answer.status_code == 200, answer.text


def metadata_files(victim: Victim) -> list[str]:
    return sorted(key for key in victim.files if key.endswith(".metadata.json"))


def test_a_registered_log_naming_other_tables_metadata_files_loses_none_by_default(
    world: World, elsewhere: Victim
) -> None:
    """The catalog deletes metadata files that leave a table's log by default now: the attacker
    registers a metadata file whose log names every metadata file of a victim (plainly and spelt
    from its own `metadata/` folder with '..', '%2E%2E', '%2F', '#', '?') and another warehouse's,
    sets no `write.metadata.delete-after-commit.enabled`, keeps one previous version, commits until
    all of them left its log, lets a background round keep the table, and purges it."""
    d = world.deployment
    victim = make_victim(d, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    buckets = [world.wh, elsewhere.bucket]
    before = everything_but(world, own.location(), buckets)
    logged = [uri(d, elsewhere.bucket, key) for key in metadata_files(elsewhere)]
    for key in metadata_files(victim):
        up = "/".join([".."] * 3)  # metadata/ -> the table -> its namespace -> the warehouse
        logged += [
            uri(d, victim.bucket, key),
            f"{own.location()}/metadata/{up}/{key}",
            f"{own.location()}/metadata/{up.replace('..', '%2E%2E')}/{key}",
            f"{own.location()}/metadata/{'..%2F' * 3}{key.replace('/', '%2F')}",
            f"{own.location()}/metadata/x.metadata.json#/{up}/{key}",
            f"{own.location()}/metadata/x.metadata.json?/{up}/{key}",
        ]
    name, answer = crafted_register(
        world, victim, {"write.metadata.previous-versions-max": "1"}, own=own, logged=logged
    )
    assert answer.status_code == 200, answer.text
    assert DELETE_AFTER_COMMIT not in answer.json()["metadata"]["properties"]
    bucket, prefix = table_prefix(d, own.location())
    crafted = [k for k in keys_under(d, bucket, prefix + "metadata/") if "/99999-" in k]
    for n in range(3):
        answer = world.attack([{"action": "set-properties", "updates": {"n": str(n)}}], name)
        assert answer.status_code == 200, answer.text
    # The default is on: the attacker's own superseded metadata file went.
    assert crafted and not set(crafted) & keys_under(d, bucket, prefix + "metadata/")
    runs = background_round(world, name)
    assert runs, "the round kept no table"
    purged_leaving_others_intact(world, name, own.location(), buckets, before, victim, elsewhere)


WRITE_SETTINGS = ["write.data.path", "write.object-storage.path", "write.metadata.path",
                  "write.folder-storage.path"]  # fmt: skip


def escapes(world: World, own: str, victim: Victim, elsewhere: Victim) -> dict[str, str]:
    """Folders outside the attacker's table `own`, spelt plainly and from inside it."""
    key = split(world.deployment, victim.location)[1]
    up = "../.."  # the table -> its namespace -> the warehouse
    return {
        "victim": f"{victim.location}/data",
        "victim-root": victim.location,
        "victim-namespace": uri(world.deployment, victim.bucket, victim.namespace),
        "warehouse-root": uri(world.deployment, victim.bucket),
        "elsewhere": f"{elsewhere.location}/data",
        "elsewhere-root": uri(world.deployment, elsewhere.bucket),
        "sibling": f"{own}-x/data",
        "dots": f"{own}/{up}/{key}/data",
        "encoded-dots": f"{own}/{up.replace('..', '%2E%2E')}/{key}/data",
        "encoded-slash": f"{own}%2F..%2F..%2F{key.replace('/', '%2F')}%2Fdata",
        "fragment": f"{own}/data#/../{up}/{key}/data",
        "query": f"{own}/data?/../{up}/{key}/data",
    }


@pytest.mark.parametrize("setting", WRITE_SETTINGS)
def test_write_paths_out_of_the_table_are_refused_and_maintenance_writes_nothing_outside(
    world: World, elsewhere: Victim, setting: str
) -> None:
    """On its existing table the attacker sets a `write.*.path` (object storage on) to a victim's
    folder, another warehouse, or a path spelt to leave its folder; each is refused, and one the
    catalog took would meet a background round (compaction writes through the location provider
    the table's properties choose) before the purge."""
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    name = name_of(own)
    add_own_file(world, name)
    buckets = [world.wh, elsewhere.bucket]
    before = everything_but(world, own.location(), buckets)
    answers = {}
    for what, path in escapes(world, own.location(), victim, elsewhere).items():
        updates = {setting: path, "write.object-storage.enabled": "true"}
        answers[what] = world.attack([{"action": "set-properties", "updates": updates}], name)
        if answers[what].status_code == 200:  # taken: the round must still write inside only
            add_own_file(world, name)
            background_round(world, name)
            assert_untouched(world, own.location(), buckets, before)
    background_round(world, name)
    purged_leaving_others_intact(world, name, own.location(), buckets, before, victim, elsewhere)
    for what, answer in answers.items():
        assert_refused(answer, 400, BAD_REQUEST, what=what)


def test_set_location_out_of_the_table_is_refused_and_maintenance_and_purge_take_nothing(
    world: World, elsewhere: Victim
) -> None:
    """`set-location` of the attacker's existing table to a victim's folder, its namespace's, the
    warehouse's root, another warehouse, a folder inside its own, or with a `write.data.path` to
    match: refused; then a background round and a purge."""
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    name = name_of(own)
    add_own_file(world, name)
    buckets = [world.wh, elsewhere.bucket]
    before = everything_but(world, own.location(), buckets)
    targets = {
        "victim": victim.location,
        "victim-namespace": uri(world.deployment, victim.bucket, victim.namespace),
        "warehouse-root": uri(world.deployment, victim.bucket),
        "elsewhere": elsewhere.location,
        "elsewhere-new": f"{uri(world.deployment, elsewhere.bucket, ATT)}/{name}",
        "own-namespace": uri(world.deployment, world.wh, ATT),
        "inside-own": f"{own.location()}/data",
    }
    answers = {
        what: world.attack([{"action": "set-location", "location": location}], name)
        for what, location in targets.items()
    }
    answers["with-write-path"] = world.attack([
        {"action": "set-location", "location": victim.location},
        {"action": "set-properties", "updates": {"write.data.path": f"{victim.location}/data"}},
    ], name)  # fmt: skip
    runs = background_round(world, name)
    assert runs["icebergCompaction"].status == "Successful", runs
    kept = world.admin.catalog(world.wh).load_table(f"{ATT}.{name}")
    assert kept.location() == own.location()
    purged_leaving_others_intact(world, name, own.location(), buckets, before, victim, elsewhere)
    for what, answer in answers.items():
        assert_refused(answer, 400, BAD_REQUEST, what=what)


def test_files_named_outside_the_table_are_neither_read_nor_deleted_by_background_rounds(
    world: World, elsewhere: Victim
) -> None:
    """The attacker's engine commits, inside its own table, a manifest naming a victim's data file
    (plainly and spelt with '..' from its own folder), another warehouse's, and a snapshot whose
    manifest list (its own) names the victim's manifests; asks for statistics files that are the
    victim's; then background rounds run up to 40 days on (compaction would read the files,
    unreferenced-file removal marks and deletes what it thinks unreferenced), and it purges."""
    d = world.deployment
    victim = make_victim(d, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    name = name_of(own)
    buckets = [world.wh, elsewhere.bucket]
    before = everything_but(world, own.location(), buckets)
    stolen = next(iter(world.admin.catalog(world.wh).load_table(victim.identifier).scan().plan_files())).file
    far = next(iter(world.admin.catalog(elsewhere.warehouse).load_table(elsewhere.identifier)
                    .scan().plan_files())).file  # fmt: skip
    key = split(d, stolen.file_path)[1]
    spelt = [stolen.file_path, far.file_path, f"{own.location()}/../../{key}",
             f"{own.location()}/%2E%2E/%2E%2E/{key}"]  # fmt: skip
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    snapshot_id = new_snapshot_id()
    named = [DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=stolen.record_count, file_size_in_bytes=stolen.file_size_in_bytes,
    ) for path in spelt]  # fmt: skip
    manifests = [*current_manifests(own), write_manifest(own, snapshot_id, named, deletes=False)]
    answer = world.attack(snapshot_updates(own, snapshot_id, manifests, operation="append"), name)
    assert answer.status_code == 200, answer.text  # what a manifest names is the engine's to write
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    victim_table = world.admin.catalog(world.wh).load_table(victim.identifier)
    snapshot = victim_table.current_snapshot()
    assert snapshot is not None
    victims_manifests = list(snapshot.manifests(victim_table.io))
    snapshot_id = new_snapshot_id()
    answer = world.attack(snapshot_updates(own, snapshot_id, victims_manifests, operation="append"), name)
    assert answer.status_code == 200, answer.text
    statistics = {
        "data file": world.attack(statistics_naming(own, stolen.file_path), name),
        "metadata file": world.attack(statistics_naming(own, victim.metadata_location), name),
        "spelt": world.attack(statistics_naming(own, spelt[2]), name),
    }
    statuses = {}
    for days in (0, 4, 20, 40):
        statuses[days] = {kind: run.status for kind, run in background_round(world, name, days).items()}
        assert_untouched(world, own.location(), buckets, before)
    purged_leaving_others_intact(world, name, own.location(), buckets, before, victim, elsewhere)
    for what, refused in statistics.items():
        assert_refused(refused, 400, BAD_REQUEST, what=what)
    # Neither compaction nor the removal could read the table's files through its confined FileIO.
    assert statuses[0].get("icebergCompaction") == "Failed", statuses


class Planted:
    """What an attacker names as its table's pyiceberg location provider: any class or callable the
    server can import, called with the table's location and properties. This one records it."""

    calls: ClassVar[list[str]] = []

    def __init__(self, location: str, properties: dict[str, str]) -> None:
        Planted.calls.append(location)
        raise RuntimeError("planted")


def test_a_location_provider_named_by_the_table_is_never_imported_or_called_by_the_server(
    world: World, elsewhere: Victim
) -> None:
    """pyiceberg imports and calls `write.py-location-provider.impl` wherever it writes a table's
    files (compaction's data files, its manifests and manifest lists): the attacker names any class
    or function on the server's path, with its table's location and properties as arguments."""
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    name = name_of(own)
    add_own_file(world, name)
    buckets = [world.wh, elsewhere.bucket]
    before = everything_but(world, own.location(), buckets)
    Planted.calls.clear()
    impl = f"{__name__}.{Planted.__name__}"
    updates = {"write.py-location-provider.impl": impl}
    answer = world.attack([{"action": "set-properties", "updates": updates}], name)
    runs = background_round(world, name) if answer.status_code == 200 else {}
    called = list(Planted.calls)
    purged_leaving_others_intact(world, name, own.location(), buckets, before, victim)
    assert not called, f"the server imported and called {impl} for {called} (runs {runs})"
    if runs:  # taken, and ignored: the server names the files it writes itself
        assert runs["icebergCompaction"].status == "Successful", runs
