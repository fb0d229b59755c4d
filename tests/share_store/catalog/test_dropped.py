"""Dropped tables on SQLite and PostgreSQL: a drop without purge keeps the table, its folder claimed
and its name free; a take-over, an undrop and a purge of one dropped table can never all happen.

The end-to-end attack and the owner's side through the server are in
tests/end_to_end/test_catalog_hostile_dropped.py; these are the races and rules the catalog itself
must keep, whatever calls it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from share_store.catalog import table_pointers
from share_store.catalog.catalog import NewTable, WarehouseCatalog
from share_store.catalog.errors import (
    AlreadyExists,
    CommitConflict,
    NoSuchNamespace,
    NoSuchTable,
    NotEmpty,
)
from share_store.catalog.locations import LocationRefused
from share_store.catalog.names import TableName
from share_store.persistence.mappers import utc_now

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
T = TableName.of("whs", ("ns",), "t")


def anyone(name: TableName) -> bool:
    return True


def files_of(catalog: WarehouseCatalog, location: str) -> list[Path]:
    folder = Path(location.removeprefix("file://"))
    return [path for path in folder.rglob("*") if path.is_file()]


def test_a_dropped_tables_folder_is_its_own_and_its_name_is_free(catalog: WarehouseCatalog) -> None:
    made = catalog.create_table(T, NewTable(SCHEMA))
    assert made.location is not None
    catalog.drop_table(T)
    assert not catalog.table_exists(T) and catalog.list_tables("whs", ("ns",)) == []
    with pytest.raises(NoSuchTable):
        catalog.load_table(T)
    # Its folder: refused to a caller who may not take it (and the catalog's own callers), at the
    # create and at a register of its metadata alike.
    other = TableName.of("whs", ("ns",), "other")
    with pytest.raises(LocationRefused, match="overlaps another table's location"):
        catalog.create_table(other, NewTable(SCHEMA, location=made.location.uri))
    with pytest.raises(LocationRefused, match="overlaps another table's location"):
        catalog.register_table(other, str(made.metadata_location))
    # A part of it, even to one who may take it: the rest would be left to anyone.
    with pytest.raises(LocationRefused):
        catalog.create_table(other, NewTable(SCHEMA, location=f"{made.location.uri}/inside"), anyone)
    # Its name: free for a new table, in a folder of its own.
    again = catalog.create_table(T, NewTable(SCHEMA))
    assert again.location is not None and again.location != made.location
    (dropped,) = catalog.list_dropped("whs", ("ns",))
    assert dropped.name == T and dropped.purge_after - dropped.dropped_at == timedelta(days=7)
    with pytest.raises(AlreadyExists):
        catalog.undrop([(T, None)])
    # Taken by one who may: the dropped table is gone, its files the new table's.
    taken = catalog.register_table(other, str(made.metadata_location), may_take=anyone)
    assert taken.location == made.location and catalog.list_dropped("whs", ("ns",)) == []
    assert files_of(catalog, made.location.uri)


def test_a_commit_decided_before_the_drop_does_not_land_on_the_dropped_table(
    catalog: WarehouseCatalog,
) -> None:
    catalog.create_table(T, NewTable(SCHEMA))
    with catalog.transactions.read() as conn:
        before = table_pointers.table_pointer(conn, "whs", ("ns",), "t")
    catalog.drop_table(T)
    with pytest.raises(CommitConflict), catalog.transactions.change() as conn:
        table_pointers.swap_table_pointer(conn, before, "file:///elsewhere.metadata.json")
    catalog.undrop([(T, None)])
    assert catalog.load_table(T).metadata_location == before.metadata_location


def test_undrop_needs_its_namespace_and_brings_back_the_chosen_one(catalog: WarehouseCatalog) -> None:
    first = catalog.create_table(T, NewTable(SCHEMA))
    catalog.drop_table(T)
    catalog.create_table(T, NewTable(SCHEMA))
    catalog.drop_table(T)
    latest, oldest = catalog.list_dropped("whs", ("ns",))
    catalog.drop_namespace("whs", ("ns",))  # dropped tables do not hold it
    assert [d.id for d in catalog.list_dropped("whs", ("ns",))] == [latest.id, oldest.id]
    with pytest.raises(NoSuchNamespace):
        catalog.undrop([(T, oldest.id)])
    catalog.create_namespace("whs", ("ns",), {})
    with pytest.raises(NoSuchTable):
        catalog.undrop([(T, "no-such-id")])
    catalog.undrop([(T, oldest.id)])
    assert catalog.load_table(T).metadata_location == first.metadata_location
    with pytest.raises(AlreadyExists):  # all or none: the second is refused, so is the first
        catalog.undrop([(TableName.of("whs", ("ns",), "t"), latest.id)])
    assert [d.id for d in catalog.list_dropped("whs", ("ns",))] == [latest.id]


def test_the_purge_waits_for_the_retention_and_takes_the_whole_folder(catalog: WarehouseCatalog) -> None:
    made = catalog.create_table(T, NewTable(SCHEMA))
    assert made.location is not None
    stray = Path(made.location.uri.removeprefix("file://")) / "data" / "left-by-an-engine.parquet"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"x")
    catalog.drop_table(T)
    assert catalog.purge_expired(utc_now() + timedelta(days=6)) == []
    assert files_of(catalog, made.location.uri)
    catalog.update_warehouse_properties("whs", [], {"dropped-table-retention-seconds": "3600"})
    assert catalog.purge_expired(utc_now() + timedelta(hours=2)) == [T]
    assert files_of(catalog, made.location.uri) == [] and catalog.list_dropped("whs", ("ns",)) == []
    # The folder is free now, and the warehouse empty once its namespace is.
    catalog.create_table(T, NewTable(SCHEMA, location=made.location.uri))
    catalog.drop_table(T, purge=True)
    catalog.drop_namespace("whs", ("ns",))
    catalog.drop_warehouse("whs")


def test_a_purge_begun_can_be_neither_undropped_nor_taken_over(
    catalog: WarehouseCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = catalog.create_table(T, NewTable(SCHEMA))
    assert made.location is not None
    catalog.drop_table(T)
    with catalog.transactions.read() as conn:
        (pointer,) = table_pointers.dropped_tables(conn, "whs")  # read as a take-over reads it: dropped
    with catalog.transactions.change() as conn:
        assert table_pointers.begin_purge(conn, pointer)  # as `purge_expired` does before deleting files
    with pytest.raises(NoSuchTable):
        catalog.undrop([(T, None)])
    with pytest.raises(LocationRefused):
        catalog.register_table(TableName.of("whs", ("ns",), "u"), str(made.metadata_location), False, anyone)
    # A take-over that read the table before the purge began is refused in its own transaction.
    monkeypatch.setattr(catalog.locations, "claims", lambda *args, **kwargs: [(pointer, [made.location])])
    with pytest.raises(LocationRefused), catalog.transactions.change() as conn:
        catalog.locations.claim(conn, "whs", made.location, may_take=anyone)
    with catalog.transactions.read() as conn:
        assert [p.id for p in table_pointers.dropped_tables(conn, "whs", purging=True)] == [pointer.id]


def test_a_dropped_table_is_not_a_namespaces_but_is_its_warehouses(catalog: WarehouseCatalog) -> None:
    catalog.create_table(T, NewTable(SCHEMA))
    catalog.drop_table(T)
    catalog.drop_namespace("whs", ("ns",))
    with pytest.raises(NotEmpty, match=r"holds dropped table ns\.t"):
        catalog.drop_warehouse("whs")
