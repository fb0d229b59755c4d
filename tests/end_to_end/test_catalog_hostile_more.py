"""More attacks on the writable catalog (`/_iceberg`) and on what it shares, found by a second look.

The attacker is the one of `test_catalog_hostile.py`: a catalog user holding
`s3tables:*` on the tables of one namespace (`att`) of one warehouse and the
namespace-level reads and `CreateNamespace` on that warehouse, who writes files
inside its own tables' locations as engines do (on local storage: into its own
table's folder, symbolic links included). The provider may share the
attacker's table; the attacker is then also one of its recipients.

Each test makes one attack and asserts what the attack must not reach (a
victim's files, rows, what its recipients are served, what was signed); each
fails while the attack works.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from share_store.model import parse_create_args
from share_store.storage.local import LocalStorage
from share_store.warehouses.users import CatalogUsers
from tests.catalog_attacks import (
    ROWS,
    ROWS_SCHEMA,
    V2,
    Caller,
    assert_intact,
    commit,
    create_body,
    keys_under,
    make_victim,
    rand,
    rows_table,
    split,
    table_path,
    uri,
)
from tests.conftest import Deployment

ATT = "att"
ARN = "arn:aws:s3tables:::bucket/"
WAREHOUSE_READS = [
    "s3tables:GetTableBucket",
    "s3tables:ListNamespaces",
    "s3tables:GetNamespace",
    "s3tables:ListTables",
]
DELTA_FEATURES = "deletionVectors,columnMapping,timestampNtz"
DELTA_FORMAT = {"delta-sharing-capabilities": f"responseformat=delta;readerfeatures={DELTA_FEATURES}"}
#: Field ids of a position delete file's columns (the Iceberg spec's reserved ids).
FILE_PATH_ID, POS_ID = 2147483546, 2147483545


def policy(*statements: tuple[list[str] | str, list[str] | str]) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": actions, "Resource": resources}
                for actions, resources in statements
            ],
        }
    )


def attacker_policy(warehouse: str) -> str:
    """Everything on the tables of one namespace; namespace operations on its warehouse."""
    return policy(
        ("s3tables:*", f"{ARN}{warehouse}/table/{ATT}/*"),
        ([*WAREHOUSE_READS, "s3tables:CreateNamespace"], f"{ARN}{warehouse}"),
    )


# -- the world ------------------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    deployment: Deployment
    admin: Caller
    attacker: Caller
    wh: str  # the attacker's warehouse, where the victims live too

    @property
    def s3(self) -> bool:
        return not isinstance(self.deployment.storage, LocalStorage)

    @property
    def root(self) -> Path:
        assert isinstance(self.deployment.storage, LocalStorage)
        return Path(self.deployment.storage.root)

    def own_path(self, table: str) -> str:
        return table_path(self.wh, ATT, table)

    def attack(self, updates: list[dict[str, Any]], table: str) -> httpx.Response:
        return commit(self.attacker, self.wh, ATT, table, updates)


@pytest.fixture(scope="module", params=["local", "s3"])
def world(request: pytest.FixtureRequest) -> World:
    return make_world(request.getfixturevalue(request.param))


@pytest.fixture(scope="module")
def local_world(local: Deployment) -> World:
    """For the attacks with symbolic links, which only local storage has."""
    return make_world(local)


def make_world(deployment: Deployment) -> World:
    users = CatalogUsers(deployment.store.engine, deployment.secret)
    tag = rand()
    wh = f"more-wh-{tag}"
    admin = Caller(deployment, users.create(f"more-admin-{tag}"))
    made = admin.call("POST", "/warehouses", {"name": wh})
    assert made.status_code == 200, made.text
    attacker = Caller(deployment, users.create(f"more-attacker-{tag}", attacker_policy(wh)))
    made = attacker.call("POST", f"/{wh}/namespaces", {"namespace": [ATT]})
    assert made.status_code == 200, made.text
    return World(deployment=deployment, admin=admin, attacker=attacker, wh=wh)


def own_table(world: World) -> Table:
    """A new table of the attacker's, made and appended to honestly with pyiceberg."""
    catalog = world.attacker.catalog(world.wh)
    identifier = f"{ATT}.t_{rand()}"
    catalog.create_table(identifier, schema=ROWS, properties=V2).append(rows_table([(10, "x")]))
    return catalog.load_table(identifier)


