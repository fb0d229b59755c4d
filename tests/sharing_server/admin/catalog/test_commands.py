"""The `table` commands (AIStor Tables), good input and bad, through the real entry point.

On a temporary configuration (local storage, SQLite store: conftest's `config`) and, once, on
a live server through `--server` and its `/_iceberg/v1`, where a pyiceberg client writes a
snapshot so that `info` and `remove --purge` meet real data files. Maintenance: in
test_maintenance.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pytest

from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.policies import READ_ONLY_EXAMPLE_POLICY
from share_store.catalog.users import CatalogUsers
from share_store.persistence import ShareStore
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from sharing_server.cli import main
from sharing_server.config import load_config
from sharing_server.startup import server_secret
from tests.conftest import ADMIN_TOKEN, Deployment

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": True},
            {"id": 2, "name": "ts", "type": "timestamptz", "required": False},
            {"id": 3, "name": "name", "type": "string", "required": False},
        ],
    }
)
BAD_TYPE = SCHEMA.replace('"long"', '"lng"')


def run(config: Path, *args: str) -> int:
    return main(["--config", str(config), *args])


def output(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert run(config, *args) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def store_of(config: Path) -> ShareStore:
    return ShareStore(f"sqlite:///{config.parent / 'data' / 'store.db'}")


def state(config: Path) -> dict[str, object]:
    """Everything the commands may change: the catalog's tree, the users and the files in storage."""
    store = store_of(config)
    try:
        storage = LocalStorage(config.parent / "buckets", UrlSigner(b"k" * 32, "https://x/files"))
        catalog = WarehouseCatalog(store.transactions, storage)
        tree: dict[str, dict[str, list[str]]] = {}
        for warehouse in catalog.list_warehouses():
            pending, tree[warehouse] = list(catalog.list_namespaces(warehouse)), {}
            while pending:
                levels = pending.pop()
                tree[warehouse][".".join(levels)] = catalog.list_tables(warehouse, levels)
                pending.extend(catalog.list_namespaces(warehouse, levels))
        users = sorted(user.name for user in CatalogUsers(store.transactions, b"k" * 32).list())
    finally:
        store.close()
    files = sorted(str(p) for p in (config.parent / "buckets").rglob("*") if p.is_file())
    return {"tree": tree, "users": users, "files": files}


def files_under(location: str) -> list[Path]:
    return [p for p in Path(urlparse(location).path).rglob("*") if p.is_file()]


def location_in(info: str) -> str:
    return next(line.split()[-1] for line in info.splitlines() if line.startswith("Location:"))


