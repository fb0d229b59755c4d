"""A restriction's row filter: a SQL predicate over the table's columns, as a small tree.

The provider types SQL (`--where "region = 'emea' AND acctbal > 100"`); sqlglot
parses it and `parse` keeps only what a row filter may hold: comparisons of a
column with a value, `IN`, `BETWEEN`, `LIKE`, `IS [NOT] NULL`, `AND`, `OR`,
`NOT`, literals, and `CURRENT_RECIPIENT('key')`, a property of the recipient
asking. Anything else (a function, a subquery, a comparison of two columns) is
refused when the restriction is set, with the part named. `check` then holds the
tree against the table's columns and types; `bind` replaces each recipient
property by its value for one recipient, read as its column's type.

The tree is made of frozen values, so that a bound filter can key the files
derived for it and be printed back as SQL (`filter_text.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from share_store.restrictions.column_types import ColumnType, UnreadableValue, read_value

#: The longest row filter a provider may set, and the most nodes it may hold: a filter is
#: evaluated for every file of every response.
MAX_FILTER_CHARS = 8192
MAX_FILTER_NODES = 512


class InvalidRowFilter(ValueError):
    """A row filter that cannot be set: the message says which part and why."""


class MissingProperty(LookupError):
    """A recipient property the filter names that the recipient (or token) lacks."""

    def __init__(self, key: str, value_error: str | None = None) -> None:
        super().__init__(key)
        self.key = key
        self.value_error = value_error


@dataclass(frozen=True)
class Column:
    name: str  # as the schema spells it, once checked


@dataclass(frozen=True)
class Literal:
    value: Any  # None, bool, int, float, Decimal, str, date, datetime


@dataclass(frozen=True)
class RecipientProperty:
    key: str


Value = Literal | RecipientProperty


@dataclass(frozen=True)
class Compare:
    op: str  # =, <>, <, <=, >, >=
    column: Column
    value: Value


@dataclass(frozen=True)
class InList:
    column: Column
    values: tuple[Value, ...]


@dataclass(frozen=True)
class Between:
    column: Column
    low: Value
    high: Value


@dataclass(frozen=True)
class Like:
    column: Column
    pattern: Value


@dataclass(frozen=True)
class IsNull:
    column: Column


@dataclass(frozen=True)
class And:
    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Or:
    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Not:
    operand: Predicate


Predicate = Compare | InList | Between | Like | IsNull | And | Or | Not

_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


# -- parse ------------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def parse(text: str) -> Predicate:
    """The row filter `text` as a tree; `InvalidRowFilter` naming what is not allowed.

    Kept by text (the tree is frozen): every request binds its table's restriction again."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError, TokenError

    if not text.strip():
        raise InvalidRowFilter("the row filter is empty")
    if len(text) > MAX_FILTER_CHARS:
        raise InvalidRowFilter(f"the row filter is longer than {MAX_FILTER_CHARS} characters")
    try:
        tree = sqlglot.parse_one(text, read="spark", into=exp.Condition)
    except (ParseError, TokenError) as error:
        raise InvalidRowFilter(f"the row filter is not SQL sqlglot can read: {_first_line(error)}") from None
    except Exception as error:  # noqa: BLE001 - sqlglot raises more kinds on odd input
        raise InvalidRowFilter(f"the row filter cannot be read: {type(error).__name__}") from None
    nodes = sum(1 for _ in tree.walk())
    if nodes > MAX_FILTER_NODES:
        raise InvalidRowFilter(f"the row filter has {nodes} parts; at most {MAX_FILTER_NODES} are allowed")
    return _predicate(tree)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def _predicate(node: Any) -> Predicate:
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return And(_predicate(node.this), _predicate(node.expression))
    if isinstance(node, exp.Or):
        return Or(_predicate(node.this), _predicate(node.expression))
    if isinstance(node, exp.Not):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        return Not(_predicate(inner))
    comparisons = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
    for kind, op in comparisons.items():
        if type(node) is kind:
            left, right = node.this, node.expression
            if _is_column(left):
                return Compare(op, _column(left), _value(right))
            if _is_column(right):
                return Compare(_FLIPPED[op], _column(right), _value(left))
            raise InvalidRowFilter(f"{_sql(node)!r} compares no column: a comparison is column op value")
    if isinstance(node, exp.In):
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise InvalidRowFilter(f"{_sql(node)!r}: IN takes a list of values, not a query")
        return InList(_column(node.this), tuple(_value(v) for v in node.expressions))
    if isinstance(node, exp.Between):
        return Between(_column(node.this), _value(node.args["low"]), _value(node.args["high"]))
    if isinstance(node, exp.Like):
        return Like(_column(node.this), _value(node.expression))
    if isinstance(node, exp.Is):
        if isinstance(node.expression, exp.Null):
            return IsNull(_column(node.this))
        raise InvalidRowFilter(f"{_sql(node)!r}: IS takes only NULL or NOT NULL")
    if _is_column(node):
        # A bare boolean column: `active` is `active = TRUE`.
        return Compare("=", _column(node), Literal(True))
    raise InvalidRowFilter(
        f"{_sql(node)!r} is not allowed in a row filter: use comparisons, IN, BETWEEN, LIKE, "
        "IS [NOT] NULL, AND, OR, NOT, literals and CURRENT_RECIPIENT('key')"
    )


def _is_column(node: Any) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Column)


def _column(node: Any) -> Column:
    from sqlglot import exp

    if not isinstance(node, exp.Column):
        raise InvalidRowFilter(f"{_sql(node)!r} is not a column of the table")
    if node.table or node.args.get("db") or node.args.get("catalog"):
        raise InvalidRowFilter(f"{_sql(node)!r}: name a top-level column of the table, without a qualifier")
    return Column(node.name)