def name_of(table: Table) -> str:
    return str(table.name()[-1])


# -- sharing -------------------------------------------------------------------------------


def share(world: World, warehouse: str, namespace: str, table: str) -> tuple[str, str, str]:
    """The provider shares one own-warehouse table (with history); its share, schema and table names."""
    name, schema = f"s_{rand()}", "more"
    spec = f"{table}:uniform:{warehouse}:{namespace}:{table}"
    world.deployment.store.create_share(name, parse_create_args([schema, spec]), history_shared=True)
    return name, schema, table


def query(
    world: World, shared: tuple[str, str, str], headers: dict[str, str] | None = None
) -> httpx.Response:
    d = world.deployment
    name, schema, table = shared
    return httpx.post(
        f"{d.endpoint}/shares/{name}/schemas/{schema}/tables/{table}/query",
        json={},
        headers={"Authorization": f"Bearer {d.token(name)}", **(headers or {})},
        timeout=60,
    )


def adds_of(answer: httpx.Response) -> list[dict[str, Any]]:
    """The files a Delta Sharing query answered (either response format)."""
    assert answer.status_code == 200, answer.text[:500]
    found = []
    for line in answer.text.splitlines():
        action = json.loads(line)
        if "file" in action:
            file = action["file"]
            found.append(file.get("deltaSingleAction", {}).get("add") or file)
    return found


# -- writing Iceberg files by hand, as an engine does -------------------------------------------


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, for a delete manifest (pyiceberg 0.12 writes no deletes)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def write_bytes(table: Table, path: str, data: bytes) -> None:
    with table.io.new_output(path).create(overwrite=True) as stream:
        stream.write(data)


def position_delete_file(table: Table, rows: list[tuple[str, int]]) -> DataFile:
    """A position delete file inside `table`'s location, deleting `rows` (data file path, position)."""
    schema = pa.schema(
        [
            pa.field(
                "file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_ID)}
            ),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_ID)}),
        ]
    )
    content = pa.table({"file_path": [r[0] for r in rows], "pos": [r[1] for r in rows]}, schema=schema)
    buffer = io.BytesIO()
    pq.write_table(content, buffer)
    path = f"{table.location()}/data/deletes-{uuid.uuid4().hex}.parquet"
    write_bytes(table, path, buffer.getvalue())
    return DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=len(rows),
        file_size_in_bytes=len(buffer.getvalue()),
    )


def write_manifest(table: Table, snapshot_id: int, files: list[DataFile], deletes: bool) -> ManifestFile:
    path = f"{table.location()}/metadata/{uuid.uuid4()}-m0.avro"
    writer_type = DeleteManifestWriter if deletes else ManifestWriterV2
    spec, schema = table.spec(), table.schema()
    with writer_type(spec, schema, table.io.new_output(path), snapshot_id, "deflate") as writer:
        for data_file in files:
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id,
                                               data_file=data_file))  # fmt: skip
    return writer.to_manifest_file()


def snapshot_updates(
    table: Table, snapshot_id: int, manifests: list[ManifestFile], operation: str = "overwrite"
) -> list[dict[str, Any]]:
    """The updates of a commit adding a snapshot of `manifests` (a manifest list written here) as main."""
    current = table.current_snapshot()
    parent = current.snapshot_id if current is not None else None
    sequence_number = table.metadata.last_sequence_number + 1
    path = f"{table.location()}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(
        2, table.io.new_output(path), snapshot_id, parent, sequence_number, "deflate"
    ) as out:
        out.add_manifests(manifests)
    snapshot = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": path,
        "summary": {"operation": operation},
        "schema-id": table.schema().schema_id,
    }
    if parent is not None:
        snapshot["parent-snapshot-id"] = parent
    return [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]


