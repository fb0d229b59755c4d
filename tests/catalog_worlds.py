"""The world of the catalog attacks in `test_catalog_hostile_more` and `test_catalog_hostile_links`.

A warehouse with an attacker allowed `s3tables:*` on one namespace (`att`), and what
an attacker writes as engines do: data and delete files, manifests and manifest lists
inside its own table's location, commits that add them, shares it then queries.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from share_store.catalog.users import CatalogUsers
from share_store.iceberg.delete_manifests import DeleteManifestWriter
from share_store.model import parse_create_args
from share_store.storage.local import LocalStorage
from tests.catalog_attacks import (
    ATT,
    ROWS,
    ROWS_SCHEMA,
    V2,
    Caller,
    attacker_policy,
    commit,
    rand,
    rows_table,
    split,
    table_path,
)
from tests.conftest import Deployment

DELTA_FEATURES = "deletionVectors,columnMapping,timestampNtz"
DELTA_FORMAT = {"delta-sharing-capabilities": f"responseformat=delta;readerfeatures={DELTA_FEATURES}"}
#: Field ids of a position delete file's columns (the Iceberg spec's reserved ids).
FILE_PATH_ID, POS_ID = 2147483546, 2147483545


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


def make_world(deployment: Deployment) -> World:
    users = CatalogUsers(deployment.store.transactions, deployment.secret)
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


def local_path(world: World, location: str) -> Path:
    bucket, key = split(world.deployment, location)
    return world.root / bucket / key


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
