"""The demo share of `make run`: a small partitioned Delta table with history.

Idempotent: a second run finds the table, share and profile in place and
changes nothing (a profile whose token no longer works is replaced).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from share_store.errors import Unauthenticated
from share_store.model import parse_create_args
from share_store.persistence import ShareStore
from sharing_server.config import ServerConfig
from sharing_server.profiles import write_profile

DEMO_BUCKET = "demo"
DEMO_PATH = "sales/orders"
DEMO_SHARE = "demo"
DEMO_SCHEMA = "sales"
DEMO_TABLE = "orders"


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
    root = Path(config.storage.get("root") or config.data_dir / "data")
    write_demo_table(root)
    if not any(share.name == DEMO_SHARE for share in store.list_shares()):
        store.create_share(
            DEMO_SHARE, parse_create_args([DEMO_SCHEMA, f"{DEMO_TABLE}:delta:{DEMO_BUCKET}:{DEMO_PATH}"])
        )
    profile = config.data_dir / "demo.share"
    if not profile_works(store, profile):
        token, secret = store.create_token(DEMO_SHARE, timedelta(days=30), "demo token from make run")
        write_profile(profile, config.endpoint, secret, token.expires_at)
    print(f"Demo share profile: {profile.resolve()}")
    print("Read it with:")
    print(
        f'  python -c "import delta_sharing; print(delta_sharing.load_as_pandas('
        f"'{profile.resolve()}#{DEMO_SHARE}.{DEMO_SCHEMA}.{DEMO_TABLE}'))\""
    )
    return profile
