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

import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
)
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from share_store.catalog.users import CatalogUsers
from tests.catalog_attacks import (
    ARN,
    ATT,
    BAD_REQUEST,
    ROWS,
    V2,
    Caller,
    assert_intact,
    assert_refused,
    commit,
    contents,
    create_body,
    keys_under,
    make_victim,
    policy,
    rand,
    rows_table,
    split,
    uri,
)
from tests.catalog_worlds import (
    DELTA_FORMAT,
    World,
    adds_of,
    make_deleted,
    make_world,
    name_of,
    new_snapshot_id,
    own_table,
    position_delete_file,
    query,
    share,
    snapshot_updates,
    staged_create,
    statistics_naming,
    write_manifest,
)


@pytest.fixture(scope="module", params=["local", "s3"])
def world(request: pytest.FixtureRequest) -> World:
    return make_world(request.getfixturevalue(request.param))


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

    from share_store.catalog import table_pointers

    namespace = f"victims_{rand()}"
    made = world.admin.call("POST", f"/{world.wh}/namespaces", {"namespace": [namespace]})
    assert made.status_code == 200, made.text
    barrier = threading.Barrier(2, timeout=3)
    reads = table_pointers.tables_in

    def meeting(conn: Any, warehouse: str) -> Any:
        found = reads(conn, warehouse)
        if warehouse == world.wh:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass
        return found

    monkeypatch.setattr(table_pointers, "tables_in", meeting)
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
    monkeypatch.setattr(table_pointers, "tables_in", reads)
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


def test_a_table_made_before_locations_were_recorded_keeps_the_files_it_left_behind(world: World) -> None:
    """Before revision 0008 a commit could move a table inside its warehouse (`set-location`, Spark's
    ALTER TABLE SET LOCATION), and its new metadata files went to the new place while its older
    snapshots kept naming data files at the old one. Such a table's row has no location; the
    catalog counts it with its metadata's `location` alone (`_others` → `_unchecked_location`), so
    the folder its data files are in is anyone's: the attacker makes a table there, names one
    of those files as its statistics file, and purges it."""
    from sqlalchemy import update

    from share_store.catalog.commits import metadata_json
    from share_store.persistence.sql_schema import warehouse_tables_table as t

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
    users = CatalogUsers(world.deployment.store.transactions, world.deployment.secret)
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


# -- spellings that leave the table: '..', encoded dots and slashes, '#', '?' -----------------

