"""The demo share of `make run`: a partitioned Delta table and an Iceberg table, with history.

The Iceberg table is written through the server's own catalog (AIStor Tables),
whose connection details (URI, warehouse, a demo user's keys) are printed.

Idempotent: a second run finds the table, share and profile in place and
changes nothing (a profile whose token no longer works is replaced).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from share_store.authentication.tokens import ADMIN_TOKEN_PREFIX, new_secret
from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.names import TableName
from share_store.catalog.table_source import WarehouseTables
from share_store.catalog.users import CatalogUsers
from share_store.errors import Unauthenticated
from share_store.model import TableSpec, parse_create_args
from share_store.persistence import ShareStore
from sharing_server import paths
from sharing_server.auth.profiles import write_profile
from sharing_server.config import ServerConfig
from sharing_server.startup import server_secret

DEMO_BUCKET = "demo"
DEMO_PATH = "sales/orders"
DEMO_SHARE = "demo"
DEMO_SCHEMA = "sales"
DEMO_TABLE = "orders"
DEMO_ICEBERG_TABLE = "customers"
#: The demo's Iceberg table lives in the server's own catalog (AIStor Tables), in this warehouse.
DEMO_WAREHOUSE = "demo-warehouse"
DEMO_ICEBERG_SPEC = f"{DEMO_SCHEMA}:{DEMO_ICEBERG_TABLE}:uniform:{DEMO_WAREHOUSE}:sales:customers"
DEMO_CATALOG_KEYS = "demo-catalog.keys"


def _orders(start: int, count: int, regions: list[str]) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "order_id": pa.array(ids, pa.int64()),
            "region": pa.array([regions[i % len(regions)] for i in ids]),
            "amount": pa.array([round(10 + i * 1.5, 2) for i in ids], pa.float64()),
            "status": pa.array(["open"] * count),
        }
    )


def write_demo_table(root: Path) -> Path:
    """Versions 0-3: create, append, update, delete; change data feed on."""
    location = root / DEMO_BUCKET / DEMO_PATH
    if (location / "_delta_log").exists():
        return location
    location.parent.mkdir(parents=True, exist_ok=True)
    config = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(
        str(location), _orders(0, 20, ["emea", "amer"]), partition_by=["region"], configuration=config
    )
    write_deltalake(str(location), _orders(20, 20, ["emea", "amer", "apac"]), mode="append")
    table = DeltaTable(str(location))
    table.update(predicate="order_id < 5", updates={"status": "'shipped'"})
    table.delete(predicate="order_id >= 38")
    return location


def write_demo_iceberg_table(config: ServerConfig, store: ShareStore) -> WarehouseCatalog:
    """`sales.customers` in the server's own catalog: two snapshots, partitioned by nation.

    Written through the same catalog (and compare-and-swap) the REST API serves,
    at format version 2: pyiceberg, which writes the rows, cannot write v3 data yet.
    """
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    catalog = WarehouseCatalog(store.transactions, config.make_storage(server_secret(config)))
    if DEMO_WAREHOUSE not in catalog.list_warehouses():
        catalog.create_warehouse(DEMO_WAREHOUSE, adopt=True)  # the demo's own bucket, from an earlier run
    if ("sales",) not in catalog.list_namespaces(DEMO_WAREHOUSE):
        catalog.create_namespace(DEMO_WAREHOUSE, ("sales",), {"comment": "the demo's tables"})
    name = TableName.of(DEMO_WAREHOUSE, ("sales",), "customers")
    if catalog.table_exists(name):
        return catalog
    schema = Schema(
        NestedField(1, "custkey", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "nation", StringType()),
        NestedField(4, "acctbal", DoubleType()),
    )
    spec = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "nation"))
    catalog.create_table(name, NewTable(schema, partition_spec=spec, properties={"format-version": "2"}))
    table = WarehouseTables(catalog, DEMO_WAREHOUSE).load_table(("sales", "customers"))
    for start in (0, 10):
        keys = list(range(start, start + 10))
        batch = pa.table(
            {
                "custkey": pa.array(keys, pa.int64()),
                "name": [f"Customer#{k:09d}" for k in keys],
                "nation": [("FRANCE", "JAPAN", "BRAZIL")[k % 3] for k in keys],
                "acctbal": [round(100 + k * 17.5, 2) for k in keys],
            }
        )
        table.append(batch.cast(table.schema().as_arrow()))
    return catalog


def demo_catalog_keys(config: ServerConfig, store: ShareStore) -> tuple[str, str]:
    """The demo catalog user's access key and secret, made once and kept (owner-readable) like the
    demo admin token; made again if the user was removed."""
    users = CatalogUsers(store.transactions, server_secret(config))
    path = config.data_dir / DEMO_CATALOG_KEYS
    if path.exists():
        access_key, _, secret_key = path.read_text().strip().partition(":")
        if users.known(access_key) is not None:
            return access_key, secret_key
    if any(user.name == "demo" for user in users.list()):
        users.remove("demo")
    issued = users.create("demo")
    config.data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"{issued.access_key}:{issued.secret_key}\n")
    return issued.access_key, issued.secret_key


def print_catalog(config: ServerConfig, keys: tuple[str, str]) -> None:
    """How to connect pyiceberg (and other engines) to the demo warehouse."""
    uri = f"{config.base_url}{paths.WAREHOUSE_PREFIX}"
    print(f"Iceberg catalog (AIStor Tables): {uri}, warehouse {DEMO_WAREHOUSE}")
    print(f"  Access key: {keys[0]}")
    print(f"  Secret key: {keys[1]}  (kept in {(config.data_dir / DEMO_CATALOG_KEYS).resolve()})")
    code = (
        "from pyiceberg.catalog import load_catalog; "
        f'c = load_catalog("demo", uri="{uri}", warehouse="{DEMO_WAREHOUSE}", '
        f'credential="{keys[0]}:{keys[1]}"); '
        'print(c.load_table("sales.customers").scan().to_pandas())'
    )
    print(f"  {shlex.quote(interpreter())} -c {shlex.quote(code)}")
    print("  (or sign with SigV4 as AIStor's clients do: rest.sigv4-enabled, rest.signing-name=s3tables)")


DEMO_ADMIN_TOKEN_FILE = "demo-admin.token"  # noqa: S105 - a file name


def demo_admin_token(data_dir: Path) -> str:
    """The demo's admin token, made once and kept (owner-readable) in the data directory.

    `serve --demo` without an `[admin] token_hash` configures this one, so that
    the console can be tried at once; a configured admin token is left alone.
    """
    path = data_dir / DEMO_ADMIN_TOKEN_FILE
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = new_secret(ADMIN_TOKEN_PREFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def print_console(config: ServerConfig, demo_token: str | None) -> None:
    """Where the console is and how to sign in to it (printed by `serve`)."""
    url = f"{config.base_url}{paths.CONSOLE_PREFIX}/"
    if demo_token is not None:
        print(f"Console: {url} (sign in with the demo admin token: {demo_token})", flush=True)
        print(
            f"  kept in {(config.data_dir / DEMO_ADMIN_TOKEN_FILE).resolve()}; configure [admin] token_hash "
            "to use your own",
            flush=True,
        )
    elif config.options.admin_token_hash is not None:
        print(f"Console: {url} (sign in with the admin token)", flush=True)
    else:
        print("Console: off (set [admin] token_hash; `sharing-server admin-token` makes one)", flush=True)


def profile_works(store: ShareStore, path: Path) -> bool:
    try:
        secret = json.loads(path.read_text())["bearerToken"]
        store.authenticate(secret)
        return True
    except (OSError, ValueError, KeyError, Unauthenticated):
        return False


def seed_demo(config: ServerConfig, store: ShareStore) -> Path:
    if config.storage.get("type", "local") != "local":
        raise SystemExit("the demo share needs local storage")
    write_demo_table(config.storage_root())
    write_demo_iceberg_table(config, store)
    if not any(share.name == DEMO_SHARE for share in store.list_shares()):
        delta_spec = f"{DEMO_TABLE}:delta:{DEMO_BUCKET}:{DEMO_PATH}"
        store.create_share(DEMO_SHARE, parse_create_args([DEMO_SCHEMA, delta_spec]))
    if not any(table.name == DEMO_ICEBERG_TABLE for table in store.list_tables(DEMO_SHARE)):
        store.update_share(DEMO_SHARE, add=[TableSpec.parse(DEMO_ICEBERG_SPEC)])
    profile = config.data_dir / "demo.share"
    if not profile_works(store, profile):
        token, secret = store.create_token(DEMO_SHARE, timedelta(days=30), "demo token from make run")
        write_profile(profile, config.endpoint, secret, token.expires_at)
    print(f"Demo share profile: {profile.resolve()}")
    print("Read it with (from this directory, as printed):")
    for table in (DEMO_TABLE, DEMO_ICEBERG_TABLE):
        url = f"{profile.resolve()}#{DEMO_SHARE}.{DEMO_SCHEMA}.{table}"
        code = f'import delta_sharing; print(delta_sharing.load_as_pandas("{url}"))'
        print(f"  {shlex.quote(interpreter())} -c {shlex.quote(code)}")
    print("Elsewhere: pip install delta-sharing, then the same line with that Python.")
    print_catalog(config, demo_catalog_keys(config, store))
    return profile


def interpreter() -> str:
    """This Python (the project's virtualenv, which has delta_sharing), as a path a shell here runs.

    A bare `python` is often not on PATH, or is another Python without the client.
    """
    executable = Path(sys.executable)
    try:
        return str(executable.relative_to(Path.cwd()))
    except ValueError:
        return str(executable)