def new_snapshot_id() -> int:
    return uuid.uuid4().int >> 65


def current_manifests(table: Table) -> list[ManifestFile]:
    current = table.current_snapshot()
    assert current is not None
    return list(current.manifests(table.io))


# -- 1. the cache of derived files is keyed by what the caller's metadata says ----------------------


@dataclass(frozen=True)
class Deleted:
    """A v2 table of three rows in one data file, whose first row a position delete deleted."""

    namespace: str
    name: str
    table: Table
    data_file: DataFile

    @property
    def snapshot_id(self) -> int:
        current = self.table.current_snapshot()
        assert current is not None
        return current.snapshot_id


def make_deleted(world: World) -> Deleted:
    """Made by the provider's engine (the admin user): a table with a row-level delete, as Spark writes it."""
    namespace = f"victims_{rand()}"
    catalog = world.admin.catalog(world.wh)
    catalog.create_namespace(namespace)
    table = catalog.create_table(f"{namespace}.kept", schema=ROWS, properties=V2)
    table.append(rows_table([(1, "secret-deleted"), (2, "b"), (3, "c")]))
    table = catalog.load_table(f"{namespace}.kept")
    data_file = next(iter(table.scan().plan_files())).file
    snapshot_id = new_snapshot_id()
    deletes = write_manifest(
        table, snapshot_id, [position_delete_file(table, [(data_file.file_path, 0)])], True
    )
    updates = snapshot_updates(table, snapshot_id, [*current_manifests(table), deletes], "delete")
    done = commit(world.admin, world.wh, namespace, "kept", updates)
    assert done.status_code == 200, done.text
    return Deleted(namespace, "kept", catalog.load_table(f"{namespace}.kept"), data_file)


def test_a_table_taking_another_tables_uuid_cannot_change_what_its_recipients_get(world: World) -> None:
    """The deletion vector index of the cache (`.delta-sharing-cache/index2/<table-uuid>/<snapshot-id>.json`)
    is keyed by the table uuid and snapshot id of the metadata being served, both of which a
    committer chooses (`assign-uuid`, `add-snapshot`). The attacker's table takes the victim's uuid
    and current snapshot id and names the victim's data file with a delete file that deletes none
    of its rows; once the attacker's shared table is queried, the index says the victim's data file
    has no deletes, and the victim's recipients get the row the victim deleted back."""
    victim = make_deleted(world)  # not queried yet: its index is not written
    own = own_table(world)
    name = name_of(own)
    taken = world.attack([{"action": "assign-uuid", "uuid": str(victim.table.metadata.table_uuid)}], name)
    own = world.attacker.catalog(world.wh).load_table(f"{ATT}.{name}")
    snapshot_id = victim.snapshot_id
    data = write_manifest(own, snapshot_id, [victim.data_file], False)
    nothing = position_delete_file(own, [(f"{own.location()}/data/none.parquet", 0)])
    deletes = write_manifest(own, snapshot_id, [nothing], True)
    added = world.attack(snapshot_updates(own, snapshot_id, [data, deletes]), name)
    query(world, share(world, world.wh, ATT, name), DELTA_FORMAT)  # the attacker reads its own share

    served = adds_of(query(world, share(world, world.wh, victim.namespace, victim.name), DELTA_FORMAT))
    assert len(served) == 1, served
    vector = served[0].get("deletionVector")
    assert vector is not None and vector["cardinality"] == 1, (
        f"the victim's recipients are served its data file without the row it deleted "
        f"(assign-uuid: {taken.status_code}, add-snapshot: {added.status_code}): {served[0]}"
    )


