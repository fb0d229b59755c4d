"""Attacks on the writable catalog (`/_iceberg`) by a user allowed one namespace of one warehouse.

The attacker holds `s3tables:*` on `bucket/<attack-wh>/table/att/*` and the
namespace-level reads and `CreateNamespace` on `bucket/<attack-wh>`; it signs
raw requests with SigV4 and may write files with the store's keys inside its
own table's location, as engines do. Around it: a victim table in another
namespace of the same warehouse (`inside`), one in another warehouse
(`outside`), and a Delta table in the test-data bucket, which is no warehouse.

Each test makes one attack and then checks, first, that nothing it must not
reach changed (the victims' files, rows and schema; the Delta table's log),
and then that the request was refused in the Iceberg REST error model. The
server, not the caller's metadata, decides where a table lives: locations
outside the table's own place, paths into other tables, names that cut or
alias paths and ARNs are 400s; what the policy does not allow is a 403.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from pyiceberg.exceptions import BadRequestError, CommitFailedException, ForbiddenError
from pyiceberg.table import Table

from share_store.catalog import table_pointers, warehouse_rows
from share_store.catalog.users import CatalogUsers
from share_store.model import parse_create_args
from share_store.storage.local import LocalStorage
from tests.catalog_attacks import (
    ARN,
    ATT,
    BAD_REQUEST,
    FORBIDDEN,
    ROWS,
    ROWS_SCHEMA,
    V2,
    WAREHOUSE_READS,
    Caller,
    Victim,
    assert_intact,
    assert_refused,
    attacker_policy,
    commit,
    contents,
    copy_tree,
    create_body,
    keys_under,
    make_victim,
    policy,
    rand,
    rows_table,
    split,
    table_path,
    table_prefix,
    uri,
)
from tests.conftest import TESTDATA, TESTDATA_BUCKET, Deployment

DELTA_TABLE = "simple_table"
FIRST_COMMIT = "_delta_log/00000000000000000000.json"


def committer_policy(warehouse: str) -> str:
    """Commits to the namespace's tables, and no CreateTable."""
    return policy(
        (["s3tables:GetTable", "s3tables:UpdateTableMetadataLocation"], f"{ARN}{warehouse}/table/{ATT}/*"),
        (WAREHOUSE_READS, f"{ARN}{warehouse}"),
    )


#: Makes warehouses, and namespaces and tables in any.
BUCKET_MAKER_POLICY = policy(
    (
        [
            "s3tables:CreateTableBucket",
            "s3tables:GetTableBucket",
            "s3tables:CreateNamespace",
            "s3tables:CreateTable",
            "s3tables:GetTable",
        ],
        "*",
    ),
)


# -- the world the attacks happen in ---------------------------------------------------------


@dataclass(frozen=True)
class World:
    deployment: Deployment
    admin: Caller
    attacker: Caller
    committer: Caller
    bucket_maker: Caller
    victim_wh: str
    attack_wh: str
    #: Key prefix in the test-data bucket of this module's copy of a Delta table.
    delta_prefix: str

    @property
    def s3(self) -> bool:
        return not isinstance(self.deployment.storage, LocalStorage)

    @property
    def delta_location(self) -> str:
        return uri(self.deployment, TESTDATA_BUCKET, self.delta_prefix)

    def delta_log(self) -> bytes:
        return self.deployment.storage.read(TESTDATA_BUCKET, f"{self.delta_prefix}/{FIRST_COMMIT}")

    def own_path(self, table: str) -> str:
        return table_path(self.attack_wh, ATT, table)

    def attack(self, updates: list[dict[str, Any]], table: str) -> httpx.Response:
        return commit(self.attacker, self.attack_wh, ATT, table, updates)


@dataclass(frozen=True)
class Victims:
    inside: Victim  # another namespace of the attacker's warehouse
    outside: Victim  # another warehouse

    def assert_intact(self, world: World) -> None:
        for victim in (self.inside, self.outside):
            assert_intact(world.deployment, world.admin, victim)


