"""A share's namespaces and tables at the recipients' Iceberg REST catalog, and which table signs a
read (`share_store.iceberg_shares.share_tables`): the store's refusals, not the wire's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from share_store.errors import MalformedRequest, NotFound
from share_store.iceberg_shares.grants import IcebergGrants
from share_store.iceberg_shares.share_tables import ShareTables
from share_store.model import SharedTable, TableSpec
from share_store.persistence import ShareStore, sqlite_url
from share_store.readers.table_readers import TableReaders
from share_store.signing.request_signing import ObjectRequest, SigningRefused

URI = "http://store:9000/lake/sales/orders/data/x.parquet"


class Grants(IcebergGrants):
    """Grants that sign what `allowed` names a table for, refuse `refused` and fail on `broken`."""

    def __init__(
        self,
        allowed: dict[str, str],
        refused: frozenset[str] = frozenset(),
        broken: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(cast(TableReaders, None))
        self.allowed, self.refused, self.broken = allowed, refused, broken

    def signature(
        self, table: SharedTable, method: str, uri: str, headers: dict[str, list[str]], recheck: bool = False
    ) -> tuple[ObjectRequest, dict[str, list[str]]] | None:
        if table.name in self.broken:
            raise OSError("a manifest list its writer deleted")
        if table.name in self.refused:
            raise SigningRefused("the request is not addressed to this store's endpoint")
        if self.allowed.get(table.name) != uri:
            return None
        return ObjectRequest(method, "lake", "sales/orders/data/x.parquet", uri, {}), {"Authorization": ["a"]}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShareStore]:
    store = ShareStore(sqlite_url(tmp_path / "store.db"))
    specs = [
        TableSpec("sales", "orders", "iceberg", "lake", "sales/orders"),
        TableSpec("sales", "items", "iceberg", "lake", "sales/items"),
        TableSpec("hr", "people", "delta", "lake", "hr/people"),
    ]
    store.create_share("acme", specs)
    store.create_share("other", [TableSpec("sales", "secret", "iceberg", "lake", "sales/secret")])
    yield store
    store.close()


def shares(store: ShareStore, grants: IcebergGrants | None = None) -> ShareTables:
    return ShareTables(store, grants or Grants({}))


def test_the_shares_schemas_are_its_namespaces_of_one_level(store: ShareStore) -> None:
    tables = shares(store)
    assert sorted(tables.namespaces("acme")) == ["hr", "sales"]
    assert tables.namespaces("acme", "sales") == []  # a schema has no namespaces below it
    assert tables.namespace("acme", "hr") == "hr"
    with pytest.raises(NotFound, match="Namespace does not exist: nope"):
        tables.namespaces("acme", "nope")
    with pytest.raises(NotFound, match="Namespace does not exist: nope"):
        tables.namespace("acme", "nope")


def test_tables_are_the_shares_own(store: ShareStore) -> None:
    tables = shares(store)
    assert sorted(t.name for t in tables.tables("acme", "sales")) == ["items", "orders"]
    assert tables.table("acme", "sales", "orders").name == "orders"
    with pytest.raises(NotFound, match="Namespace does not exist: nope"):
        tables.tables("acme", "nope")
    with pytest.raises(NotFound, match=r"Table does not exist: sales\.secret"):
        tables.table("acme", "sales", "secret")  # another share's


def test_keys_are_refused_when_the_server_vends_none(store: ShareStore) -> None:
    tables = shares(store)
    with pytest.raises(MalformedRequest, match="vends no credentials"):
        tables.grant_to_vend(tables.table("acme", "sales", "orders"))


def test_the_table_whose_grant_allows_the_read_signs_it_and_is_noted(store: ShareStore) -> None:
    notes: dict[str, Any] = {}
    grants = Grants({"orders": URI}, refused=frozenset({"people"}), broken=frozenset({"items"}))
    uri, headers = shares(store, grants).sign("acme", "GET", URI, {}, notes)
    assert (uri, headers) == (URI, {"Authorization": ["a"]})
    assert notes == {
        "schema": "sales",
        "table": "orders",
        "signing": {"method": "GET", "object": "lake/sales/orders/data/x.parquet"},
    }


def test_a_read_no_table_of_the_share_allows_is_refused_with_why(store: ShareStore) -> None:
    notes: dict[str, Any] = {}
    grants = Grants({"secret": URI}, refused=frozenset({"people"}))  # the other share's table allows it
    with pytest.raises(SigningRefused, match="may not have that request signed: the request is not"):
        shares(store, grants).sign("acme", "GET", URI, {}, notes)
    refusal = "the request is not addressed to this store's endpoint"
    assert notes == {"signing": {"method": "GET", "refused": refusal}}


def test_a_broken_table_fails_the_read_only_when_no_other_table_signs_it(store: ShareStore) -> None:
    with pytest.raises(OSError, match="manifest list"):
        shares(store, Grants({}, broken=frozenset({"items"}))).sign("acme", "GET", URI, {}, {})
