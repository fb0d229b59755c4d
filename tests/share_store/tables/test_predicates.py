"""jsonPredicateHints: parsing limits and three-valued evaluation on ranges."""

from __future__ import annotations

import json

import pytest

from share_store.tables.actions import FileEntry
from share_store.tables.compiled_hints import matches_hint
from share_store.tables.predicates import parse_hint


def col(name: str, value_type: str = "int") -> dict:
    return {"op": "column", "name": name, "valueType": value_type}


def lit(value: str, value_type: str = "int") -> dict:
    return {"op": "literal", "value": value, "valueType": value_type}


def op(name: str, *children: dict) -> dict:
    return {"op": name, "children": list(children)}


def entry(
    partition: dict | None = None, low: int | None = 10, high: int | None = 20, nulls: int = 0
) -> FileEntry:
    action = {"path": "f", "size": 1, "partitionValues": partition or {}}
    if low is not None:
        stats = {
            "numRecords": 5,
            "minValues": {"x": low},
            "maxValues": {"x": high},
            "nullCount": {"x": nulls},
        }
        action["stats"] = json.dumps(stats)
    return FileEntry(action, tuple(partition or ()))


def keeps(tree: dict, file: FileEntry) -> bool:
    return matches_hint(parse_hint(json.dumps(tree)), file)


@pytest.mark.parametrize(
    ("tree", "kept"),
    [
        (op("equal", col("x"), lit("15")), True),
        (op("equal", col("x"), lit("25")), False),
        (op("lessThan", col("x"), lit("10")), False),
        (op("lessThan", col("x"), lit("11")), True),
        (op("lessThanOrEqual", col("x"), lit("10")), True),
        (op("greaterThan", col("x"), lit("20")), False),
        (op("greaterThanOrEqual", col("x"), lit("20")), True),
        (op("greaterThan", lit("10"), col("x")), False),  # literal on the left mirrors
        (op("not", op("equal", col("x"), lit("15"))), True),  # unknown stays unknown
        (op("not", op("lessThan", col("x"), lit("30"))), False),  # all rows < 30, so NOT prunes
        (op("and", op("equal", col("x"), lit("15")), op("equal", col("x"), lit("99"))), False),
        (op("or", op("equal", col("x"), lit("1")), op("equal", col("x"), lit("99"))), False),
        (op("or", op("equal", col("x"), lit("1")), op("equal", col("x"), lit("12"))), True),
        (op("isNull", col("x")), False),
        (op("equal", col("unknown_column"), lit("1")), True),
    ],
)
def test_stats_ranges(tree: dict, kept: bool) -> None:
    assert keeps(tree, entry()) is kept


def test_nulls_make_comparisons_uncertain() -> None:
    assert keeps(op("not", op("lessThan", col("x"), lit("30"))), entry(nulls=1)) is True
    assert keeps(op("isNull", col("x")), entry(nulls=1)) is True


def test_partition_values() -> None:
    file = entry(partition={"d": "2021-04-28", "s": None}, low=None)
    assert keeps(op("equal", col("d", "date"), lit("2021-04-28", "date")), file)
    assert not keeps(op("greaterThan", col("d", "date"), lit("2021-04-28", "date")), file)
    assert keeps(op("isNull", col("s", "string")), file)
    assert not keeps(op("not", op("isNull", col("s", "string"))), file)
    assert not keeps(op("equal", col("s", "string"), lit("a", "string")), file)


def test_files_without_stats_are_kept() -> None:
    assert keeps(op("equal", col("x"), lit("99")), entry(low=None))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        json.dumps({"op": "bogus"}),
        json.dumps(op("equal", col("x"))),
        json.dumps(op("equal", col("x", "int"), lit("a", "string"))),
        json.dumps(op("equal", col("x"), lit("abc"))),
        json.dumps(op("and", op("equal", col("x"), lit("1")))),
    ],
)
def test_invalid_hints_are_ignored(text: str) -> None:
    assert parse_hint(text) is None


