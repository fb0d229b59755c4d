"""File verdicts and derived files, held to the rows themselves.

For many random files and filters: a file judged "all" from its statistics has
every row passing when its rows are evaluated, a file judged "none" has none,
and a derived file holds exactly the rows a direct filter of the source keeps,
in the served columns only (deleted rows dropped first).
"""

from __future__ import annotations

import io
import json
import random
from datetime import date, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from share_store.restrictions import row_filters
from share_store.restrictions.arrow_filters import row_expression
from share_store.restrictions.column_types import table_columns
from share_store.restrictions.derivation import derive
from share_store.restrictions.file_verdicts import file_facts, verdict
from share_store.restrictions.restriction import Audience, TableRestriction, bind

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "nation", "type": "string", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
            {"name": "score", "type": "double", "nullable": True, "metadata": {}},
            {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
NATIONS = ["JAPAN", "FRANCE", "PERU", "CHAD", None]
START = date(2024, 1, 1)


def random_file(rng: random.Random) -> pa.Table:
    rows = rng.randint(1, 40)
    low = rng.randint(-20, 20)
    nations = rng.sample(NATIONS, rng.randint(1, len(NATIONS)))
    return pa.table(
        {
            "id": [None if rng.random() < 0.1 else rng.randint(low, low + 10) for _ in range(rows)],
            "nation": [rng.choice(nations) for _ in range(rows)],
            "day": [START + timedelta(days=rng.randint(0, 5)) for _ in range(rows)],
            "score": [rng.choice([None, float("nan"), rng.uniform(-5, 5)]) for _ in range(rows)],
        },
        schema=pa.schema(
            [("id", pa.int64()), ("nation", pa.string()), ("day", pa.date32()), ("score", pa.float64())]
        ),
    )


def delta_stats(table: pa.Table) -> dict[str, Any]:
    stats: dict[str, Any] = {"numRecords": table.num_rows, "minValues": {}, "maxValues": {}, "nullCount": {}}
    for name in table.column_names:
        column = table.column(name)
        stats["nullCount"][name] = column.null_count
        if column.null_count < len(column):
            found = pc.min_max(column)
            low, high = found["min"].as_py(), found["max"].as_py()
            stats["minValues"][name] = low.isoformat() if isinstance(low, date) else low
            stats["maxValues"][name] = high.isoformat() if isinstance(high, date) else high
    return stats


def random_filter(rng: random.Random, depth: int = 0) -> str:
    if depth < 2 and rng.random() < 0.5:
        joiner = rng.choice(["AND", "OR"])
        text = f"({random_filter(rng, depth + 1)} {joiner} {random_filter(rng, depth + 1)})"
        return f"NOT {text}" if rng.random() < 0.2 else text
    column = rng.choice(["id", "nation", "day", "region", "score"])
    op = rng.choice(["=", "<>", "<", "<=", ">", ">="])
    if column == "id":
        return rng.choice(
            [f"id {op} {rng.randint(-25, 30)}", f"id BETWEEN {rng.randint(-25, 5)} AND {rng.randint(0, 30)}",
             "id IS NULL", "id IS NOT NULL", f"id IN ({rng.randint(-20, 30)}, {rng.randint(-20, 30)})"]
        )  # fmt: skip
    if column == "nation":
        name = rng.choice([n for n in NATIONS if n])
        return rng.choice(
            [f"nation {op} '{name}'", f"nation LIKE '{name[0]}%'", "nation IS NULL",
             f"nation IN ('{name}', 'PERU')", "nation = CURRENT_RECIPIENT('nation')"]
        )  # fmt: skip
    if column == "day":
        return f"day {op} DATE '{(START + timedelta(days=rng.randint(-1, 6))).isoformat()}'"
    if column == "score":
        return f"score {op} {rng.uniform(-5, 5):.2f}"
    return rng.choice([f"region {op} 'emea'", "region IS NULL", "region IN ('us', 'apac')"])


@pytest.mark.parametrize("seed", range(12))
def test_verdicts_never_claim_what_the_rows_deny_and_derived_files_hold_exactly_the_rows(seed: int) -> None:
    rng = random.Random(seed)
    columns = table_columns(SCHEMA)
    judged = {"all": 0, "none": 0, "some": 0}
    for _ in range(40):
        source = random_file(rng)
        region = rng.choice(["emea", "us", None])
        text = random_filter(rng)
        served = tuple(rng.sample(["id", "nation", "day", "score"], rng.randint(1, 4)))
        served += ("region",) if rng.random() < 0.5 else ()
        bound = bind(TableRestriction(text, served), SCHEMA, Audience("acme", {"nation": "PERU"}))
        assert bound.predicate is not None
        constants = {"region": region}
        expected = source.filter(row_expression(bound.predicate, columns, source.schema, constants))
        names = row_filters.column_names(bound.predicate)
        facts = file_facts(columns, ["region"], {"region": region}, delta_stats(source), names)
        found = verdict(bound.predicate, facts)
        judged[found] += 1
        if found == "all":
            assert expected.num_rows == source.num_rows, text
        if found == "none":
            assert expected.num_rows == 0, text
        buffer = io.BytesIO()
        pq.write_table(source, buffer)
        deleted = set(rng.sample(range(source.num_rows), rng.randint(0, source.num_rows // 3)))
        derived = derive(io.BytesIO(buffer.getvalue()), bound, constants, deleted)
        kept = source.filter(
            pc.invert(pc.is_in(pa.array(range(source.num_rows)), pa.array(sorted(deleted), pa.int64())))
        )
        expected = kept.filter(row_expression(bound.predicate, columns, kept.schema, constants))
        expected = expected.select([name for name in expected.column_names if name in served])
        if derived.content is None:
            assert expected.num_rows == 0
            continue
        rows = pq.read_table(io.BytesIO(derived.content))
        assert rows.column_names == expected.column_names  # no column outside the list, in the file
        # NaN is not equal to itself: the rows are compared as text.
        assert json.dumps(rows.to_pylist(), default=str) == json.dumps(expected.to_pylist(), default=str), (
            text
        )
        assert json.loads(derived.stats)["numRecords"] == expected.num_rows
    assert judged["some"] and (judged["all"] or judged["none"]), judged


def test_partition_filters_are_decided_from_partition_values_alone() -> None:
    columns = table_columns(SCHEMA)
    bound = bind(TableRestriction("region = 'emea'", None), SCHEMA, Audience(None, {}))
    assert bound.predicate is not None

    def judge(value: str | None) -> str:
        facts = file_facts(columns, ["region"], {"region": value}, {}, {"region"})
        return verdict(bound.predicate, facts)

    assert judge("emea") == "all"
    assert judge("us") == "none"
    assert judge(None) == "none"  # NULL is not served


def test_statistics_that_prove_nothing_derive_the_file() -> None:
    columns = table_columns(SCHEMA)
    bound = bind(TableRestriction("score > 1 AND id > 0", None), SCHEMA, Audience(None, {}))
    assert bound.predicate is not None
    stats = {"numRecords": 3, "minValues": {"score": 2.0, "id": 5}, "maxValues": {"score": 3.0, "id": 9},
             "nullCount": {"score": 0, "id": 0}}  # fmt: skip
    facts = file_facts(columns, [], {}, stats, {"score", "id"})
    # A float's bounds leave NaN out: never "all" from them.
    assert verdict(bound.predicate, facts) == "some"
    only_id = bind(TableRestriction("id > 0", None), SCHEMA, Audience(None, {}))
    assert only_id.predicate is not None
    assert verdict(only_id.predicate, file_facts(columns, [], {}, stats, {"id"})) == "all"
    assert verdict(only_id.predicate, file_facts(columns, [], {}, {}, {"id"})) == "some"
    long_name = "x" * 40
    text = bind(TableRestriction(f"nation < '{long_name}z'", None), SCHEMA, Audience(None, {}))
    assert text.predicate is not None
    truncated = {"numRecords": 1, "minValues": {"nation": "a"}, "maxValues": {"nation": long_name},
                 "nullCount": {"nation": 0}}  # fmt: skip
    assert verdict(text.predicate, file_facts(columns, [], {}, truncated, {"nation"})) == "some"