def _value(node: Any) -> Value:
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        raise InvalidRowFilter("a comparison with NULL is never true: use IS NULL or IS NOT NULL")
    if isinstance(node, exp.Boolean):
        return Literal(bool(node.this))
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        found = _value(node.this)
        assert isinstance(found, Literal)
        return Literal(-found.value)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return Literal(node.this)
        return Literal(_number(node.this))
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        # DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00': the text, read as the column's type.
        return Literal(node.this.this)
    if isinstance(node, exp.Anonymous) and str(node.this).upper() == "CURRENT_RECIPIENT":
        arguments = node.expressions
        if len(arguments) != 1 or not isinstance(arguments[0], exp.Literal) or not arguments[0].is_string:
            raise InvalidRowFilter(
                "CURRENT_RECIPIENT takes one quoted property key: CURRENT_RECIPIENT('nation')"
            )
        key = arguments[0].this
        if not key or len(key) > 128:
            raise InvalidRowFilter("a recipient property key is 1 to 128 characters")
        return RecipientProperty(key)
    if isinstance(node, exp.Column):
        raise InvalidRowFilter(f"{_sql(node)!r}: a comparison is column op value, not of two columns")
    raise InvalidRowFilter(f"{_sql(node)!r} is not a literal or CURRENT_RECIPIENT('key')")


def _number(text: str) -> int | Decimal:
    if all(c.isdigit() for c in text):
        return int(text)
    return Decimal(text)


def _sql(node: Any) -> str:
    try:
        return str(node.sql(dialect="spark"))[:200]
    except Exception:  # noqa: BLE001 - only for the message
        return type(node).__name__


# -- check and bind ---------------------------------------------------------------------------


def check(predicate: Predicate, columns: dict[str, ColumnType]) -> Predicate:
    """`predicate` with its columns named as the schema names them; `InvalidRowFilter` when a
    column is unknown, not comparable, or given a value its type cannot hold."""
    return _map(predicate, lambda column, value: _checked_value(column, value), columns)


def bind(
    predicate: Predicate, columns: dict[str, ColumnType], properties: dict[str, str] | None
) -> Predicate:
    """`predicate` (checked) with each recipient property replaced by its value as its column's
    type; `MissingProperty` when the recipient lacks one (or no recipient asks: `properties` None)."""

    def value_of(column: ColumnType, value: Value) -> Literal:
        if isinstance(value, Literal):
            return value
        if properties is None or value.key not in properties:
            raise MissingProperty(value.key)
        try:
            return Literal(read_value(column, properties[value.key]))
        except UnreadableValue as error:
            raise MissingProperty(value.key, str(error)) from None

    return _map(predicate, value_of, columns)


def recipient_keys(predicate: Predicate) -> set[str]:
    """The recipient properties a filter names."""
    found: set[str] = set()
    for value in _values(predicate):
        if isinstance(value, RecipientProperty):
            found.add(value.key)
    return found


def column_names(predicate: Predicate) -> set[str]:
    """The columns a (checked) filter names."""
    if isinstance(predicate, And | Or):
        return column_names(predicate.left) | column_names(predicate.right)
    if isinstance(predicate, Not):
        return column_names(predicate.operand)
    return {predicate.column.name}


def _values(predicate: Predicate) -> list[Value]:
    if isinstance(predicate, And | Or):
        return _values(predicate.left) + _values(predicate.right)
    if isinstance(predicate, Not):
        return _values(predicate.operand)
    if isinstance(predicate, Compare):
        return [predicate.value]
    if isinstance(predicate, InList):
        return list(predicate.values)
    if isinstance(predicate, Between):
        return [predicate.low, predicate.high]
    if isinstance(predicate, Like):
        return [predicate.pattern]
    return []


def _checked_value(column: ColumnType, value: Value) -> Value:
    if isinstance(value, RecipientProperty):
        return value
    try:
        return Literal(read_value(column, value.value))
    except UnreadableValue:
        from share_store.restrictions.filter_text import literal_sql

        raise InvalidRowFilter(
            f"{literal_sql(value.value)} cannot be compared with column {column.name!r} of type "
            f"{column.delta_type}"
        ) from None


def _map(predicate: Predicate, value_of: Any, columns: dict[str, ColumnType]) -> Predicate:
    if isinstance(predicate, And):
        return And(_map(predicate.left, value_of, columns), _map(predicate.right, value_of, columns))
    if isinstance(predicate, Or):
        return Or(_map(predicate.left, value_of, columns), _map(predicate.right, value_of, columns))
    if isinstance(predicate, Not):
        return Not(_map(predicate.operand, value_of, columns))
    found = columns.get(predicate.column.name.lower())
    if found is None:
        raise InvalidRowFilter(f"the table has no column {predicate.column.name!r}")
    if not found.comparable:
        raise InvalidRowFilter(f"column {found.name!r} of type {_type_text(found)} cannot be filtered on")
    column = Column(found.name)
    if isinstance(predicate, Compare):
        return Compare(predicate.op, column, value_of(found, predicate.value))
    if isinstance(predicate, InList):
        return InList(column, tuple(value_of(found, v) for v in predicate.values))
    if isinstance(predicate, Between):
        return Between(column, value_of(found, predicate.low), value_of(found, predicate.high))
    if isinstance(predicate, Like):
        if found.kind != "string":
            raise InvalidRowFilter(f"LIKE takes a string column; {found.name!r} is {found.delta_type}")
        return Like(column, value_of(found, predicate.pattern))
    return IsNull(column)


def _type_text(column: ColumnType) -> str:
    kind = column.delta_type
    return kind if isinstance(kind, str) else str(kind.get("type") if isinstance(kind, dict) else kind)