@pytest.fixture(scope="module", params=["local", "s3"])
def world(request: pytest.FixtureRequest) -> World:
    deployment: Deployment = request.getfixturevalue(request.param)
    users = CatalogUsers(deployment.store.transactions, deployment.secret)
    tag = rand()
    victim_wh, attack_wh = f"victim-wh-{tag}", f"attack-wh-{tag}"
    admin = Caller(deployment, users.create(f"admin-{tag}"))
    for name in (victim_wh, attack_wh):
        made = admin.call("POST", "/warehouses", {"name": name})
        assert made.status_code == 200, made.text
    attacker = Caller(deployment, users.create(f"attacker-{tag}", attacker_policy(attack_wh)))
    made = attacker.call("POST", f"/{attack_wh}/namespaces", {"namespace": [ATT]})
    assert made.status_code == 200, made.text
    delta_prefix = f"hostile-{tag}/{DELTA_TABLE}"
    copy_tree(deployment, TESTDATA / DELTA_TABLE, TESTDATA_BUCKET, delta_prefix)
    return World(
        deployment=deployment,
        admin=admin,
        attacker=attacker,
        committer=Caller(deployment, users.create(f"committer-{tag}", committer_policy(attack_wh))),
        bucket_maker=Caller(deployment, users.create(f"maker-{tag}", BUCKET_MAKER_POLICY)),
        victim_wh=victim_wh,
        attack_wh=attack_wh,
        delta_prefix=delta_prefix,
    )


@pytest.fixture
def victims(world: World) -> Victims:
    return Victims(
        inside=make_victim(world.deployment, world.admin, world.attack_wh, f"victims_{rand()}"),
        outside=make_victim(world.deployment, world.admin, world.victim_wh, f"vault_{rand()}"),
    )


@pytest.fixture
def own(world: World) -> Table:
    """The attacker's own table, made and appended to honestly with pyiceberg."""
    catalog = world.attacker.catalog(world.attack_wh)
    identifier = f"{ATT}.t_{rand()}"
    catalog.create_table(identifier, schema=ROWS, properties=V2).append(rows_table([(10, "x")]))
    return catalog.load_table(identifier)


def name_of(table: Table) -> str:
    return str(table.name()[-1])


# -- 1. set-location ------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["another-warehouse", "delta-table"])
def test_set_location_out_of_the_tables_place_is_refused(
    world: World, victims: Victims, own: Table, target: str
) -> None:
    d = world.deployment
    location = victims.outside.location if target == "another-warehouse" else world.delta_location
    bucket, prefix = table_prefix(d, location)
    before, delta_log = keys_under(d, bucket, prefix), world.delta_log()

    answer = world.attack([{"action": "set-location", "location": location}], name_of(own))

    written = sorted(keys_under(d, bucket, prefix) - before)
    assert not written, f"the commit wrote {written} under {location}"
    assert world.delta_log() == delta_log
    victims.assert_intact(world)
    assert_refused(answer, 400, BAD_REQUEST)
    kept = world.admin.catalog(world.attack_wh).load_table(f"{ATT}.{name_of(own)}")
    assert kept.location() == own.location()


# -- 2. locations and names that cut the metadata file's path ---------------------------------


@pytest.mark.parametrize("cut", ["#", "?"])
def test_a_location_cut_short_cannot_aim_at_another_tables_metadata_file(
    world: World, victims: Victims, cut: str
) -> None:
    # `<victim's metadata file>#` passes as a location inside the warehouse, and the new
    # table's `<location>/metadata/00000-....json` is read back as the victim's file.
    location = victims.inside.metadata_location + cut
    answer = world.attacker.call(
        "POST", f"/{world.attack_wh}/namespaces/{ATT}/tables", create_body(f"cut_{rand()}", location)
    )
    victims.assert_intact(world)
    assert_refused(answer, 400, BAD_REQUEST)


@pytest.mark.parametrize("mark", ["#", "?"])
def test_table_names_that_cut_paths_are_refused(world: World, victims: Victims, mark: str) -> None:
    names = [f"x{mark}1", f"x{mark}2"]
    answers = {
        name: world.attacker.call("POST", f"/{world.attack_wh}/namespaces/{ATT}/tables", create_body(name))
        for name in names
    }
    for name, answer in answers.items():
        if answer.status_code == 200:
            # Each table's metadata file, as storage (another replica, a restart) has it, is its own.
            body = answer.json()
            stored = world.deployment.storage.read(*split(world.deployment, body["metadata-location"]))
            assert json.loads(stored)["table-uuid"] == body["metadata"]["table-uuid"], (
                f"table {name!r}'s metadata file {body['metadata-location']} holds another table's metadata"
            )
    victims.assert_intact(world)
    for answer in answers.values():
        assert_refused(answer, 400, BAD_REQUEST)


