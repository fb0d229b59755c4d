"""What may name a warehouse, a namespace level or a table: checked before anything is written.

Names become object keys, URL path segments and policy ARNs, so one name must
be one path and one ARN: a name is ASCII letters, digits, `_` and `-`,
starting with a letter, digit or `_`, at most `MAX_NAME_BYTES` long (a table's
folder is its name and a 33-character suffix, within a file system's 255). No
`.` (a namespace's levels are joined with it in ARNs), no `/`, `#`, `?`, `%`
(URL-significant: a path cut by a parser would name another table's file) and
nothing outside ASCII (look-alikes: NFC/NFD forms, bidi controls, fullwidth
solidus U+FF0F). S3 Tables and AIStor keep to a safe set for the same reasons. A
warehouse is also a bucket of the configured storage, so its name follows the
bucket rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from share_store.errors import InvalidParameter

#: 255 bytes less a table folder's `-<32 hex digits>` suffix.
MAX_NAME_BYTES = 200
SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
MAX_NAMESPACE_LEVELS = 16
WAREHOUSE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
#: Joins a nested namespace's levels where one string is needed (the REST spec's own separator).
LEVEL_SEPARATOR = "\x1f"
#: `LEVEL_SEPARATOR` as `/v1/config` says it (`namespace-separator`, url-encoded, Iceberg 1.11).
NAMESPACE_SEPARATOR = "%1F"


#: What names may hold, as catalog properties for `/v1/config`'s `defaults`: pyiceberg's own catalog
#: suite reads them (its `does_support_*_in_identifier`) to leave out what a catalog refuses, and
#: no client acts on them otherwise. Nested namespaces are served; a `.` or `/` in a name is not.
IDENTIFIER_SUPPORT = {"supports_dot_in_identifier": "false", "supports_slash_in_identifier": "false"}

#: Path words of the catalog's own endpoints (`/v1/config`, `/v1/warehouses`, `/v1/oauth`).
RESERVED_WAREHOUSES = frozenset({"config", "warehouses", "oauth"})


def check_warehouse(name: str) -> str:
    if isinstance(name, str) and name in RESERVED_WAREHOUSES:
        raise InvalidParameter(f"invalid warehouse name {name!r}: it names one of the catalog's endpoints")
    if not isinstance(name, str) or not WAREHOUSE_NAME.fullmatch(name) or ".." in name:
        raise InvalidParameter(
            f"invalid warehouse name {name!r}: 3 to 63 characters, lowercase letters, digits, "
            "'.', '_' and '-', starting and ending with a letter or digit"
        )
    return name


def check_name(name: str, what: str = "table") -> str:
    """A table name, one namespace level or a catalog user's name."""
    if not isinstance(name, str):
        raise InvalidParameter(f"invalid {what} name: it must be a string")
    if not name:
        raise InvalidParameter(f"invalid {what} name: it is empty")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:  # a CLI argument may hold one
        raise InvalidParameter(f"invalid {what} name: longer than {MAX_NAME_BYTES} characters")
    if not SAFE_NAME.fullmatch(name):
        shown = name.encode("ascii", "backslashreplace").decode()
        raise InvalidParameter(
            f"invalid {what} name {shown!r}: use ASCII letters, digits, '_' and '-', starting with a "
            "letter, digit or '_' (no '.', '/', '#', '?', '%', spaces or other characters)"
        )
    return name


def check_namespace(levels: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    levels = tuple(levels)
    if not levels:
        raise InvalidParameter("invalid namespace: it has no levels")
    if len(levels) > MAX_NAMESPACE_LEVELS:
        raise InvalidParameter(f"invalid namespace: more than {MAX_NAMESPACE_LEVELS} levels")
    for level in levels:
        check_name(level, "namespace")
    return levels


def namespace_key(levels: tuple[str, ...]) -> str:
    """The namespace as one string, for the store's rows."""
    return LEVEL_SEPARATOR.join(levels)


def namespace_levels(key: str) -> tuple[str, ...]:
    return tuple(key.split(LEVEL_SEPARATOR))


def parse_namespace_path(segment: str) -> tuple[str, ...]:
    """A namespace as a URL path segment names it: levels joined by the unit separator (%1F)."""
    return check_namespace(segment.split(LEVEL_SEPARATOR))


@dataclass(frozen=True)
class TableName:
    """A table of the own warehouses: its warehouse, namespace levels and name, each checked."""

    warehouse: str
    namespace: tuple[str, ...]
    name: str

    @classmethod
    def of(cls, warehouse: str, namespace: tuple[str, ...] | list[str], name: str) -> TableName:
        return cls(check_warehouse(warehouse), check_namespace(namespace), check_name(name))

    def __str__(self) -> str:
        return ".".join((*self.namespace, self.name))
