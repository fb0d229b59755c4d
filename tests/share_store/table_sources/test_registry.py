"""`[catalogs.NAME]` blocks: checked when the configuration is read, and told in one line.

A bad catalog setting (an unknown type, a missing uri, a nested table, a typo),
a driver that is not installed or a catalog that does not load is one
`error: …` line naming the catalog and the key or module, exit status 2, at
`serve` and at `share create/update`: never a traceback, never a value.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from share_store.errors import CatalogError
from share_store.table_sources.installed import check_installed
from share_store.table_sources.registry import CatalogRegistry
from share_store.table_sources.settings import CATALOG_TYPES, catalog_settings
from sharing_server.cli import main
from sharing_server.config import CONFIG_VARIABLE, load_config
from sharing_server.http.errors import ConfigError

README = Path(__file__).resolve().parents[3] / "README.md"


def write_config(tmp_path: Path, catalogs: str) -> Path:
    path = tmp_path / "sharing.toml"
    path.write_text(
        f'[server]\ndata_dir = "{tmp_path / "data"}"\n'
        f'[storage]\ntype = "local"\nroot = "{tmp_path / "buckets"}"\n' + catalogs
    )
    return path


BAD_BLOCKS = [
    # (the block, what the one line must say)
    ('type = "restt"\nuri = "http://x"', "[catalogs.wh] type: 'restt' is not a catalog type"),
    ('type = "rest"', "[catalogs.wh] uri: missing, and a rest catalog needs it"),
    ('type = "sql"\nwarehouse = "file:///w"', "[catalogs.wh] uri: missing, and a sql catalog needs it"),
    ('type = "bigquery"', "[catalogs.wh] gcp.bigquery.project-id: missing"),
    ('warehouse = "s3://lake/"', "[catalogs.wh] has neither type nor uri: set type"),
    ('uri = "mysql+pymysql://db/ice"', "[catalogs.wh] has no type, and its uri tells none: set type"),
    (
        'type = "rest"\nuri = "http://x"\n[catalogs.wh.auth]\ntype = "basic"',
        "[catalogs.wh] type: a block written in the documented grammar (backend, auth, storage) may not mix",
    ),
    (
        'type = "rest"\nuri = "http://x"\n[catalogs.wh.backend]\ntype = "sql"',
        "may not mix in pyiceberg's keys",
    ),
    ('type = "rest"\nuri = "http://x"\ns3.endpoint = "http://y"', 'must be quoted: "s3.endpoint" = …'),
    ('type = "rest"\nuri = "http://x"\nauth = "basic"', "[catalogs.wh] auth: pyiceberg takes it as a nested"),
    ('type = "rest"\nuir = "http://x"', "[catalogs.wh] uir: unknown setting (did you mean uri?)"),
    (
        'type = "sql"\nuri = "sqlite:///x"\nwarehose = "file:///w"',
        "warehose: unknown setting (did you mean warehouse?)",
    ),
    ('type = "rest"\nuri = "http://x"\n"sharing.warehouse" = "*"', "sharing.warehouse: unknown setting"),
    (
        'type = "rest"\nuri = "http://x"\n"sharing.warehouses" = ["a", "b"]',
        "sharing.warehouses: must be a string",
    ),
    ('type = "rest"\nuri = "http://x"\n"py-catalog-impl" = "a.B"', "type, py-catalog-impl: set one of them"),
]


@pytest.mark.parametrize(("block", "said"), BAD_BLOCKS)
def test_a_bad_catalog_block_is_refused_when_the_config_is_read(
    tmp_path: Path, block: str, said: str
) -> None:
    path = write_config(tmp_path, f"[catalogs.wh]\n{block}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert said in raised.value.message
    assert "\n" not in raised.value.message


def test_the_grammars_tables_beside_pyicebergs_keys_are_a_mixed_block(tmp_path: Path) -> None:
    """`backend`, `auth` and `storage` are the documented grammar's (test_grammar.py), not pyiceberg's."""
    for key in ("auth", "backend", "storage"):
        path = write_config(
            tmp_path, f'[catalogs.wh]\ntype = "rest"\nuri = "http://x"\n[catalogs.wh.{key}]\na = "b"\n'
        )
        with pytest.raises(ConfigError) as raised:
            load_config(path)
        assert raised.value.message == (
            "[catalogs.wh] type: a block written in the documented grammar (backend, auth, storage) "
            "may not mix in pyiceberg's keys (the backend's type goes in [catalogs.wh.backend])"
        )
    path = write_config(
        tmp_path, '[catalogs.wh]\ntype = "rest"\nuri = "http://x"\n[catalogs.wh.ssl]\na = "b"\n'
    )
    with pytest.raises(ConfigError, match=r"\[catalogs.wh.ssl\]: nested tables are not supported"):
        load_config(path)


def test_settings_that_work_are_kept_as_the_strings_pyiceberg_takes() -> None:
    props = catalog_settings(
        "wh",
        {
            "uri": "https://catalog.example.com",  # a REST catalog, told by its uri
            "warehouse": "lake",
            "credential": "${CLIENT}:${SECRET}",
            "rest.sigv4-enabled": True,
            "header.X-Iceberg-Access-Delegation": "vended-credentials",
            "s3.connect-timeout": 5,
            "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
            "sharing.warehouses": "*",
        },
    )
    assert props["rest.sigv4-enabled"] == "true" and props["s3.connect-timeout"] == "5"
    assert catalog_settings("own", {"py-catalog-impl": "my.Catalog", "anything.dotted": "x"})


def test_catalog_types_are_pyiceberg_s() -> None:
    from pyiceberg.catalog import CatalogType

    assert set(CATALOG_TYPES) == {kind.value for kind in CatalogType}


def readme_catalog_blocks() -> dict[str, dict]:
    section = README.read_text().split("## Iceberg tables", 1)[1].split("\n## ", 1)[0]
    blocks: dict[str, dict] = {}
    for text in re.findall(r"```toml\n(.*?)```", section, re.S):
        blocks |= tomllib.loads(text).get("catalogs", {})
    return blocks


def test_the_readme_catalog_examples_are_accepted_and_their_drivers_installed(tmp_path: Path) -> None:
    blocks = readme_catalog_blocks()
    assert {"aistor", "sqlwh"} <= set(blocks)
    for name, block in blocks.items():
        props = catalog_settings(name, block)
        check_installed(name, props)  # the SQL example's driver comes with the server
    assert "mysql+pymysql://" in README.read_text() and "table-sharing-server[mysql]" in README.read_text()


def test_a_missing_driver_is_named_with_the_extra_that_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)  # not installed, whatever this machine has
    registry = CatalogRegistry({"my": {"type": "sql", "uri": "mysql+pymysql://u:hunter2@db/ice"}})
    with pytest.raises(CatalogError) as raised:
        registry.catalog("my")
    message = raised.value.message
    assert message.startswith("[catalogs.my] uri: mysql+pymysql:// needs the module 'pymysql'")
    assert "pip install 'table-sharing-server[mysql]'" in message and "hunter2" not in message
    with pytest.raises(CatalogError, match=r"the module 'psycopg2'.*postgresql\+psycopg://"):
        CatalogRegistry({"pg": {"type": "sql", "uri": "postgresql+psycopg2://db/ice"}}).catalog("pg")


class ExplodingCatalog:
    """A catalog class that fails as a misconfigured one may, quoting its properties."""

    def __init__(self, name: str, **properties: str) -> None:
        raise ValueError(f"cannot start with {properties}")


def test_a_catalog_that_does_not_load_is_named_without_its_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_CATALOG_SECRET", "s3cr3t-value")
    registry = CatalogRegistry(
        {
            "odd": {
                "py-catalog-impl": f"{__name__}.ExplodingCatalog",
                "uri": "postgresql://iceberg:hunter2@db/ice",
                "client.secret-access-key": "${TEST_CATALOG_SECRET}",
            }
        }
    )
    with pytest.raises(CatalogError) as raised:
        registry.catalog("odd")
    message = raised.value.message
    assert message.startswith("the Iceberg catalog 'odd' cannot load: ValueError: cannot start with")
    assert "hunter2" not in message and "s3cr3t-value" not in message and "\n" not in message


def test_an_unset_variable_names_the_catalog_and_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_UNSET_VARIABLE", raising=False)
    registry = CatalogRegistry(
        {
            "wh": {
                "type": "rest",
                "uri": "http://127.0.0.1:9",
                "client.secret-access-key": "${TEST_UNSET_VARIABLE}",
            }
        }
    )
    expected = "[catalogs.wh] client.secret-access-key: refers to ${TEST_UNSET_VARIABLE}, which is not set"
    with pytest.raises(CatalogError) as raised:
        registry.verify()
    assert raised.value.message == expected


# -- the CLI ------------------------------------------------------------------------


def test_share_create_with_a_bad_catalog_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, '[catalogs.wh]\ntype = "nessie"\nuri = "http://127.0.0.1:9"\n')
    code = main(["--config", str(config), "share", "create", "s", "sch", "t:uniform:wh:ns:t"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: [catalogs.wh] type: 'nessie' is not a catalog type")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_share_create_with_a_catalog_whose_driver_is_missing_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)
    config = write_config(tmp_path, '[catalogs.wh]\ntype = "sql"\nuri = "mysql+pymysql://u:pw@db/ice"\n')
    code = main(["--config", str(config), "share", "create", "s", "sch", "t:uniform:wh:ns:t"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "[catalogs.wh] uri" in err and "'pymysql'" in err and "table-sharing-server[mysql]" in err


@pytest.fixture
def never_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` must stop before serving; the environment it sets for workers is put back."""
    import hypercorn.asyncio

    async def served(*args: object, **kwargs: object) -> None:
        raise AssertionError("the server started")

    monkeypatch.setattr(hypercorn.asyncio, "serve", served)
    monkeypatch.setenv(CONFIG_VARIABLE, "")


