"""What may name a warehouse, a namespace level or a table: checked before anything is written.

Names become object keys and URL path segments, so each is refused with a
message saying why when it could escape its place (`/`, `..`), hide in a log
(control characters) or outgrow a key (over 255 bytes). A warehouse is also a
bucket of the configured storage, so its name follows the bucket rules.
"""

from __future__ import annotations

import re

from share_store.errors import InvalidParameter

MAX_NAME_BYTES = 255
MAX_NAMESPACE_LEVELS = 16
WAREHOUSE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
#: Joins a nested namespace's levels where one string is needed (the REST spec's own separator).
LEVEL_SEPARATOR = "\x1f"


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
    """A table name or one namespace level."""
    if not isinstance(name, str) or not name:
        raise InvalidParameter(f"invalid {what} name: it is empty")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidParameter(f"invalid {what} name: longer than {MAX_NAME_BYTES} bytes")
    if "/" in name or "\\" in name or name in (".", "..") or name.startswith("."):
        raise InvalidParameter(f"invalid {what} name {name!r}: no '/', '\\' or leading '.'")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidParameter(f"invalid {what} name {name!r}: control characters are not allowed")
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
