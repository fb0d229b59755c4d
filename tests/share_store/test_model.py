"""Admin spec grammar (AIStor's) and name validation."""

from __future__ import annotations

import pytest

from share_store.errors import AdminError
from share_store.model import (
    TableSpec,
    parse_create_args,
    parse_table_ref,
    validate_bucket,
    validate_name,
    validate_namespace,
    validate_warehouse,
)


def test_create_grammar_with_several_schemas() -> None:
    specs = parse_create_args(
        [
            "tpch",
            "orders:delta:testdelta:tpch/orders",
            "lineitem:delta:testdelta:tpch/li",
            "sales",
            "q1:delta:other-bucket:sales/2024/q1",
        ]
    )
    assert [(s.schema, s.name, s.bucket, s.path) for s in specs] == [
        ("tpch", "orders", "testdelta", "tpch/orders"),
        ("tpch", "lineitem", "testdelta", "tpch/li"),
        ("sales", "q1", "other-bucket", "sales/2024/q1"),
    ]


def test_update_grammar() -> None:
    spec = TableSpec.parse("tpch:orders:delta:testdelta:tpch/orders/")
    assert (spec.schema, spec.name, spec.format, spec.bucket, spec.path) == (
        "tpch",
        "orders",
        "delta",
        "testdelta",
        "tpch/orders",
    )
    assert parse_table_ref("tpch/orders") == ("tpch", "orders")


@pytest.mark.parametrize(
    "spec",
    [
        "orders",
        "tpch:orders:parquet:bucket:path",
        "tpch:orders:delta:bucket",
        "tpch:orders:delta:bucket:",
        "tpch:orders:delta:bucket:../escape",
        "tpch:orders:delta:bucket:a/../../b",
        "tpch:orders:delta:bucket:/abs/./x",
        "tpch:orders:delta:Bad_Bucket:path",
        "tpch:orders:delta:..:path",
        "tp ch:orders:delta:bucket:path",
        "tpch:or.ders:delta:bucket:path",
        "tpch::delta:bucket:path",
    ],
)
def test_bad_specs(spec: str) -> None:
    with pytest.raises(AdminError):
        TableSpec.parse(spec)


def test_uniform_grammar() -> None:
    spec = TableSpec.parse("tpch:customer:uniform:testice:tpch:customer")
    assert (spec.schema, spec.name, spec.format, spec.bucket, spec.path) == (
        "tpch",
        "customer",
        "uniform",
        "testice",
        "tpch/customer",
    )
    nested = parse_create_args(["tpch", "c:uniform:testice:db.sub:customer"])[0]
    assert nested.path == "db.sub/customer"
    for bad in (
        "tpch:c:uniform:testice:tpch",
        "tpch:c:uniform:test/ice:tpch:c",
        "tpch:c:uniform:w:a..b:c",
        "tpch:c:uniform:w:ns:bad.name",
    ):
        with pytest.raises(AdminError):
            TableSpec.parse(bad)


def test_spec_before_schema_is_an_error() -> None:
    with pytest.raises(AdminError, match="must follow a SCHEMA"):
        parse_create_args(["orders:delta:bucket:path"])


@pytest.mark.parametrize("ref", ["tpch", "tpch/", "/orders", "a/b/c"])
def test_bad_refs(ref: str) -> None:
    with pytest.raises(AdminError):
        parse_table_ref(ref)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("share", "ok\n"),
        ("bucket", "bucket\n"),
        ("warehouse", "wh\n"),
        ("namespace", "db.sub\n"),
    ],
)
def test_a_trailing_newline_is_not_part_of_a_valid_name(kind: str, value: str) -> None:
    # `$` matches before a final newline: names are matched whole, or "ok\n" would pass.
    validate = {
        "share": lambda v: validate_name("share", v),
        "bucket": validate_bucket,
        "warehouse": validate_warehouse,
        "namespace": validate_namespace,
    }[kind]
    validate(value.rstrip("\n"))
    with pytest.raises(AdminError, match="invalid"):
        validate(value)