SPELLINGS = {
    "dot-dot": lambda own, ns, tail: f"{own}/../../{ns}/{tail}",
    "encoded-dots": lambda own, ns, tail: f"{own}/%2E%2E/%2E%2E/{ns}/{tail}",
    "encoded-slash": lambda own, ns, tail: f"{own}%2F..%2F..%2F{ns}%2F{tail.replace('/', '%2F')}",
    "fragment": lambda own, ns, tail: f"{own}/x#/../../{ns}/{tail}",
    "query": lambda own, ns, tail: f"{own}/x?/../../{ns}/{tail}",
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_paths_spelled_to_leave_the_table_are_refused_and_its_purge_takes_nothing(
    world: World, spelling: str
) -> None:
    """From inside its own folder the attacker names the victim's folder, manifest list and
    metadata file with '..', '%2E%2E', '%2F', '#' or '?': as a create's location, a
    `set-location`, `write.data.path`, a snapshot's manifest list and a statistics file of its
    existing table, which it then purges."""
    victim = make_victim(world.deployment, world.admin, world.wh, f"victims_{rand()}")
    own = own_table(world)
    name = name_of(own)

    def spelled(path: str) -> str:
        tail = path.split(f"/{victim.namespace}/", 1)[1]
        return SPELLINGS[spelling](own.location(), victim.namespace, tail)

    folder, metadata = spelled(victim.location), spelled(victim.metadata_location)
    answers = {
        "create": world.attacker.call(
            "POST", f"/{world.wh}/namespaces/{ATT}/tables", create_body(f"esc_{rand()}", folder)
        ),
        "set-location": world.attack([{"action": "set-location", "location": folder}], name),
        "write.data.path": world.attack(
            [{"action": "set-properties", "updates": {"write.data.path": f"{folder}/data"}}], name
        ),
        "manifest list": world.attack(snapshot_updates_naming(own, spelled(victim.manifest_list)), name),
        "statistics": world.attack(statistics_naming(own, metadata), name),
    }
    purge = world.attacker.call("DELETE", world.own_path(name) + "?purgeRequested=true")

    assert_intact(world.deployment, world.admin, victim)
    for step, answer in answers.items():
        assert_refused(answer, 400, BAD_REQUEST, what=step)
    assert purge.status_code == 204, purge.text


def snapshot_updates_naming(table: Table, manifest_list: str) -> list[dict[str, Any]]:
    """A snapshot whose manifest list is `manifest_list`, whatever it names, made main's head."""
    current = table.current_snapshot()
    assert current is not None
    snapshot_id = new_snapshot_id()
    snapshot = {
        "snapshot-id": snapshot_id, "parent-snapshot-id": current.snapshot_id,
        "sequence-number": table.metadata.last_sequence_number + 1, "timestamp-ms": int(time.time() * 1000),
        "manifest-list": manifest_list, "summary": {"operation": "append"},
        "schema-id": table.schema().schema_id,
    }  # fmt: skip
    return [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]


# -- 5. the cache of derived files: only the table's own are served --------------------------------


def test_a_manifest_naming_another_tables_derived_file_shares_none_of_it(world: World) -> None:
    """The server's cache (`.delta-sharing-cache/`) holds files derived from shared tables: copies of
    data files without their deleted rows, deletion vectors. They are in no table's location, so
    `locate_file` let any of them through for an own-warehouse table whose manifest names it: the
    attacker's table names the victim's materialized copy as its own data file, is shared, and its
    recipients (the attacker) are served the victim's rows. Only derived files of the table being
    read are its files."""
    victim = make_deleted(world)
    cache = ".delta-sharing-cache/"
    before = keys_under(world.deployment, world.wh, cache)
    assert adds_of(query(world, share(world, world.wh, victim.namespace, victim.name), DELTA_FORMAT))
    # What the victim's query derived: its deletion vector index (vectors, copies alike).
    derived = sorted(keys_under(world.deployment, world.wh, cache) - before)
    assert derived, "the victim's query derived nothing"
    stolen_key = derived[0]
    size = len(contents(world.deployment, world.wh, stolen_key)[stolen_key])
    stolen = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri(world.deployment, world.wh, stolen_key),
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=2,
        file_size_in_bytes=size,
    )
    own = own_table(world)
    name = name_of(own)
    snapshot_id = new_snapshot_id()
    # With a delete of its own, so that the reader of the attacker's table has its derived files.
    own_file = next(iter(own.scan().plan_files())).file
    deletes = position_delete_file(own, [(own_file.file_path, 0)])
    manifests = [write_manifest(own, snapshot_id, [stolen, own_file], False),
                 write_manifest(own, snapshot_id, [deletes], True)]  # fmt: skip
    world.attack(snapshot_updates(own, snapshot_id, manifests, "overwrite"), name)
    shared = share(world, world.wh, ATT, name)

    answer = query(world, shared, DELTA_FORMAT)
    marker = stolen_key.rsplit("/", 1)[-1]
    leaked = [line for line in answer.text.splitlines() if marker in line]
    assert not leaked, f"the attacker's share hands out the victim's derived {stolen_key}: {leaked}"
    if answer.status_code != 200:
        assert {"errorCode", "message"} <= set(answer.json()), answer.text[:300]
    if world.s3:
        settings = world.deployment.storage.settings  # type: ignore[attr-defined]
        endpoint = (settings.public_endpoint or settings.endpoint).rstrip("/")
        signed = httpx.post(
            f"{world.deployment.server.url}/iceberg/v1/aws/s3/sign",
            json={"method": "GET", "uri": f"{endpoint}/{world.wh}/{stolen_key}", "headers": {}},
            headers={"Authorization": f"Bearer {world.deployment.token(shared[0])}"},
            timeout=60,
        )
        assert signed.status_code == 403, signed.text
