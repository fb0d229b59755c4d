"""Admin operations on restricted tables (issue 50): `RestrictionCommands`, which `Admin` takes on.

`restrict` checks a restriction against the table's latest schema, read whole
(the provider's read: `TableReaders.unrestricted`), before it is kept: a filter
that is no predicate, an unknown column or a type mismatch is one `AdminError`
and nothing is stored. Each change is an admin event carrying its text.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from share_store.errors import AdminError, ShareStoreError
from share_store.model import SharedTable, parse_table_ref
from share_store.persistence import ShareStore
from share_store.restrictions.restriction import TableRestriction, check_restriction, parse_columns
from sharing_server import paths
from sharing_server.admin.changes import record_change
from sharing_server.admin.entries import admin_not_found

if TYPE_CHECKING:  # the readers (and their formats) only where a restriction is checked
    from share_store.readers.table_readers import TableReaders


def restriction_entry(table: SharedTable) -> dict[str, Any] | None:
    """A table's restriction as the CLI, the admin API and the console show it (None: whole)."""
    return table.restriction.describe() if table.restriction is not None else None


def columns_of(columns: str | list[str] | None) -> tuple[str, ...] | None:
    """`--columns "a,b"` or the API's `["a", "b"]`, checked alike (`parse_columns`)."""
    if columns is None:
        return None
    if isinstance(columns, list):
        if not columns or any(not isinstance(name, str) or "," in name for name in columns):
            raise AdminError("'columns' must be a non-empty array of column names (none holding ',')")
        columns = ",".join(columns)
    return parse_columns(columns)


def check_asked(where: object, columns: object, clear: bool) -> None:
    """`AdminError` for a restrict that asks nothing, or both to clear and to set."""
    if clear and (where is not None or columns is not None):
        raise AdminError("--clear removes the restriction: give it without --where or --columns")
    if not clear and where is None and columns is None:
        raise AdminError("nothing to do: give --where, --columns or both (--clear removes a restriction)")


class RestrictionCommands:
    store: ShareStore
    _readers: Callable[[], TableReaders]

    @admin_not_found
    def restrict(
        self,
        share: str,
        table: str,
        where: str | None = None,
        columns: str | list[str] | None = None,
        clear: bool = False,
    ) -> dict[str, Any]:
        """Restrict `table` (SCHEMA/NAME) of `share` to the rows where `where` holds and to
        `columns`, or with `clear` share it whole again; the table's restriction after."""
        schema, name = parse_table_ref(table)
        path = paths.ADMIN_TABLE_RESTRICTION.format_map(
            {key: urllib.parse.quote(value, safe="") for key, value in
             (("share", share), ("schema", schema), ("table", name))}
        )  # fmt: skip
        check_asked(where, columns, clear)
        if clear:
            found = self.store.set_restriction(share, schema, name, None)
            record_change(self.store, "DELETE", path, f"restriction of {found.full_name} cleared")
            return {"share": found.share, "schema": found.schema, "name": found.name, "restriction": None}
        if where is not None and not isinstance(where, str):
            raise AdminError("'where' must be a string")
        asked = TableRestriction(where, columns_of(columns))
        found = self.store.get_table(share, schema, name)
        checked = check_restriction(asked, self._schema_string(found))
        kept = self.store.set_restriction(share, schema, name, checked)
        record_change(self.store, "PUT", path, f"restriction of {kept.full_name}: {checked.to_json()}")
        return {
            "share": kept.share,
            "schema": kept.schema,
            "name": kept.name,
            "restriction": checked.describe(),
        }

    def _schema_string(self, table: SharedTable) -> str:
        """The latest schema of `table`, read whole; `AdminError` when it cannot be read."""
        try:
            snapshot = self._readers().unrestricted(table).snapshot()
        except ShareStoreError as error:
            raise AdminError(f"cannot read table {table.schema}/{table.name} to check the restriction: "
                             f"{error.message}") from None  # fmt: skip
        except (OSError, ValueError, KeyError, ClientError, BotoCoreError) as error:
            raise AdminError(
                f"cannot read table {table.schema}/{table.name} to check the restriction: {error}"
            ) from None
        return str(snapshot.metadata.get("schemaString", ""))
