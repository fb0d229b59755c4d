"""The row filter's grammar: what a provider may set, what is refused (one clear line), binding."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from share_store.errors import AdminError, Forbidden
from share_store.restrictions import filter_text, row_filters
from share_store.restrictions.column_types import table_columns
from share_store.restrictions.restriction import (
    Audience,
    TableRestriction,
    bind,
    check_restriction,
    parse_columns,
)

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "custkey", "type": "long", "nullable": True, "metadata": {}},
            {"name": "Nation", "type": "string", "nullable": True, "metadata": {}},
            {"name": "acctbal", "type": "double", "nullable": True, "metadata": {}},
            {"name": "price", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
            {"name": "day", "type": "date", "nullable": True, "metadata": {}},
            {"name": "at", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "active", "type": "boolean", "nullable": True, "metadata": {}},
            {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": True},
             "nullable": True, "metadata": {}},
        ],
    }
)  # fmt: skip
COLUMNS = table_columns(SCHEMA)


def checked(text: str) -> row_filters.Predicate:
    return row_filters.check(row_filters.parse(text), COLUMNS)


def test_every_form_of_the_grammar_is_read_and_typed() -> None:
    predicate = checked(
        "acctbal > 100 AND nation = CURRENT_RECIPIENT('nation') AND day >= DATE '2024-01-01' "
        "AND NOT nation IN ('a', 'b') AND nation LIKE 'J%' AND day IS NOT NULL "
        "AND custkey BETWEEN -1 AND 30 AND price < 9.99 AND at < '2024-05-01T10:00:00Z' AND active"
    )
    text = filter_text.to_sql(predicate)
    # Columns as the schema spells them; literals read as their column's type.
    assert "`Nation` = CURRENT_RECIPIENT('nation')" in text
    assert "`acctbal` > 100.0" in text
    assert "DATE '2024-01-01'" in text
    assert "`price` < 9.99" in text
    assert "`active` = TRUE" in text
    bound = row_filters.bind(predicate, COLUMNS, {"nation": "JAPAN"})
    assert "`Nation` = 'JAPAN'" in filter_text.to_sql(bound)
    assert row_filters.recipient_keys(predicate) == {"nation"}
    values = [v.value for v in row_filters._values(bound) if isinstance(v, row_filters.Literal)]
    assert date(2024, 1, 1) in values and Decimal("9.99") in values
    assert datetime(2024, 5, 1, 10, tzinfo=UTC) in values


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x > 1", "no column 'x'"),
        ("nation > 1", "cannot be compared with column 'Nation'"),
        ("custkey = 'abc'", "cannot be compared with column 'custkey'"),
        ("day = 'not a date'", "cannot be compared with column 'day'"),
        ("upper(nation) = 'A'", "compares no column"),
        ("acctbal = custkey", "not of two columns"),
        ("nation = NULL", "use IS NULL"),
        ("1 = 1", "compares no column"),
        ("select 1", "not SQL"),
        ("nation >", "not SQL"),
        ("tags IS NULL", "cannot be filtered on"),
        ("custkey LIKE '1%'", "LIKE takes a string column"),
        ("nation IN (SELECT n FROM other)", "IN takes a list"),
        ("t.nation = 'A'", "without a qualifier"),
        ("nation = CURRENT_RECIPIENT(nation)", "one quoted property key"),
        ("nation = CURRENT_USER()", "is not a literal"),
        ("custkey + 1 > 2", "compares no column"),
        ("", "empty"),
        ("custkey > 1" + " OR custkey>1" * 200, "parts"),
        ("nation = '" + "x" * 9000 + "'", "longer than"),
    ],
)
def test_what_is_not_a_row_filter_is_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(AdminError) as refused:
        check_restriction(TableRestriction(text, None), SCHEMA)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_columns_are_checked_and_spelled_as_the_schema_spells_them() -> None:
    found = check_restriction(TableRestriction(None, parse_columns("CUSTKEY, nation")), SCHEMA)
    assert found.columns == ("custkey", "Nation")
    with pytest.raises(AdminError, match="no column 'secret'"):
        check_restriction(TableRestriction(None, ("custkey", "secret")), SCHEMA)
    with pytest.raises(AdminError, match="more than once"):
        parse_columns("a,A")
    with pytest.raises(AdminError, match="comma-separated"):
        parse_columns("a,,b")
    with pytest.raises(AdminError, match="needs --where, --columns"):
        TableRestriction(None, None)


def test_binding_names_a_missing_property_and_a_share_token_gets_none() -> None:
    restriction = TableRestriction("nation = CURRENT_RECIPIENT('nation')", None)
    with pytest.raises(Forbidden, match="recipient 'acme' has no property 'nation'"):
        bind(restriction, SCHEMA, Audience("acme", {"tier": "gold"}))
    with pytest.raises(Forbidden, match="a share's own token has no recipient"):
        bind(restriction, SCHEMA, Audience(None, {}))
    typed = TableRestriction("custkey = CURRENT_RECIPIENT('key')", None)
    with pytest.raises(Forbidden, match="has property 'key', but 'abc' is not a long value"):
        bind(typed, SCHEMA, Audience("acme", {"key": "abc"}))
    one = bind(restriction, SCHEMA, Audience("acme", {"nation": "JAPAN"}))
    other = bind(restriction, SCHEMA, Audience("beta", {"nation": "JAPAN"}))
    third = bind(restriction, SCHEMA, Audience("gamma", {"nation": "FRANCE"}))
    # The same rows, the same derived files, whoever asks; other rows, other files.
    assert one.key == other.key != third.key


def test_a_version_that_lost_a_restricted_column_serves_nothing() -> None:
    restriction = TableRestriction("acctbal > 1", ("custkey", "acctbal"))
    narrower = json.dumps({"type": "struct", "fields": [json.loads(SCHEMA)["fields"][0]]})
    with pytest.raises(Forbidden, match="row filter does not fit this version") as refused:
        bind(restriction, narrower, Audience("acme", {}))
    assert "acctbal" not in str(refused.value)  # a filtered column may be one the recipient is not served
    with pytest.raises(Forbidden, match="no column 'acctbal'"):  # a listed one, it is
        bind(TableRestriction(None, ("custkey", "acctbal")), narrower, Audience("acme", {}))


def test_the_stored_form_round_trips() -> None:
    restriction = TableRestriction("nation = 'A'", ("custkey",))
    assert TableRestriction.from_json(restriction.to_json()) == restriction
    assert TableRestriction.from_json(None) is None
