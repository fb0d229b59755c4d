"""A shared table's restriction: what the provider sets, and what one request binds it to.

`TableRestriction` is what the share store keeps with a shared table: the row
filter as the provider typed it and the columns served. `Audience` is who a
request reads for (a named recipient and its properties, or a share's own token,
which has none). `bind` joins them for one request into a `BoundRestriction`:
the filter with each recipient property replaced by its value, the columns as
the schema names them, and the key its derived files are kept under.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from share_store.errors import AdminError, Forbidden
from share_store.restrictions import filter_text, row_filters
from share_store.restrictions.column_types import ColumnType, table_columns
from share_store.restrictions.row_filters import InvalidRowFilter, MissingProperty, Predicate

#: The most columns a restriction may list.
MAX_COLUMNS = 1000


@dataclass(frozen=True)
class TableRestriction:
    """Rows where `where` holds, columns in `columns` (None: every column)."""

    where: str | None = None
    columns: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.where is None and self.columns is None:
            raise AdminError("a restriction needs --where, --columns or both (--clear removes one)")

    def to_json(self) -> str:
        return json.dumps({"where": self.where, "columns": list(self.columns) if self.columns else None})

    @classmethod
    def from_json(cls, text: str | None) -> TableRestriction | None:
        if not text:
            return None
        body = json.loads(text)
        columns = body.get("columns")
        return cls(body.get("where"), tuple(columns) if columns is not None else None)

    def describe(self) -> dict[str, Any]:
        """What `share info`, the admin API and the console show."""
        return {"where": self.where, "columns": list(self.columns) if self.columns is not None else None}

    @property
    def recipient_keys(self) -> set[str]:
        """The recipient properties the row filter names."""
        return row_filters.recipient_keys(row_filters.parse(self.where)) if self.where else set()


def parse_columns(text: str) -> tuple[str, ...]:
    """`--columns "a,b,c"` as a tuple; one clear error for an empty or repeated name."""
    names = tuple(part.strip() for part in text.split(","))
    if not names or any(not name for name in names):
        raise AdminError(f"invalid --columns {text!r}: a comma-separated list of column names")
    if len(names) > MAX_COLUMNS:
        raise AdminError(f"--columns lists {len(names)} columns; at most {MAX_COLUMNS} are allowed")
    lowered = [name.lower() for name in names]
    repeated = sorted({name for name in lowered if lowered.count(name) > 1})
    if repeated:
        raise AdminError(f"--columns names {', '.join(repeated)} more than once")
    return names


def check_restriction(restriction: TableRestriction, schema_string: str) -> TableRestriction:
    """`restriction` checked against the table's schema, its columns spelled as the schema spells
    them; `AdminError` (one line: a 400 through the API) naming what is wrong."""
    columns = table_columns(schema_string)
    where = restriction.where
    if where is not None:
        try:
            row_filters.check(row_filters.parse(where), columns)
        except InvalidRowFilter as error:
            raise AdminError(f"invalid --where: {error}") from None
    served = None
    if restriction.columns is not None:
        unknown = [name for name in restriction.columns if name.lower() not in columns]
        if unknown:
            raise AdminError(f"invalid --columns: the table has no column {', '.join(map(repr, unknown))}")
        served = tuple(columns[name.lower()].name for name in restriction.columns)
    return TableRestriction(where, served)


@dataclass(frozen=True)
class Audience:
    """Who a request reads a table for: a named recipient and its properties, or a share's own
    token (`recipient` None, no properties)."""

    recipient: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BoundRestriction:
    """A restriction as one audience reads it: no recipient property left, keyed for its files."""

    predicate: Predicate | None
    #: The columns served, as the schema names them (None: every column).
    columns: tuple[str, ...] | None
    #: The table's columns as of the version bound against.
    table_columns: dict[str, ColumnType]
    key: str

    def serves(self, column: str) -> bool:
        return self.columns is None or column in self.columns

    @cached_property
    def served_physical(self) -> frozenset[str] | None:
        """The served columns' names in the data files (None: every column)."""
        if self.columns is None:
            return None
        return frozenset(self.table_columns[name.lower()].physical for name in self.columns)


def bind(restriction: TableRestriction, schema_string: str, audience: Audience) -> BoundRestriction:
    """`restriction` for `audience` against one version's schema.

    `Forbidden` names a property the recipient lacks (or that a share's own token cannot
    have). A version whose schema lost a filtered or listed column serves nothing: its
    refusal says which column, so that no row is served unfiltered.
    """
    columns = table_columns(schema_string)
    predicate = None
    if restriction.where is not None:
        try:
            checked = row_filters.check(row_filters.parse(restriction.where), columns)
        except InvalidRowFilter:
            # Not said which column: the filter may name columns this recipient is not served.
            raise Forbidden(
                "the table's row filter does not fit this version of the table (a column it names is "
                "not in this version, or has another type): ask the provider"
            ) from None
        properties = dict(audience.properties) if audience.recipient is not None else None
        try:
            predicate = row_filters.bind(checked, columns, properties)
        except MissingProperty as missing:
            raise Forbidden(_missing_message(missing, audience)) from None
    served = None
    if restriction.columns is not None:
        gone = [name for name in restriction.columns if name.lower() not in columns]
        if gone:
            raise Forbidden(
                "the table's restriction does not fit this version of the table: it has no column "
                + ", ".join(map(repr, gone))
            )
        served = tuple(columns[name.lower()].name for name in restriction.columns)
    # Keyed by the physical columns too: after a rename, one name is another column's files.
    physical = tuple(sorted((c.name, c.physical) for c in columns.values()))
    return BoundRestriction(predicate, served, columns, filter_text.key(predicate, served, physical))


def _missing_message(missing: MissingProperty, audience: Audience) -> str:
    if audience.recipient is None:
        return (
            f"this table is restricted by the recipient property {missing.key!r}, and a share's own "
            "token has no recipient: ask the provider for a named recipient's token"
        )
    if missing.value_error is not None:
        return f"recipient {audience.recipient!r} has property {missing.key!r}, but {missing.value_error}"
    return (
        f"recipient {audience.recipient!r} has no property {missing.key!r}, "
        "which this table's restriction needs"
    )