@pytest.mark.parametrize(
    ("block", "said"),
    [
        ('type = "rest"\n', "error: [catalogs.wh] uri: missing, and a rest catalog needs it"),
        (
            'type = "sql"\nuri = "mysql+pymysql://db/ice"\n',
            "error: [catalogs.wh] uri: mysql+pymysql:// needs",
        ),
        (
            'type = "rest"\nuri = "http://127.0.0.1:9"\n'
            '"client.secret-access-key" = "${TEST_UNSET_VARIABLE}"\n',
            "error: [catalogs.wh] client.secret-access-key: refers to ${TEST_UNSET_VARIABLE}",
        ),
    ],
)
def test_serve_with_a_bad_catalog_stops_at_start_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    never_served: None,
    block: str,
    said: str,
) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)
    monkeypatch.delenv("TEST_UNSET_VARIABLE", raising=False)
    config = write_config(tmp_path, f"[catalogs.wh]\n{block}")
    assert main(["--config", str(config), "serve"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(said) and len(err.strip().splitlines()) == 1, err


# -- converted once -------------------------------------------------------------------------------


def test_the_registry_takes_the_blocks_the_configuration_converted(tmp_path: Path) -> None:
    """`hadoop` and `s3tables` blocks become `sharing.backend` when the file is read; the registry
    made from that configuration checks them again and must take them as they are."""
    from share_store.table_sources.hadoop import HadoopCatalog

    warehouse = tmp_path / "buckets" / "lake" / "wh"
    warehouse.mkdir(parents=True)
    path = write_config(
        tmp_path,
        '[catalogs.files]\ncatalog_url = ""\n[catalogs.files.backend]\ntype = "hadoop"\n'
        f'warehouse = "{warehouse}"\n'
        '[catalogs.tables]\ncatalog_url = ""\n[catalogs.tables.backend]\ntype = "s3tables"\n'
        'table_bucket_arn = "arn:aws:s3tables:eu-west-2:111122223333:bucket/b"\n',
    )
    config = load_config(path)
    assert config.catalogs["files"] == {"sharing.backend": "hadoop", "warehouse": str(warehouse)}
    registry = config.make_catalogs()
    assert registry.configs == config.catalogs
    assert isinstance(registry.catalog("files"), HadoopCatalog)
    assert [(e["name"], e["backend"]) for e in registry.health()] == [
        ("files", "hadoop"),
        ("tables", "s3tables"),
    ]


def test_share_create_of_a_hadoop_table_in_the_documented_grammar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the CLI as a provider runs it: the block converted when the file is read reaches the
    registry that checks the table (it failed there: `has neither type nor uri`)."""
    from tests.share_store.table_sources.test_hadoop import write_metadata

    warehouse = tmp_path / "buckets" / "lake" / "wh"
    write_metadata(warehouse / "db" / "t", 1)
    config = write_config(tmp_path, f'[catalogs.files.backend]\ntype = "hadoop"\nwarehouse = "{warehouse}"\n')
    assert main(["--config", str(config), "share", "create", "s", "db", "t:uniform:files:db:t"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "Created share 's' with 1 table(s)." and err == ""