def test_depth_and_size_limits() -> None:
    tree = op("equal", col("x"), lit("1"))
    for _ in range(101):
        tree = op("not", tree)
    assert parse_hint(json.dumps(tree)) is None
    huge = op("or", *[op("equal", col("x"), lit(str(i))) for i in range(20000)])
    assert parse_hint(json.dumps(huge)) is None


def test_a_bare_column_or_literal_where_a_condition_belongs_is_unknown() -> None:
    # Valid as a tree, meaningless as a condition: it neither keeps nor skips a file by itself.
    assert keeps(op("and", col("x"), lit("1")), entry())
    assert not keeps(op("and", col("x"), op("equal", col("x"), lit("99"))), entry())
    assert keeps(op("or", lit("1"), op("equal", col("x"), lit("99"))), entry())


def _three_valued_or(results: list[bool | None]) -> bool | None:
    if True in results:
        return True
    return None if None in results else False


def _bound(kind: str, value: int, mirrored: bool) -> dict:
    """`x kind value`, or the same condition written with the literal on the left."""
    if not mirrored:
        return op(kind, col("x"), lit(str(value)))
    flipped = {"greaterThan": "lessThan", "greaterThanOrEqual": "lessThanOrEqual"}
    flipped |= {v: k for k, v in flipped.items()}
    return op(flipped[kind], lit(str(value)), col("x"))


def test_an_or_of_ranges_answers_as_its_ranges_one_by_one() -> None:
    """Merged into one set of intervals, an OR of ranges keeps its three-valued answer for every file:
    inclusive and exclusive ends, touching and overlapping ranges, nulls, missing stats, a partition value."""
    import random

    from share_store.tables.compiled_hints import compile_hint

    chooser = random.Random(16)
    files = [
        entry(low=low, high=high, nulls=nulls)
        for low in range(-1, 12)
        for high in range(low, 13)
        for nulls in (0, 1, 5)
    ]
    files += [
        entry(low=None),
        *(entry(partition={"x": str(v) if v is not None else None}, low=None) for v in (None, 0, 3, 7, 11)),
    ]
    for _ in range(300):
        ranges = []
        for _ in range(chooser.randint(2, 6)):
            low = chooser.randint(0, 10)
            high = chooser.randint(low, 11)
            lower = _bound(chooser.choice(["greaterThan", "greaterThanOrEqual"]), low, chooser.random() < 0.3)
            upper = _bound(chooser.choice(["lessThan", "lessThanOrEqual"]), high, chooser.random() < 0.3)
            ranges.append(op("and", *((lower, upper) if chooser.random() < 0.5 else (upper, lower))))
        merged = op("or", *ranges)
        for file in files:
            partitions = ["x"] if "x" in file.action["partitionValues"] else []
            one_by_one = [compile_hint(child, partitions)(file) for child in ranges]
            assert compile_hint(merged, partitions)(file) == _three_valued_or(one_by_one), (
                merged,
                file.action,
            )
            assert compile_hint(op("not", merged), partitions)(file) == (
                None if _three_valued_or(one_by_one) is None else not _three_valued_or(one_by_one)
            )


def test_ranges_merge_only_when_they_bound_one_column_from_both_sides() -> None:
    from share_store.tables.compiled_hints import _interval

    both = op("and", op("greaterThan", col("x"), lit("1")), op("lessThanOrEqual", col("x"), lit("5")))
    assert _interval(both) == (("x", "int"), ((1, 1), (5, 1)))
    assert (
        _interval(op("and", op("greaterThan", col("x"), lit("1")), op("lessThan", col("y"), lit("5"))))
        is None
    )
    assert (
        _interval(op("and", op("greaterThan", col("x"), lit("1")), op("greaterThan", col("x"), lit("5"))))
        is None
    )
    assert _interval(op("and", op("equal", col("x"), lit("1")), op("lessThan", col("x"), lit("5")))) is None
    three = op("and", *both["children"], op("lessThan", col("x"), lit("9")))
    assert _interval(three) is None