# -- 2. local storage: a symbolic link made after the check ----------------------------------------


def local_path(world: World, location: str) -> Path:
    bucket, key = split(world.deployment, location)
    return world.root / bucket / key


def test_a_signed_url_does_not_follow_a_link_planted_after_signing(local_world: World) -> None:
    """`TableLocation.confine` resolves the file's real path when the URL is signed; the file server
    (`serve_file` → `LocalStorage.resolve`) resolves it again when the URL is fetched and refuses only
    links out of the bucket. The attacker's table names `<own location>/stash/<name of a victim's data
    file>`, a file of its own when its share is queried; then it makes `stash` a link to the victim's
    data folder (same warehouse) and fetches the URL it was handed: the victim's bytes."""
    world = local_world
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    stolen = victim.data_files[0]  # known by name (GetTable shows it), never readable by the attacker
    own = own_table(world)
    template = next(iter(own.scan().plan_files())).file
    stash = f"{own.location()}/stash"
    decoy = f"{stash}/{stolen.rsplit('/', 1)[1]}"
    write_bytes(own, decoy, world.deployment.storage.read(*split(world.deployment, template.file_path)))
    data_file = DataFile.from_args(
        content=DataFileContent.DATA, file_path=decoy, file_format=FileFormat.PARQUET, partition=Record(),
        record_count=template.record_count, file_size_in_bytes=template.file_size_in_bytes,
    )  # fmt: skip
    snapshot_id = new_snapshot_id()
    manifest = write_manifest(own, snapshot_id, [data_file], False)
    assert (
        world.attack(snapshot_updates(own, snapshot_id, [manifest], "overwrite"), name_of(own)).status_code
        == 200
    )
    urls = [a["url"] for a in adds_of(query(world, share(world, world.wh, ATT, name_of(own))))]
    assert len(urls) == 1

    folder = local_path(world, stash)
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()
    folder.symlink_to(local_path(world, stolen).parent, target_is_directory=True)
    fetched = httpx.get(urls[0], timeout=60)

    victim_bytes = victim.files[split(world.deployment, stolen)[1]]
    assert fetched.content != victim_bytes, (
        "the URL signed for the attacker's file served the victim's data file"
    )


# -- 3. two creates at overlapping locations, at once ---------------------------------------------


def statistics_naming(table: Table, path: str) -> list[dict[str, Any]]:
    current = table.current_snapshot()
    assert current is not None
    statistics = {
        "snapshot-id": current.snapshot_id,
        "statistics-path": path,
        "file-size-in-bytes": 100,
        "file-footer-size-in-bytes": 10,
        "blob-metadata": [],
    }
    return [{"action": "set-statistics", "snapshot-id": current.snapshot_id, "statistics": statistics}]


def staged_create(location: str) -> list[dict[str, Any]]:
    """The updates of a staged create's commit, as pyiceberg's create transaction sends them."""
    return [
        {"action": "assign-uuid", "uuid": str(uuid.uuid4())},
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": ROWS_SCHEMA, "last-column-id": 2},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": location},
        {"action": "set-properties", "updates": V2},
    ]


