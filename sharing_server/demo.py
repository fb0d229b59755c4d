"""The demo share of `make run`: a partitioned Delta table and an Iceberg table, with history.

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

from share_store.errors import Unauthenticated
from share_store.model import TableSpec, parse_create_args
from share_store.persistence import ShareStore
from share_store.tokens import new_secret
from sharing_server import paths
from sharing_server.admin.commands import ADMIN_TOKEN_PREFIX
from sharing_server.auth.profiles import write_profile
from sharing_server.config import ServerConfig

DEMO_BUCKET = "demo"
DEMO_PATH = "sales/orders"
DEMO_SHARE = "demo"
DEMO_SCHEMA = "sales"
DEMO_TABLE = "orders"
DEMO_ICEBERG_TABLE = "customers"
DEMO_ICEBERG_SPEC = f"{DEMO_SCHEMA}:{DEMO_ICEBERG_TABLE}:uniform:default:sales:customers"


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


def write_demo_iceberg_table(config: ServerConfig) -> None:
    """`sales.customers` in the embedded catalog: two snapshots, partitioned by nation."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType

    catalog = config.make_catalogs().catalog("default")
    catalog.create_namespace_if_not_exists("sales")
    try:
        catalog.load_table("sales.customers")
        return
    except NoSuchTableError:
        pass
    schema = Schema(
        NestedField(1, "custkey", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "nation", StringType()),
        NestedField(4, "acctbal", DoubleType()),
    )
    spec = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "nation"))
    table = catalog.create_table("sales.customers", schema, partition_spec=spec)
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
    write_demo_iceberg_table(config)
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