# -- 3. purge ---------------------------------------------------------------------------------


def snapshot_naming(own: Table, manifest_list: str) -> list[dict[str, Any]]:
    """An appended snapshot whose manifest list is someone else's, made the branch's head."""
    current = own.current_snapshot()
    assert current is not None
    snapshot_id = uuid.uuid4().int >> 65
    snapshot = {
        "snapshot-id": snapshot_id,
        "parent-snapshot-id": current.snapshot_id,
        "sequence-number": own.metadata.last_sequence_number + 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": own.schema().schema_id,
    }
    return [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]


def statistics_naming(own: Table, path: str) -> list[dict[str, Any]]:
    current = own.current_snapshot()
    assert current is not None
    statistics = {
        "snapshot-id": current.snapshot_id,
        "statistics-path": path,
        "file-size-in-bytes": 100,
        "file-footer-size-in-bytes": 10,
        "blob-metadata": [],
    }
    return [{"action": "set-statistics", "snapshot-id": current.snapshot_id, "statistics": statistics}]


@pytest.mark.parametrize("root", ["another-warehouse", "own-warehouse"])
def test_a_purge_cannot_reach_other_tables_files(
    world: World, victims: Victims, own: Table, root: str
) -> None:
    target = victims.outside if root == "another-warehouse" else victims.inside
    name = name_of(own)
    root_location = uri(world.deployment, target.warehouse)
    answers = {
        "set-location": world.attack([{"action": "set-location", "location": root_location}], name),
        "add-snapshot": world.attack(snapshot_naming(own, target.manifest_list), name),
        "set-statistics": world.attack(statistics_naming(own, target.metadata_location), name),
    }
    purge = world.attacker.call("DELETE", world.own_path(name) + "?purgeRequested=true")

    victims.assert_intact(world)
    for step, answer in answers.items():
        assert_refused(answer, 400, BAD_REQUEST, what=step)
    assert purge.status_code == 204, purge.text


# -- 4. register --------------------------------------------------------------------------------


def test_registering_another_live_tables_metadata_file_is_refused(world: World, victims: Victims) -> None:
    name = f"stolen_{rand()}"
    body = {"name": name, "metadata-location": victims.inside.metadata_location}
    answer = world.attacker.call("POST", f"/{world.attack_wh}/namespaces/{ATT}/register", body)
    found = world.admin.call("HEAD", world.own_path(name))
    purge = world.attacker.call("DELETE", world.own_path(name) + "?purgeRequested=true")

    victims.assert_intact(world)
    assert_refused(answer, {400, 409})
    assert found.status_code == 404, f"{name} was registered over {victims.inside.identifier}'s metadata"
    assert_refused(purge, 404)  # there was no table to purge


def spellings(own: str, victim_metadata: str, key: str) -> dict[str, str]:
    """A victim's metadata file named plainly and spelt otherwise, from its own folder or from the
    attacker's table `own` (`key`: the file's key in its bucket)."""
    up = "../../.."  # metadata -> the table -> its namespace -> the warehouse
    return {
        "plain": victim_metadata,
        "fragment": f"{victim_metadata}#",
        "query": f"{victim_metadata}?v=1",
        "dot": victim_metadata.replace("/metadata/", "/metadata/./"),
        "encoded-slash": victim_metadata.replace("/metadata/", "%2Fmetadata%2F"),
        "dots": f"{own}/metadata/{up}/{key}",
        "encoded-dots": f"{own}/metadata/{up.replace('..', '%2E%2E')}/{key}",
    }