def test_two_creates_at_once_cannot_both_take_overlapping_locations(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`WarehouseCatalog._point` reads every other table's location, then inserts the new row, in
    `engine.begin()`; SQLite's Python driver opens the transaction only at the INSERT, so two
    creates that both read before either inserts both pass `check_no_overlap`. The barrier below
    only makes the two reads meet; a check and insert that were one (a lock, or a transaction
    begun before the read) would time it out and refuse the second create. The attacker's table
    then holds the victim's folder: it names the victim's data file as its statistics file and
    purges itself."""
    from concurrent.futures import ThreadPoolExecutor

    from share_store.persistence import warehouses as rows

    namespace = f"victims_{rand()}"
    made = world.admin.call("POST", f"/{world.wh}/namespaces", {"namespace": [namespace]})
    assert made.status_code == 200, made.text
    barrier = threading.Barrier(2, timeout=3)
    reads = rows.tables_in

    def meeting(conn: Any, warehouse: str) -> Any:
        found = reads(conn, warehouse)
        if warehouse == world.wh:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return found

    monkeypatch.setattr(rows, "tables_in", meeting)
    victim_body = create_body("orders", uri(world.deployment, world.wh, f"{namespace}/orders"))
    grab = f"grab_{rand()}"
    attacker_body = create_body(grab, uri(world.deployment, world.wh, namespace))
    with ThreadPoolExecutor(2) as pool:
        made_victim = pool.submit(
            world.admin.call, "POST", f"/{world.wh}/namespaces/{namespace}/tables", victim_body
        )
        made_attacker = pool.submit(
            world.attacker.call, "POST", f"/{world.wh}/namespaces/{ATT}/tables", attacker_body
        )
        answers = made_victim.result(), made_attacker.result()
    monkeypatch.setattr(rows, "tables_in", reads)
    both = [answer.status_code for answer in answers] == [200, 200]

    lost: list[str] = []
    if both:  # the attacker's table holds the victim's: the victim writes, the attacker purges
        table = world.admin.catalog(world.wh).load_table(f"{namespace}.orders")
        table.append(rows_table([(1, "a"), (2, "b")]))
        bucket, prefix = split(world.deployment, table.location() + "/x")[0], f"{namespace}/orders/"
        before = keys_under(world.deployment, bucket, prefix)
        grabbed = world.attacker.catalog(world.wh).load_table(f"{ATT}.{grab}")
        grabbed.append(rows_table([(9, "z")]))
        grabbed = world.attacker.catalog(world.wh).load_table(f"{ATT}.{grab}")
        victim_data = next(iter(table.scan().plan_files())).file.file_path
        world.attack(statistics_naming(grabbed, victim_data), grab)
        world.attacker.call("DELETE", world.own_path(grab) + "?purgeRequested=true")
        lost = sorted(before - keys_under(world.deployment, bucket, prefix))

    assert not lost, f"the attacker's purge deleted the victim's {lost}"
    assert not both, "both creates took overlapping locations (the victim's inside the attacker's)"


# -- 4. a location in another namespace's folder ---------------------------------------------------


def test_a_table_cannot_take_the_folder_of_a_namespace_it_may_not_touch(world: World) -> None:
    """`requested_location` takes any folder of the warehouse that overlaps no live table, whatever the
    namespace: a user allowed only `att` makes a table whose location is another namespace's whole
    folder (`<warehouse>/<namespace>`), before that namespace has a table there. Every table then
    created in that namespace gets a location inside the attacker's, and `_point` refuses it:
    the namespace can no longer have tables. (Polaris keeps a table under its namespace's location
    unless `ALLOW_UNSTRUCTURED_TABLE_LOCATION` is on.)"""
    namespace = f"victims_{rand()}"
    made = world.admin.call("POST", f"/{world.wh}/namespaces", {"namespace": [namespace]})
    assert made.status_code == 200, made.text
    grab = f"grab_{rand()}"
    taken = world.attacker.call(
        "POST",
        f"/{world.wh}/namespaces/{ATT}/tables",
        create_body(grab, uri(world.deployment, world.wh, namespace)),
    )

    created = world.admin.call("POST", f"/{world.wh}/namespaces/{namespace}/tables", create_body("orders"))
    assert created.status_code == 200, (
        f"the namespace's owner cannot create a table in it after the attacker's {grab} took its folder "
        f"(attacker's create: {taken.status_code}): {created.text[:300]}"
    )


def test_a_staged_create_does_not_write_into_a_table_that_took_its_namespaces_folder(world: World) -> None:
    """As above, and the victim's engine creates its table as Spark's CTAS does: a staged create, whose
    assigned location `_new_location` hands out without looking at other tables, then the data
    files, then the commit (refused by `_point`, too late). The files are inside the attacker's
    location: its shared table names one (the attacker lists its own folder) and it is signed."""
    namespace = f"victims_{rand()}"
    made = world.admin.call("POST", f"/{world.wh}/namespaces", {"namespace": [namespace]})
    assert made.status_code == 200, made.text
    grab = f"grab_{rand()}"
    taken = world.attacker.call(
        "POST",
        f"/{world.wh}/namespaces/{ATT}/tables",
        create_body(grab, uri(world.deployment, world.wh, namespace)),
    )
    staged = world.admin.call(
        "POST", f"/{world.wh}/namespaces/{namespace}/tables", {**create_body("ctas"), "stage-create": True}
    )
    leaked: list[str] = []
    if taken.status_code == 200 and staged.status_code == 200:
        # The victim's engine writes its data files at the staged location, then commits.
        location = staged.json()["metadata"]["location"]
        template = next(iter(own_table(world).scan().plan_files())).file.file_path
        parquet = world.deployment.storage.read(*split(world.deployment, template))
        victim_file = f"{location}/data/00000-0-{uuid.uuid4()}.parquet"
        world.deployment.storage.write(*split(world.deployment, victim_file), parquet)
        commit(world.admin, world.wh, namespace, "ctas", staged_create(location), [{"type": "assert-create"}])

        grabbed = world.attacker.catalog(world.wh).load_table(f"{ATT}.{grab}")
        data_file = DataFile.from_args(
            content=DataFileContent.DATA, file_path=victim_file, file_format=FileFormat.PARQUET,
            partition=Record(), record_count=1, file_size_in_bytes=len(parquet),
        )  # fmt: skip
        snapshot_id = new_snapshot_id()
        manifest = write_manifest(grabbed, snapshot_id, [data_file], False)
        world.attack(snapshot_updates(grabbed, snapshot_id, [manifest], "append"), grab)
        answer = query(world, share(world, world.wh, ATT, grab))
        leaked = [line for line in answer.text.splitlines() if victim_file.rsplit("/", 1)[1] in line]

    assert not leaked, (
        f"the victim's staged data file, written inside the attacker's table {grab}, was signed for the "
        f"attacker: {leaked[0][:300]}"
    )


def test_a_purge_does_not_follow_a_link_planted_while_it_reads_manifests(
    local_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`purge` confines every path it will delete (real path included) while it walks the table's
    metadata, reading each snapshot's manifests in between, and only then deletes:
    `LocalStorage.delete` resolves each key again, links and all, and unlinks what it leads to.
    The attacker's table names `<own location>/stash/<name of a victim's data file>` as a
    statistics file (a file of its own when checked); while the purge reads manifests (a window
    as long as the table has manifests to read; the hook below stands for the attacker's timing)
    `stash` becomes a link to the victim's data folder."""
    from share_store.warehouses import purge as purging

    world = local_world
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    stolen = victim.data_files[0]
    own = own_table(world)
    stash = f"{own.location()}/stash"
    write_bytes(own, f"{stash}/{stolen.rsplit('/', 1)[1]}", b"mine")
    assert (
        world.attack(statistics_naming(own, f"{stash}/{stolen.rsplit('/', 1)[1]}"), name_of(own)).status_code
        == 200
    )
    folder, target = local_path(world, stash), local_path(world, stolen).parent

    class Timed(purging.ConfinedFileIO):  # type: ignore[misc,name-defined]
        def new_input(self, location: str) -> Any:
            if not folder.is_symlink():  # the attacker's move, once the statistics file was checked
                for entry in folder.iterdir():
                    entry.unlink()
                folder.rmdir()
                folder.symlink_to(target, target_is_directory=True)
            return super().new_input(location)

    monkeypatch.setattr(purging, "ConfinedFileIO", Timed)
    world.attacker.call("DELETE", world.own_path(name_of(own)) + "?purgeRequested=true")
    monkeypatch.undo()

    assert_intact(world.deployment, world.admin, victim)


# -- 5. tables made before locations were recorded -------------------------------------------------


def test_a_table_made_before_locations_were_recorded_keeps_the_files_it_left_behind(world: World) -> None:
    """Before revision 0008 a commit could move a table inside its warehouse (`set-location`, Spark's
    ALTER TABLE SET LOCATION), and its new metadata files went to the new place while its older
    snapshots kept naming data files at the old one. Such a table's row has no location; the
    catalog counts it with its metadata's `location` alone (`_others` → `_unchecked_location`), so
    the folder its data files are in is anyone's: the attacker makes a table there, names one
    of those files as its statistics file, and purges it."""
    from sqlalchemy import update

    from share_store.persistence.schema import warehouse_tables_table as t
    from share_store.warehouses.commits import metadata_json

    namespace = f"victims_{rand()}"
    catalog = world.admin.catalog(world.wh)
    catalog.create_namespace(namespace)
    table = catalog.create_table(
        f"{namespace}.moved",
        schema=ROWS,
        properties=V2,
        location=uri(world.deployment, world.wh, f"{namespace}/old"),
    )
    table.append(rows_table([(1, "a"), (2, "b")]))
    table = catalog.load_table(f"{namespace}.moved")
    victim_data = next(iter(table.scan().plan_files())).file.file_path
    # What the server before 0008 left after `set-location` to `<namespace>/new`: a metadata file
    # there, the old snapshots still naming the old data files, and (after the migration) no location.
    new_location = uri(world.deployment, world.wh, f"{namespace}/new")
    moved = table.metadata.model_copy(update={"location": new_location})
    moved_file = f"{new_location}/metadata/00002-{uuid.uuid4()}.metadata.json"
    world.deployment.storage.write(*split(world.deployment, moved_file), metadata_json(moved))
    with world.deployment.store.engine.begin() as conn:
        conn.execute(
            update(t)
            .where(t.c.warehouse == world.wh, t.c.namespace == namespace, t.c.name == "moved")
            .values(metadata_location=moved_file, location=None)
        )
    bucket, key = split(world.deployment, victim_data)
    before = world.deployment.storage.read(bucket, key)

    grab = f"grab_{rand()}"
    taken = world.attacker.call(
        "POST", f"/{world.wh}/namespaces/{ATT}/tables",
        create_body(grab, uri(world.deployment, world.wh, f"{namespace}/old")),
    )  # fmt: skip
    if taken.status_code == 200:
        grabbed = world.attacker.catalog(world.wh).load_table(f"{ATT}.{grab}")
        grabbed.append(rows_table([(9, "z")]))
        grabbed = world.attacker.catalog(world.wh).load_table(f"{ATT}.{grab}")
        world.attack(statistics_naming(grabbed, victim_data), grab)
        world.attacker.call("DELETE", world.own_path(grab) + "?purgeRequested=true")

    assert keys_under(world.deployment, bucket, key) == {key}, (
        f"the legacy table's data file was purged by the attacker's table made over its old folder "
        f"(create: {taken.status_code})"
    )
    assert world.deployment.storage.read(bucket, key) == before


# -- 6. what refusals say ---------------------------------------------------------------------------


def test_an_overlap_refusal_does_not_name_tables_the_caller_may_not_list(world: World) -> None:
    """A user allowed its namespace's tables and nothing on the warehouse (no `ListNamespaces`,
    `ListTables`) probes folders with creates: `check_no_overlap`'s refusal names the table whose
    location overlaps, namespace and all."""
    users = CatalogUsers(world.deployment.store.engine, world.deployment.secret)
    narrow = Caller(
        world.deployment,
        users.create(f"narrow-{rand()}", policy(("s3tables:*", f"{ARN}{world.wh}/table/{ATT}/*"))),
    )
    victim = make_victim(world.deployment, world.admin, world.wh, f"hidden_{rand()}")
    listed = narrow.call("GET", f"/{world.wh}/namespaces/{victim.namespace}/tables")
    assert listed.status_code == 403, listed.text  # it may not list them

    probe = narrow.call(
        "POST", f"/{world.wh}/namespaces/{ATT}/tables",
        create_body(f"probe_{rand()}", uri(world.deployment, world.wh, victim.namespace)),
    )  # fmt: skip
    assert probe.status_code == 400, probe.text
    assert victim.identifier not in probe.text, f"the refusal names {victim.identifier}: {probe.text}"


def hinted(world: World, shared: tuple[str, str, str], column: str, op: str, value: int) -> httpx.Response:
    d = world.deployment
    name, schema, table = shared
    hint = {
        "op": op,
        "children": [
            {"op": "column", "name": column, "valueType": "long"},
            {"op": "literal", "value": str(value), "valueType": "long"},
        ],
    }
    return httpx.post(
        f"{d.endpoint}/shares/{name}/schemas/{schema}/tables/{table}/query",
        json={"jsonPredicateHints": json.dumps(hint)},
        headers={"Authorization": f"Bearer {d.token(name)}"},
        timeout=60,
    )


def test_a_manifest_path_through_a_link_and_dot_dot_reads_no_other_table(local_world: World) -> None:
    """`ConfinedFileIO.new_input` checks the path `file_location` normalises lexically
    (`<own>/lnk/../metadata/m.avro` → `<own>/metadata/m.avro`), then pyarrow opens the path as
    written, and the kernel resolves `lnk` before `..`: with `lnk` a link to the victim's
    metadata folder (planted in the attacker's own folder) the server reads the victim's
    manifest as the attacker's. Planning with a predicate hint then prunes the victim's data
    file by its column bounds before anything is signed, so whether the attacker's query of its
    own shared table succeeds says whether the victim's rows lie in the hinted range: here,
    that the victim's one row has id 42."""
    world = local_world
    namespace = f"victims_{rand()}"
    catalog = world.admin.catalog(world.wh)
    catalog.create_namespace(namespace)
    victim = catalog.create_table(f"{namespace}.kept", schema=ROWS, properties=V2)
    victim.append(rows_table([(42, "the secret row")]))
    victim = catalog.load_table(f"{namespace}.kept")
    victim_manifest = current_manifests(victim)[0]  # named after the manifest list GetTable shows

    own = own_table(world)
    own_folder = local_path(world, own.location())
    (own_folder / "lnk").symlink_to(
        local_path(world, victim_manifest.manifest_path).parent, target_is_directory=True
    )
    fields = ("manifest_length", "partition_spec_id", "content", "sequence_number", "min_sequence_number",
              "added_snapshot_id", "added_files_count", "existing_files_count", "deleted_files_count",
              "added_rows_count", "existing_rows_count", "deleted_rows_count", "partitions")  # fmt: skip
    through = ManifestFile.from_args(
        manifest_path=f"{own.location()}/lnk/../metadata/{victim_manifest.manifest_path.rsplit('/', 1)[1]}",
        **{field: getattr(victim_manifest, field) for field in fields},
    )
    snapshot_id = new_snapshot_id()
    assert (
        world.attack(snapshot_updates(own, snapshot_id, [through], "append"), name_of(own)).status_code == 200
    )
    shared = share(world, world.wh, ATT, name_of(own))

    above_41 = hinted(world, shared, "id", "greaterThan", 41)
    above_42 = hinted(world, shared, "id", "greaterThan", 42)
    assert above_41.status_code == above_42.status_code, (
        "the attacker's query tells whether the victim's rows have id > 41 "
        f"({above_41.status_code}) or id > 42 ({above_42.status_code}): the victim's manifest was read"
    )
