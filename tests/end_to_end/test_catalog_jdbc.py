"""Iceberg SQL ("JDBC") catalogs on MariaDB, PostgreSQL and SQLite, with a local warehouse, shared.

pyiceberg's `SqlCatalog` keeps its catalog tables in the database and writes the table's
files into a warehouse directory inside the server's local storage root; the server
shares the table as `ns:t:uniform:jdbc:ns:t` and a recipient reads pyiceberg's rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import delta_sharing
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from share_store.model import parse_create_args
from tests.conftest import deploy
from tests.end_to_end.test_iceberg_s3 import CUSTOMER, customers
from tests.mariadb import MariaDB, start_mariadb

_databases = itertools.count(1)


@pytest.fixture(scope="module")
def mariadb() -> Iterator[MariaDB]:
    server = start_mariadb()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def mariadb_url(mariadb: MariaDB) -> Iterator[str]:
    """A fresh, empty database for this test (dropped afterwards); its SQLAlchemy URL."""
    name = f"iceberg{next(_databases)}"
    yield mariadb.create_database(name)
    mariadb.drop_database(name)


@pytest.fixture(params=["mariadb", "postgres", "sqlite"])
def catalog_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'catalog.db'}"
    return request.getfixturevalue(f"{request.param}_url")


def jdbc_url(uri: str) -> str:
    """The documented grammar's `url` for a SQLAlchemy URI: the driver is the grammar's to choose."""
    for ours, theirs in (("mysql+pymysql://", "mysql://"), ("postgresql+psycopg://", "postgresql://")):
        if uri.startswith(ours):
            return theirs + uri.removeprefix(ours)
    return "sqlite:" + uri.removeprefix("sqlite:///")  # sqlite:/abs/path.db


@pytest.mark.parametrize("form", ["pyiceberg keys", "documented grammar"])
def test_a_sql_catalog_table_is_shared_with_its_rows(catalog_uri: str, tmp_path: Path, form: str) -> None:
    root = tmp_path / "buckets"
    warehouse = root / "lake" / "wh"
    warehouse.mkdir(parents=True)
    props = {"type": "sql", "uri": catalog_uri, "warehouse": warehouse.as_uri()}
    writer = SqlCatalog("jdbc", **{k: v for k, v in props.items() if k != "type"})
    writer.create_namespace("ns")
    table = writer.create_table("ns.t", CUSTOMER, properties={"format-version": "2"})
    table.append(customers(1, 5).cast(table.schema().as_arrow()))
    table.append(customers(6, 3).cast(table.schema().as_arrow()))
    table = writer.load_table("ns.t")
    assert table.format_version == 2 and len(table.metadata.snapshots) == 2
    expected = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["custkey"])
    writer.engine.dispose()

    block: dict[str, object] = dict(props)
    if form == "documented grammar":
        block = {"backend": {"type": "jdbc"}, "url": jdbc_url(catalog_uri), "warehouse": warehouse.as_uri()}
    deployment = deploy(tmp_path, {"type": "local", "root": str(root)}, catalogs={"jdbc": block})
    try:
        deployment.store.create_share("j", parse_create_args(["ns", "t:uniform:jdbc:ns:t"]))
        profile = deployment.profile("j")
        shared = delta_sharing.load_as_pandas(f"{profile}#j.ns.t")
        assert sorted(shared.to_dict("records"), key=lambda r: r["custkey"]) == expected
        first = delta_sharing.load_as_pandas(f"{profile}#j.ns.t", version=0)
        assert sorted(first["custkey"]) == [1, 2, 3, 4, 5]
    finally:
        deployment.server.stop()
        deployment.store.close()
        catalog = deployment.catalogs.catalog("jdbc")
        if hasattr(catalog, "engine"):
            catalog.engine.dispose()  # before the database is dropped