def test_a_registered_or_committed_name_never_answers_another_tables_kept_metadata(
    world: World, victims: Victims, own: Table
) -> None:
    """The catalog keeps tables' metadata files by location, as parsed and as JSON, and answers loads
    and commits with those bytes. The victims are loaded first (their files now kept); the attacker
    then registers each victim's metadata file under its namespace, plainly and spelt with '#', '?',
    '.', '%2F', '..' and '%2E%2E': refused, no table made. Its own table's loads and commits still
    answer its own metadata, never a victim's, and purges take nothing of theirs."""
    d = world.deployment
    victim_uuids = set()
    for victim in (victims.inside, victims.outside):  # loaded: the catalog keeps their files now
        loaded = world.admin.call("GET", table_path(victim.warehouse, victim.namespace, victim.name))
        victim_uuids.add(loaded.json()["metadata"]["table-uuid"])
    answers = {}
    for victim in (victims.inside, victims.outside):
        key = split(d, victim.metadata_location)[1]
        for what, location in spellings(own.location(), victim.metadata_location, key).items():
            name = f"stolen_{rand()}"
            body = {"name": name, "metadata-location": location}
            answers[f"{victim.identifier} {what}"] = (
                world.attacker.call("POST", f"/{world.attack_wh}/namespaces/{ATT}/register", body),
                world.admin.call("HEAD", world.own_path(name)).status_code,
                world.attacker.call("DELETE", world.own_path(name) + "?purgeRequested=true").status_code,
            )
    own_load = world.attacker.call("GET", world.own_path(name_of(own))).json()
    committed = world.attack([{"action": "set-properties", "updates": {"after": "attacks"}}], name_of(own))

    victims.assert_intact(world)
    for what, (answer, found, purged) in answers.items():
        assert_refused(answer, {400, 404, 409}, what=what)
        assert found == 404, f"{what}: a table was registered over a victim's metadata"
        assert purged == 404, f"{what}: there was a table to purge"
    assert committed.status_code == 200, committed.text
    for answer in (own_load, committed.json()):
        assert answer["metadata"]["location"] == own.location()
        assert answer["metadata"]["table-uuid"] == str(own.metadata.table_uuid)
        assert answer["metadata"]["table-uuid"] not in victim_uuids
    assert committed.json()["metadata"]["properties"]["after"] == "attacks"


# -- 5. assert-create is no CreateTable ------------------------------------------------------


def staged_create(location: str) -> list[dict[str, Any]]:
    """The updates of a staged create, as pyiceberg's create transaction sends them."""
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


def test_assert_create_does_not_stand_in_for_create_table(world: World, victims: Victims) -> None:
    d, committer = world.deployment, world.committer
    direct, in_transaction = f"sneaky_{rand()}", f"sneaky_{rand()}"
    create = [{"type": "assert-create"}]
    updates = staged_create(uri(d, world.attack_wh, f"{ATT}/{direct}"))
    one = commit(committer, world.attack_wh, ATT, direct, updates, create)
    change = {
        "identifier": {"namespace": [ATT], "name": in_transaction},
        "requirements": create,
        "updates": staged_create(uri(d, world.attack_wh, f"{ATT}/{in_transaction}")),
    }
    many = committer.call("POST", f"/{world.attack_wh}/transactions/commit", {"table-changes": [change]})

    for name in (direct, in_transaction):
        found = world.admin.call("HEAD", world.own_path(name))
        assert found.status_code == 404, f"{name} was created by a user without CreateTable"
    victims.assert_intact(world)
    assert_refused(one, 403, FORBIDDEN)
    assert_refused(many, 403, FORBIDDEN)


# -- 6. signing other tables' files -----------------------------------------------------------


def share_table(world: World, table: Table) -> tuple[str, str, str]:
    """The provider shares the attacker's table (with history); its share, schema and table names."""
    share, schema, name = f"s_{rand()}", "hostile", name_of(table)
    spec = f"{name}:uniform:{world.attack_wh}:{ATT}:{name}"
    world.deployment.store.create_share(share, parse_create_args([schema, spec]), history_shared=True)
    return share, schema, name


