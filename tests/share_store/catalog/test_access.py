"""Who may do what, decided in the catalog layer: each operation of `CatalogAccess` against its actions."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableRequest
from pyiceberg.types import LongType, NestedField

from share_store.catalog.access import PROVIDER, CatalogAccess, Principal
from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.commits import parse_model
from share_store.catalog.names import TableName
from share_store.catalog.policies import READ_ONLY_EXAMPLE_POLICY, parse_policy
from share_store.errors import Forbidden

SCHEMA = Schema(NestedField(1, "id", LongType()))
T = TableName.of("whs", ("ns",), "t")
ARN = "arn:aws:s3tables:::bucket/whs"


@pytest.fixture
def catalog_store() -> str:
    """Access is decided above the store: SQLite is enough."""
    return "sqlite"


@pytest.fixture
def catalog_with_t(catalog: WarehouseCatalog) -> WarehouseCatalog:
    """The folder's catalog with the v2 table `ns.t` the operations here act on."""
    catalog.create_table(T, NewTable(SCHEMA, properties={"format-version": "2"}))
    return catalog


def allowed(*statements: tuple[str, str], deny: tuple[str, str] | None = None) -> Principal:
    listed: list[dict[str, Any]] = [{"Effect": "Allow", "Action": a, "Resource": r} for a, r in statements]
    if deny is not None:
        listed.append({"Effect": "Deny", "Action": deny[0], "Resource": deny[1]})
    return Principal("alice", parse_policy(json.dumps({"Statement": listed})))


def commit(*requirements: dict[str, Any]) -> CommitTableRequest:
    body = {"identifier": {"namespace": ["ns"], "name": "t"}, "requirements": list(requirements),
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}  # fmt: skip
    return parse_model(CommitTableRequest, body, "commit")


OPERATIONS: list[tuple[str, str, str, Callable[[CatalogAccess], Any]]] = [
    ("has_warehouse", "s3tables:GetTableBucket", ARN, lambda a: a.has_warehouse("whs")),
    ("list_namespaces", "s3tables:ListNamespaces", ARN, lambda a: a.list_namespaces("whs")),
    ("load_namespace", "s3tables:GetNamespace", ARN, lambda a: a.load_namespace("whs", ("ns",))),
    ("create_namespace", "s3tables:CreateNamespace", ARN, lambda a: a.create_namespace("whs", ("n2",), {})),
    ("update_namespace", "s3tables:UpdateNamespaceProperties", ARN,
     lambda a: a.update_namespace_properties("whs", ("ns",), [], {"k": "v"})),
    ("list_tables", "s3tables:ListTables", ARN, lambda a: a.list_tables("whs", ("ns",))),
    ("create_table", "s3tables:CreateTable", f"{ARN}/table/ns/u",
     lambda a: a.create_table(TableName.of("whs", ("ns",), "u"), NewTable(SCHEMA))),
    ("load_table", "s3tables:GetTable", f"{ARN}/table/ns/t", lambda a: a.load_table(T)),
    ("commit", "s3tables:UpdateTableMetadataLocation", f"{ARN}/table/ns/t", lambda a: a.commit(T, commit())),
    ("drop_table", "s3tables:DeleteTable", f"{ARN}/table/ns/t", lambda a: a.drop_table(T)),
    ("drop_namespace", "s3tables:DeleteNamespace", ARN, lambda a: a.drop_namespace("whs", ("n0",))),
]  # fmt: skip


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op[0] for op in OPERATIONS])
def test_each_operation_needs_its_action_on_its_resource_and_a_deny_wins(
    catalog_with_t: WarehouseCatalog, operation: tuple[str, str, str, Callable[[CatalogAccess], Any]]
) -> None:
    _, action, resource, run = operation
    catalog_with_t.create_namespace("whs", ("n0",), {})
    # Allowed something else on the same resource, and this action elsewhere: refused.
    other = "s3tables:GetTableBucket" if action != "s3tables:GetTableBucket" else "s3tables:ListTables"
    with pytest.raises(Forbidden, match=action):
        run(
            CatalogAccess(
                catalog_with_t, allowed((other, resource), (action, "arn:aws:s3tables:::bucket/other*"))
            )
        )
    with pytest.raises(Forbidden):
        run(CatalogAccess(catalog_with_t, allowed(("s3tables:*", "*"), deny=(action, resource))))
    run(CatalogAccess(catalog_with_t, allowed((action, resource))))


def test_a_staged_creates_commit_needs_create_table_too(catalog_with_t: WarehouseCatalog) -> None:
    writer = CatalogAccess(catalog_with_t, allowed(("s3tables:UpdateTableMetadataLocation", "*")))
    staged = parse_model(CommitTableRequest, {
        "identifier": {"namespace": ["ns"], "name": "new"}, "requirements": [{"type": "assert-create"}],
        "updates": []}, "commit")  # fmt: skip
    with pytest.raises(Forbidden, match="CreateTable"):
        writer.commit_transaction([(TableName.of("whs", ("ns",), "new"), staged)])
    assert not catalog_with_t.table_exists(TableName.of("whs", ("ns",), "new"))


def test_loads_take_get_table_metadata_location_as_get_table(catalog_with_t: WarehouseCatalog) -> None:
    s3_tables_style = CatalogAccess(catalog_with_t, allowed(("s3tables:GetTableMetadataLocation", "*")))
    assert s3_tables_style.load_table(T).metadata_location is not None
    aistor_read_only = Principal(
        "reader", parse_policy(READ_ONLY_EXAMPLE_POLICY.replace("my-warehouse", "whs"))
    )
    assert CatalogAccess(catalog_with_t, aistor_read_only).table_exists(T)
    with pytest.raises(Forbidden):
        CatalogAccess(catalog_with_t, aistor_read_only).commit(T, commit())


def test_warehouses_are_listed_where_list_table_buckets_allows_and_adopted_by_the_provider_only(
    catalog_with_t: WarehouseCatalog,
) -> None:
    catalog_with_t.create_warehouse("other")
    lister = CatalogAccess(catalog_with_t, allowed(("s3tables:ListTableBuckets", ARN)))
    assert lister.list_warehouses() == ["whs"]
    assert CatalogAccess(catalog_with_t, allowed(("s3tables:GetTableBucket", "*"))).list_warehouses() == []
    (catalog_with_t.storage.root / "taken").mkdir()  # type: ignore[attr-defined]
    maker = CatalogAccess(catalog_with_t, allowed(("s3tables:CreateTableBucket", "*")))
    with pytest.raises(Forbidden, match="adopt"):
        maker.create_warehouse("taken", adopt=True)
    CatalogAccess(catalog_with_t, PROVIDER).create_warehouse("taken", adopt=True)
    assert "taken" in catalog_with_t.list_warehouses()