def test_warehouses(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert output(config, capsys, "table", "warehouse", "create", "analytics") == (
        "Created warehouse 'analytics'.\n"
    )
    assert (config.parent / "buckets" / "analytics").is_dir()  # a warehouse is a bucket
    assert run(config, "table", "warehouse", "create", "myminio", "lake") == 0
    assert "alias 'myminio' is ignored" in capsys.readouterr().err
    assert output(config, capsys, "table", "warehouse", "list") == "analytics\nlake\n"
    assert output(config, capsys, "table", "warehouse", "list", "myminio") == "analytics\nlake\n"
    run(config, "table", "namespace", "create", "analytics", "sales")
    capsys.readouterr()
    assert run(config, "table", "warehouse", "remove", "analytics") == 2  # not empty
    assert "Warehouse is not empty: analytics holds namespace sales" in capsys.readouterr().err
    assert run(config, "table", "namespace", "remove", "analytics", "sales") == 0
    assert output(config, capsys, "table", "warehouse", "remove", "analytics") == (
        "Removed warehouse 'analytics'.\n"
    )
    assert not (config.parent / "buckets" / "analytics").exists()
    assert output(config, capsys, "table", "warehouse", "list") == "lake\n"


def test_a_warehouses_table_defaults(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """New tables are v2; `warehouse defaults --set format-version=3` makes a warehouse's v3, under
    what a namespace or the create asks."""
    run(config, "table", "warehouse", "create", "lake")
    run(config, "table", "namespace", "create", "lake", "sales")
    capsys.readouterr()
    assert output(config, capsys, "table", "warehouse", "defaults", "lake") == (
        "Warehouse 'lake' has no table defaults (new tables are format version 2).\n"
    )
    made = output(config, capsys, "table", "create", "lake", "sales", "v2", "--schema", SCHEMA)
    assert "(format version 2, partitioned" in made or "(format version 2)." in made
    shown = output(config, capsys, "table", "warehouse", "defaults", "myminio", "lake", "--set",
                   "format-version=3", "--set", "table-default.owner=ops")  # fmt: skip
    assert shown == "format-version=3\nowner=ops\n"
    assert "(format version 3" in output(
        config, capsys, "table", "create", "lake", "sales", "v3", "--schema", SCHEMA
    )
    asked = output(config, capsys, "table", "create", "lake", "sales", "v1", "--schema", SCHEMA,
                   "--format-version", "1")  # fmt: skip
    assert "(format version 1" in asked
    assert output(config, capsys, "table", "warehouse", "defaults", "lake", "--unset", "format-version") == (
        "owner=ops\n"
    )
    assert run(config, "table", "warehouse", "defaults", "lake", "--set", "format-version") == 2
    assert "--set takes KEY=VALUE" in capsys.readouterr().err
    assert run(config, "table", "warehouse", "defaults", "nowh") == 2
    assert capsys.readouterr().err.startswith("error: Warehouse does not exist: nowh")


def test_nested_namespaces(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(config, "table", "warehouse", "create", "analytics")
    for namespace in ("sales", "sales.eu", "sales.us", "sales.eu.north", "hr"):
        assert output(config, capsys, "table", "namespace", "create", "analytics", namespace) == (
            f"Created namespace '{namespace}' in warehouse 'analytics'.\n"
        )
    assert output(config, capsys, "table", "namespace", "list", "analytics") == "hr\nsales\n"
    assert output(config, capsys, "table", "namespace", "list", "analytics", "--parent", "sales") == (
        "sales.eu\nsales.us\n"
    )
    # mc's form: the alias first; a third word is then the parent.
    assert output(config, capsys, "table", "namespace", "list", "minio", "analytics", "sales.eu") == (
        "sales.eu.north\n"
    )
    assert output(config, capsys, "table", "namespace", "list", "minio", "analytics") == "hr\nsales\n"
    assert run(config, "table", "namespace", "remove", "analytics", "sales") == 2
    assert "Namespace is not empty: sales holds namespace sales.eu" in capsys.readouterr().err
    for namespace in ("sales.eu.north", "sales.eu", "sales.us", "sales"):
        assert run(config, "table", "namespace", "remove", "myminio", "analytics", namespace) == 0
    assert output(config, capsys, "table", "namespace", "list", "analytics") == "hr\n"


@pytest.mark.parametrize("version", [2, 3])
def test_table_lifecycle(config: Path, version: int, capsys: pytest.CaptureFixture[str]) -> None:
    run(config, "table", "warehouse", "create", "analytics")
    run(config, "table", "namespace", "create", "analytics", "sales")
    run(config, "table", "namespace", "create", "analytics", "sales.eu")
    created = output(
        config, capsys,
        "table", "create", "analytics", "sales.eu", "orders", "--schema", SCHEMA, "--format-version",
        str(version), "--partition", "ts:day", "--partition", "id:bucket[16]", "--partition",
        "name:truncate[4]", "--partition", "id",
    )  # fmt: skip
    assert created.startswith(
        f"Created table 'sales.eu.orders' in warehouse 'analytics' (format version {version}, "
        "partitioned by ts_day, id_bucket_16, name_trunc_4, id)."
    )
    location = location_in(created)
    assert location.startswith((config.parent / "buckets" / "analytics" / "sales" / "eu").as_uri())
    assert [p.name.endswith(".metadata.json") for p in files_under(location)] == [True]
    assert output(config, capsys, "table", "list", "analytics", "sales.eu") == "orders\n"
    assert output(config, capsys, "table", "list", "analytics", "sales") == ""

    info = output(config, capsys, "table", "info", "analytics", "sales.eu", "orders")
    assert "Table:            analytics: sales.eu.orders\n" in info
    assert f"Location:         {location}\n" in info
    assert f"Metadata:         {location}/metadata/00000-" in info
    assert f"Format version:   {version}\n" in info
    assert "  1  id  long  required\n  2  ts  timestamptz\n  3  name  string\n" in info
    assert "Partition spec (id 0):\n  1000  ts_day  day(ts)\n  1001  id_bucket_16  bucket[16](id)\n" in info
    assert "  1002  name_trunc_4  truncate[4](name)\n  1003  id  identity(id)\n" in info
    assert "Current snapshot: none\nSnapshots:        0\n" in info

    assert output(config, capsys, "table", "remove", "analytics", "sales.eu", "orders") == (
        "Dropped table 'sales.eu.orders' from warehouse 'analytics': kept with its files for 7d, then "
        "purged; `sharing-server table undrop analytics sales.eu orders` brings it back.\n"
    )
    assert len(files_under(location)) == 1  # without --purge the files stay
    assert output(config, capsys, "table", "list", "analytics", "sales.eu") == ""
    dropped = output(config, capsys, "table", "list", "analytics", "sales.eu", "--dropped")
    assert dropped.startswith("orders\tid ") and "\tdropped " in dropped and "\tpurged after " in dropped
    assert output(config, capsys, "table", "undrop", "analytics", "sales.eu", "orders") == (
        "Undropped table 'sales.eu.orders' in warehouse 'analytics'.\n"
    )
    assert output(config, capsys, "table", "list", "analytics", "sales.eu") == "orders\n"
    run(config, "table", "remove", "analytics", "sales.eu", "orders")

    run(config, "table", "create", "analytics", "sales", "plain", "--schema", SCHEMA)
    info = output(config, capsys, "table", "info", "analytics", "sales", "plain")
    assert "Format version:   2\n" in info and "Partition spec:   unpartitioned\n" in info
    plain = location_in(info)
    assert files_under(plain)
    assert output(config, capsys, "table", "remove", "analytics", "sales", "plain", "--purge") == (
        "Removed table 'sales.plain' from warehouse 'analytics' and deleted its files.\n"
    )
    assert files_under(plain) == []


def test_the_alias_form(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`mc table …` users type the alias first; it is told from a name by counting words."""
    assert run(config, "table", "warehouse", "create", "myminio", "wh1") == 0
    assert run(config, "table", "namespace", "create", "myminio", "wh1", "ns") == 0
    assert run(config, "table", "create", "myminio", "wh1", "ns", "t", "--schema", SCHEMA) == 0
    assert capsys.readouterr().err.count("note: the alias 'myminio' is ignored") == 3
    assert output(config, capsys, "table", "list", "myminio", "wh1", "ns") == "t\n"
    assert "Table:            wh1: ns.t" in output(
        config, capsys, "table", "info", "myminio", "wh1", "ns", "t"
    )
    assert run(config, "table", "remove", "myminio", "wh1", "ns", "t", "--purge") == 0
    capsys.readouterr()
    # A table named like a warehouse is still the table: three words are never an alias and two names.
    assert run(config, "table", "create", "wh1", "ns", "myminio", "--schema", SCHEMA) == 0
    assert "alias" not in capsys.readouterr().err
    assert output(config, capsys, "table", "list", "wh1", "ns") == "myminio\n"


@pytest.mark.parametrize(
    "args",
    [
        ["table", "warehouse", "create"],
        ["table", "warehouse", "create", "a", "b", "c"],
        ["table", "warehouse", "list", "a", "b"],
        ["table", "namespace", "create", "lake"],
        ["table", "namespace", "list", "a", "b", "c", "d"],
        ["table", "create", "lake", "ns", "--schema", SCHEMA],
        ["table", "info", "a", "lake", "ns", "t", "x"],
        ["table", "create", "lake", "ns", "t"],  # --schema is required
        ["table", "create", "lake", "ns", "t", "--schema", SCHEMA, "--format-version", "4"],
        ["table", "list", "my/alias", "lake", "ns"],
    ],
)
def test_wrong_words_are_usage_errors(config: Path, args: list[str]) -> None:
    assert run(config, "table", "warehouse", "create", "lake") == 0
    before = state(config)
    with pytest.raises(SystemExit) as exited:
        run(config, *args)
    assert exited.value.code == 2
    assert state(config) == before


def test_users(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    created = output(config, capsys, "table", "user", "create", "alice")
    lines = created.splitlines()
    assert lines[0] == "User:       alice"
    access_key = next(line.split()[-1] for line in lines if line.startswith("Access key: "))
    secret_key = next(line.split()[-1] for line in lines if line.startswith("Secret key: "))
    assert "Policy:     full access" in lines
    assert "The secret key is shown once" in created
    policy = tmp_path / "read-only.json"
    policy.write_text(READ_ONLY_EXAMPLE_POLICY)
    assert "Policy:     1 statement(s)" in output(
        config, capsys, "table", "user", "create", "reader", "--policy", str(policy)
    )

    key = server_secret(load_config(str(config)))
    store = store_of(config)
    try:
        users = CatalogUsers(store.transactions, key)
        assert users.secret_for(access_key) == secret_key  # the printed keys sign requests
        listing = output(config, capsys, "table", "user", "list")
        assert listing.splitlines() == [f"alice\t{access_key}\tfull access", listing.splitlines()[1]]
        assert listing.splitlines()[1].startswith("reader\tAK") and secret_key not in listing
        assert output(config, capsys, "table", "user", "remove", "alice").startswith(
            "Removed catalog user 'alice'"
        )
        assert users.secret_for(access_key) is None
        assert output(config, capsys, "table", "user", "list").startswith("reader\t")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["table", "warehouse", "create", "Bad_Name"], "invalid warehouse name 'Bad_Name'"),
        (["table", "warehouse", "create", "config"], "one of the catalog's endpoints"),
        (["table", "warehouse", "create", "lake"], "Warehouse already exists: lake"),
        (["table", "warehouse", "remove", "lake"], "Warehouse is not empty: lake"),
        (["table", "warehouse", "remove", "nowh"], "Warehouse does not exist: nowh"),
        (["table", "namespace", "create", "nowh", "ns2"], "Warehouse does not exist: nowh"),
        (["table", "namespace", "create", "lake", "a..b"], "invalid namespace name: it is empty"),
        (["table", "namespace", "create", "lake", "x.y"], "Namespace does not exist: x"),
        (["table", "namespace", "create", "lake", "ns"], "Namespace already exists: ns"),
        (["table", "namespace", "remove", "lake", "ns"], "Namespace is not empty: ns holds table t"),
        (["table", "namespace", "remove", "nowh", "ns"], "Warehouse does not exist: nowh"),
        (["table", "namespace", "list", "lake", "--parent", "nope"], "Namespace does not exist: nope"),
        (["table", "namespace", "list", "m", "lake", "ns", "--parent", "ns"],
         "name the parent namespace once"),
        (["table", "create", "lake", "ns", "t2", "--schema", "{not json"], "invalid schema"),
        (["table", "create", "lake", "ns", "t2", "--schema", BAD_TYPE], "invalid schema: fields.0.type"),
        (["table", "create", "lake", "ns", "t2", "--schema", SCHEMA, "--partition", "nope:day"],
         "the schema has no field 'nope'"),
        (["table", "create", "lake", "ns", "t2", "--schema", SCHEMA, "--partition", "ts:dya"],
         "unknown transform 'dya'"),
        (["table", "create", "lake", "ns", "t2", "--schema", SCHEMA, "--partition", "id:bucket[0]"],
         "unknown transform 'bucket[0]'"),
        (["table", "create", "lake", "ns", "t2", "--schema", SCHEMA, "--partition", "id:day"],
         "day cannot partition 'id' (long)"),
        (["table", "create", "lake", "ns", "t2", "--schema", SCHEMA, "--partition", "id",
          "--partition", "id"], "partition field 'id' is given twice"),
        (["table", "create", "nowh", "ns", "t2", "--schema", SCHEMA], "Warehouse does not exist: nowh"),
        (["table", "create", "lake", "nope", "t2", "--schema", SCHEMA], "Namespace does not exist: nope"),
        (["table", "create", "lake", "ns", "t", "--schema", SCHEMA], "Table already exists: ns.t"),
        (["table", "create", "lake", "ns", ".hidden", "--schema", SCHEMA], "invalid table name '.hidden'"),
        (["table", "create", "lake", "ns", "t2", "--schema", SCHEMA, "--location", "file:///tmp/elsewhere"],
         "is not inside warehouse lake"),
        (["table", "list", "lake", "nope"], "Namespace does not exist: nope"),
        (["table", "list", "nowh", "ns"], "Warehouse does not exist: nowh"),
        (["table", "info", "lake", "ns", "nope"], "Table does not exist: ns.nope"),
        (["table", "remove", "lake", "ns", "nope", "--purge"], "Table does not exist: ns.nope"),
        (["table", "user", "create", "bad/name"], "invalid user name 'bad/name'"),
        (["table", "user", "create", "alice"], "Catalog user already exists: alice"),
        (["table", "user", "create", "bob", "--policy", "{tmp}/bad.json"], "the policy is not valid JSON"),
        (["table", "user", "create", "bob", "--policy", "{tmp}/typo.json"], "s3tables:GetTabel"),
        (["table", "user", "create", "bob", "--policy", "{tmp}/binary.json"], "is not UTF-8 text"),
        (["table", "user", "create", "bob", "--policy", "{tmp}/missing.json"], "No such file or directory"),
        (["table", "user", "remove", "nobody"], "Catalog user does not exist: nobody"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_and_changes_nothing(
    config: Path, tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.json").write_text('{"Statement": [')
    typo = {"Statement": {"Effect": "Allow", "Action": "s3tables:GetTabel", "Resource": "*"}}
    (tmp_path / "typo.json").write_text(json.dumps(typo))
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe{}")
    setups = [["warehouse", "create", "lake"], ["namespace", "create", "lake", "ns"],
              ["create", "lake", "ns", "t", "--schema", SCHEMA], ["user", "create", "alice"]]  # fmt: skip
    for setup in setups:
        assert run(config, "table", *setup) == 0
    before = state(config)
    capsys.readouterr()
    assert run(config, *(arg.replace("{tmp}", str(tmp_path)) for arg in args)) == 2
    err = capsys.readouterr().err.splitlines()
    errors = [line for line in err if not line.startswith("note: ")]
    assert len(errors) == 1 and errors[0].startswith("error: ") and message in errors[0], err
    assert state(config) == before


# -- against a running server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """No per-token request limit, which the commands here, one after another, would pass."""
    return {"SHARING_LIMITS_PER_TOKEN_RPS": "0"}


def remote(server: Deployment, *args: str) -> int:
    return main(["--server", server.server.url, "--admin-token", ADMIN_TOKEN, *args])


def test_the_server_option_goes_through_the_catalog_api(
    server: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    assert remote(server, "table", "warehouse", "create", "myminio", "remote") == 0
    assert remote(server, "table", "namespace", "create", "remote", "sales") == 0
    assert remote(server, "table", "namespace", "create", "remote", "sales.eu") == 0
    schema = SCHEMA.replace('"timestamptz"', '"string"')
    assert remote(server, "table", "create", "remote", "sales.eu", "orders", "--schema", schema,
                  "--format-version", "2", "--partition", "id:bucket[4]") == 0  # fmt: skip
    capsys.readouterr()
    assert remote(server, "table", "warehouse", "list") == 0
    assert "remote" in capsys.readouterr().out.splitlines()
    assert remote(server, "table", "namespace", "list", "remote", "--parent", "sales") == 0
    assert capsys.readouterr().out == "sales.eu\n"
    assert remote(server, "table", "list", "remote", "sales.eu") == 0
    assert capsys.readouterr().out == "orders\n"

    # A client writes a snapshot through the same API; info then shows it.
    catalog = RestCatalog(
        "remote", uri=f"{server.server.url}/_iceberg", warehouse="remote", token=ADMIN_TOKEN
    )
    table = catalog.load_table(("sales", "eu", "orders"))
    arrow = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.string()),
                       pa.field("name", pa.string())])  # fmt: skip
    table.append(pa.Table.from_pylist([{"id": i, "ts": "x", "name": f"n{i}"} for i in range(10)], arrow))
    assert remote(server, "table", "info", "remote", "sales.eu", "orders") == 0
    info = capsys.readouterr().out
    assert "Format version:   2\n" in info and "bucket[4](id)" in info
    assert "  operation: append\n" in info and "  added-records: 10\n" in info
    assert "Snapshots:        1\n" in info
    location = location_in(info)
    assert any(p.suffix == ".parquet" for p in files_under(location))

    assert remote(server, "table", "remove", "remote", "sales.eu", "orders", "--purge") == 0
    assert files_under(location) == []  # data, manifests and metadata alike
    assert remote(server, "table", "namespace", "remove", "remote", "sales") == 2
    assert capsys.readouterr().err == "error: Namespace is not empty: sales holds namespace sales.eu\n"
    assert remote(server, "table", "namespace", "create", "nowh", "ns") == 2
    assert capsys.readouterr().err == "error: Warehouse does not exist: nowh\n"
    assert remote(server, "table", "warehouse", "defaults", "remote", "--set", "format-version=3") == 0
    assert capsys.readouterr().out == "format-version=3\n"
    assert remote(server, "table", "warehouse", "defaults", "remote", "--unset", "format-version") == 0
    assert "no table defaults" in capsys.readouterr().out
    assert remote(server, "table", "user", "create", "alice") == 2
    assert "managed on the store only" in capsys.readouterr().err
    assert (
        main(["--server", server.server.url, "--admin-token", "dsa_wrong", "table", "warehouse", "list"]) == 2
    )
    assert "bearer token is not valid" in capsys.readouterr().err


def test_a_table_of_an_own_warehouse_is_shared_without_a_catalogs_block(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output(config, capsys, "table", "warehouse", "create", "analytics")
    output(config, capsys, "table", "namespace", "create", "analytics", "sales")
    output(config, capsys, "table", "create", "analytics", "sales", "orders", "--schema", SCHEMA)
    shared = output(config, capsys, "share", "create", "s", "sales", "orders:uniform:analytics:sales:orders")
    assert "Created share 's' with 1 table(s)." in shared
    capsys.readouterr()
    assert run(config, "share", "create", "t", "sales", "gone:uniform:analytics:sales:gone") == 2
    assert "no Iceberg table sales.gone in warehouse 'analytics'" in capsys.readouterr().err


def test_the_cli_goes_through_the_catalogs_location_and_bucket_rules(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The provider's CLI meets the rules HTTP callers meet: where a table lives, what is a warehouse."""
    buckets = config.parent / "buckets"
    (buckets / "deltalake" / "events" / "_delta_log").mkdir(parents=True)  # a bucket that is no warehouse
    assert run(config, "table", "warehouse", "create", "deltalake") == 2
    assert "bucket deltalake already exists in the storage and is not a warehouse" in capsys.readouterr().err
    assert output(config, capsys, "table", "warehouse", "create", "deltalake", "--adopt") == (
        "Adopted bucket as warehouse 'deltalake'.\n"
    )
    run(config, "table", "warehouse", "create", "analytics")
    run(config, "table", "namespace", "create", "analytics", "sales")
    before = state(config)
    for location in (f"{(buckets / 'deltalake' / 'events').as_uri()}", f"{(buckets / 'analytics').as_uri()}",
                     f"{(buckets / 'analytics' / 'sales' / 't').as_uri()}#"):  # fmt: skip
        capsys.readouterr()
        assert run(config, "table", "create", "analytics", "sales", "t", "--schema", SCHEMA,
                   "--location", location) == 2  # fmt: skip
        assert "table location" in capsys.readouterr().err
    assert run(config, "table", "create", "analytics", "sales", "x.y", "--schema", SCHEMA) == 2
    assert "invalid table name 'x.y'" in capsys.readouterr().err
    assert state(config) == before