def sign_read(world: World, share: str, location: str) -> httpx.Response:
    """The recipients' Iceberg REST remote signer, asked to sign a GET of `location`."""
    settings = world.deployment.storage.settings  # type: ignore[attr-defined]
    endpoint = (settings.public_endpoint or settings.endpoint).rstrip("/")
    bucket, key = split(world.deployment, location)
    body = {"method": "GET", "uri": f"{endpoint}/{bucket}/{quote(key)}", "headers": {}}
    token = world.deployment.token(share)
    return httpx.post(
        f"{world.deployment.server.url}/iceberg/v1/aws/s3/sign",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def data_files(table: Table) -> list[str]:
    return sorted(task.file.file_path for task in table.scan().plan_files())


def assert_signer_refuses(world: World, share: str, own_file: str, victim_file: str) -> None:
    """On S3: the attacker's own data file is signed (the share works), the victim's is not."""
    if not world.s3:
        return  # the remote signer serves S3 tables only
    signed_own = sign_read(world, share, own_file)
    assert signed_own.status_code == 200, signed_own.text
    refused = sign_read(world, share, victim_file)
    assert refused.status_code == 403, (
        f"the signer signed a read of the victim's {victim_file}: {refused.text}"
    )
    assert refused.json()["error"]["type"] == FORBIDDEN


@pytest.mark.parametrize("setting", ["write.data.path", "write.metadata.path", "write.object-storage.path"])
def test_write_paths_into_another_warehouse_are_refused(
    world: World, victims: Victims, own: Table, setting: str
) -> None:
    updates = [{"action": "set-properties", "updates": {setting: victims.outside.location}}]
    answer = world.attack(updates, name_of(own))
    share, _, _ = share_table(world, own)

    assert_signer_refuses(world, share, data_files(own)[0], victims.outside.data_files[0])
    properties = world.admin.catalog(world.attack_wh).load_table(f"{ATT}.{name_of(own)}").properties
    assert setting not in properties, f"{setting} = {properties.get(setting)}"
    victims.assert_intact(world)
    assert_refused(answer, 400, BAD_REQUEST)


def query(world: World, share: str, schema: str, table: str) -> httpx.Response:
    d = world.deployment
    return httpx.post(
        f"{d.endpoint}/shares/{share}/schemas/{schema}/tables/{table}/query",
        json={},
        headers={"Authorization": f"Bearer {d.token(share)}"},
        timeout=60,
    )


def test_a_manifest_naming_another_tables_data_file_shares_none_of_it(
    world: World, victims: Victims, own: Table
) -> None:
    victim_table = world.admin.catalog(world.victim_wh).load_table(victims.outside.identifier)
    stolen = next(iter(victim_table.scan().plan_files())).file
    own_file = data_files(own)[0]
    try:
        # The attacker's engine writes the manifest and manifest list inside its own table.
        with own.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
            append.append_data_file(stolen)
    except (BadRequestError, ForbiddenError, CommitFailedException):
        pass  # refused at commit: the table keeps none of it
    share, schema, name = share_table(world, own)

    answer = query(world, share, schema, name)
    marker = PurePosixPath(split(world.deployment, stolen.file_path)[1]).name
    leaked = [line for line in answer.text.splitlines() if marker in line]
    assert not leaked, f"the query hands out the victim's {stolen.file_path}: {leaked}"
    if answer.status_code != 200:
        error = answer.json()
        assert {"errorCode", "message"} <= set(error), answer.text[:300]
    assert_signer_refuses(world, share, own_file, stolen.file_path)
    victims.assert_intact(world)


# -- 7. a warehouse over a bucket that is no warehouse -----------------------------------------


def forget_warehouse(world: World, name: str) -> None:
    """Unmake warehouse `name` in the store only (its bucket, test data, is left as it is)."""
    admin = world.admin
    if admin.call("HEAD", f"/warehouses/{name}").status_code != 204:
        return
    namespaces = admin.call("GET", f"/{name}/namespaces").json()["namespaces"]
    for levels in namespaces:
        namespace = "\x1f".join(levels)
        tables = admin.call("GET", f"/{name}/namespaces/{quote(namespace, safe='')}/tables").json()
        for identifier in tables["identifiers"]:
            admin.call("DELETE", table_path(name, namespace, identifier["name"]))
        admin.call("DELETE", f"/{name}/namespaces/{quote(namespace, safe='')}")
    with world.deployment.store.engine.begin() as conn:
        # The tables dropped above stay, owned, until their retention: forgotten here with their
        # warehouse (their files are the test data's, which a purge would take).
        for dropped in table_pointers.dropped_tables(conn, name, purging=True):
            table_pointers.delete_table(conn, dropped)
        warehouse_rows.drop_warehouse(conn, name)


def test_a_warehouse_cannot_adopt_a_bucket_that_is_no_warehouse(world: World, victims: Victims) -> None:
    d, maker = world.deployment, world.bucket_maker
    before = keys_under(d, TESTDATA_BUCKET, "")
    delta = contents(d, TESTDATA_BUCKET, world.delta_prefix)
    try:
        answer = maker.call("POST", "/warehouses", {"name": TESTDATA_BUCKET})
        # What a warehouse over the bucket would let its maker do: a table inside the Delta table.
        namespace = f"hijack_{rand()}"
        maker.call("POST", f"/{TESTDATA_BUCKET}/namespaces", {"namespace": [namespace]})
        tables = f"/{TESTDATA_BUCKET}/namespaces/{namespace}/tables"
        maker.call("POST", tables, create_body("t", world.delta_location))

        added = sorted(keys_under(d, TESTDATA_BUCKET, "") - before)
        assert not added, f"objects written into the test-data bucket: {added}"
        assert contents(d, TESTDATA_BUCKET, world.delta_prefix) == delta
        listed = world.admin.call("GET", "/warehouses").json()["warehouses"]
        assert {"name": TESTDATA_BUCKET} not in listed
        victims.assert_intact(world)
        assert_refused(answer, {400, 409})
    finally:
        forget_warehouse(world, TESTDATA_BUCKET)  # not left a warehouse for the session's other tests


# -- 8. names ---------------------------------------------------------------------------------


def test_a_dotted_namespace_cannot_alias_a_nested_one(world: World, victims: Victims) -> None:
    top = f"a{rand()}"
    for levels in ([top], [top, "b"]):
        made = world.admin.call("POST", f"/{world.attack_wh}/namespaces", {"namespace": levels})
        assert made.status_code == 200, made.text
    # ["a.b"] and ["a", "b"] would both be arn:...:bucket/<wh>/table/a.b/<table>.
    answer = world.attacker.call("POST", f"/{world.attack_wh}/namespaces", {"namespace": [f"{top}.b"]})
    listed = world.admin.call("GET", f"/{world.attack_wh}/namespaces").json()["namespaces"]
    assert [f"{top}.b"] not in listed
    victims.assert_intact(world)
    assert_refused(answer, 400, BAD_REQUEST)


LOOK_ALIKES = {
    "nfd": "cafe\u0301",  # "café" decomposed: looks like the NFC name, is another
    "bidi-override": "ab\u202ecd",
    "fullwidth-solidus": "a\uff0fb",
    "hash": "a#b",
    "query": "a?b",
    "percent": "a%2fb",
}


def refusals_of(make: Callable[[str], httpx.Response]) -> dict[str, str]:
    """What was not refused with a 400 BadRequestException, by look-alike name."""
    let_through = {}
    for label, name in LOOK_ALIKES.items():
        answer = make(name)
        try:
            assert_refused(answer, 400, BAD_REQUEST)
        except AssertionError:
            let_through[label] = f"{answer.status_code} {answer.text[:120]}"
    return let_through


def test_look_alike_namespace_names_are_refused(world: World, victims: Victims) -> None:
    let_through = refusals_of(
        lambda name: world.attacker.call("POST", f"/{world.attack_wh}/namespaces", {"namespace": [name]})
    )
    victims.assert_intact(world)
    assert not let_through, let_through


def test_look_alike_table_names_are_refused(world: World, victims: Victims) -> None:
    let_through = refusals_of(
        lambda name: world.attacker.call(
            "POST", f"/{world.attack_wh}/namespaces/{ATT}/tables", create_body(name)
        )
    )
    victims.assert_intact(world)
    assert not let_through, let_through


def test_a_table_name_of_255_bytes_is_a_400_not_a_503(world: World, victims: Victims) -> None:
    answer = world.attacker.call(
        "POST", f"/{world.attack_wh}/namespaces/{ATT}/tables", create_body("t" * 255)
    )
    victims.assert_intact(world)
    assert_refused(answer, 400, BAD_REQUEST)


def test_registering_a_file_that_is_no_metadata_file_is_a_400(
    world: World, victims: Victims, own: Table
) -> None:
    body = {"name": f"parquet_{rand()}", "metadata-location": data_files(own)[0]}
    answer = world.attacker.call("POST", f"/{world.attack_wh}/namespaces/{ATT}/register", body)
    victims.assert_intact(world)
    assert_refused(answer, 400, BAD_REQUEST)


def test_registering_a_missing_metadata_file_is_a_4xx_not_a_500(
    world: World, victims: Victims, own: Table
) -> None:
    missing = f"{own.location()}/metadata/99999-{uuid.uuid4()}.metadata.json"
    body = {"name": f"ghost_{rand()}", "metadata-location": missing}
    answer = world.attacker.call("POST", f"/{world.attack_wh}/namespaces/{ATT}/register", body)
    victims.assert_intact(world)
    assert_refused(answer, {400, 404})
