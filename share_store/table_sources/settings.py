"""The `[catalogs.NAME]` settings checked when the configuration is read: `catalog_settings`.

Each block is checked as it is read: a known type with the keys it needs, values
that are strings (numbers and booleans are taken as text), and keys that pyiceberg
or this server know. A dotted key (`s3.endpoint`, `rest.sigv4-enabled`,
`header.X-Client`) is one of pyiceberg's many property families and is taken as is;
a key without a dot that neither knows is a typo, and refused. Nested tables
are the documented grammar's (`backend`, `auth`, `storage`: `grammar.py`), which a
block may not mix with pyiceberg's keys; an unquoted `s3.endpoint` is refused. What
the grammar makes is taken back as it is (`catalog_settings` of its own result is
that result): a `hadoop` or `s3tables` block becomes `sharing.backend`, with no
pyiceberg `type`, and is checked again by the registry after the configuration
has converted it. Every
failure is one `CatalogError` line naming the catalog and the key, never a value.
What can only be checked on the running machine is the registry's
(`CatalogRegistry.verify`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from share_store.errors import CatalogError
from share_store.table_sources.grammar import documented_settings, table_bucket_region, uses_grammar

OWN_PREFIX = "sharing."

#: pyiceberg's catalog types (`pyiceberg.catalog.CatalogType`; a test keeps the two the same).
CATALOG_TYPES = ("rest", "sql", "glue", "hive", "dynamodb", "in-memory", "bigquery")
#: What each type cannot load without (pyiceberg's own checks, made when the config is read).
REQUIRED_KEYS = {
    "rest": ("uri",),
    "sql": ("uri",),
    "hive": ("uri",),
    "bigquery": ("gcp.bigquery.project-id",),
}
#: Our own settings: all of `sharing.*` is ours, so any other name there is a typo.
OWN_KEYS = frozenset(
    {
        "sharing.warehouses",
        "sharing.warehouse-template",
        "sharing.s3-public-endpoint",
        # Made from the documented grammar (`grammar.py`), and taken back as made (`OWN_BACKENDS`).
        "sharing.backend",
        "sharing.table-bucket-arn",
        "sharing.endpoint-url",
        "sharing.auth",
    }
)
#: Our own read-only catalogs, `sharing.backend` of a block the documented grammar made
#: (`grammar.py`: `hadoop`, `s3tables`), and what each cannot load without.
OWN_BACKENDS = {"hadoop": ("warehouse",), "s3tables": ("sharing.table-bucket-arn",)}
#: pyiceberg's catalog properties whose names have no dot. Dotted names (`s3.*`, `client.*`,
#: `rest.*`, `header.*`, `adls.*`, `gcs.*`, `glue.*`, `hive.*`, …) are too many to list and
#: are all passed on as they are.
PLAIN_KEYS = frozenset(
    {
        "type",
        "uri",
        "warehouse",
        "py-catalog-impl",
        "py-io-impl",
        # REST
        "credential",
        "token",
        "scope",
        "audience",
        "resource",
        "prefix",
        "oauth2-server-uri",
        "snapshot-loading-mode",
        "scan-planning-mode",
        "view-endpoints-supported",
        "rest-page-size",
        "namespace-separator",
        # SQL
        "echo",
        "pool_pre_ping",
        "schema_version",
        "init_catalog_tables",
        # Hive
        "ugi",
        "lock-check-min-wait-time",
        "lock-check-max-wait-time",
        "lock-check-retries",
        # DynamoDB
        "table-name",
        # Glue's and DynamoDB's older names for their AWS client's settings
        "profile_name",
        "region_name",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
    }
)
#: pyiceberg properties that are nested tables in its own YAML files (the REST catalog's).
NESTED_KEYS = frozenset({"auth", "ssl"})
#: Nested tables a later grammar of ours may take (`[catalogs.x.backend]`, `[catalogs.x.storage]`).
PLANNED_TABLES = NESTED_KEYS | {"backend", "storage"}
#: Dotted names offered, with the plain ones, as what a refused key may have meant.
COMMON_DOTTED = (
    "s3.endpoint",
    "s3.access-key-id",
    "s3.secret-access-key",
    "s3.region",
    "client.access-key-id",
    "client.secret-access-key",
    "client.region",
    "rest.sigv4-enabled",
    "rest.signing-name",
    "rest.signing-region",
)


def _setting(name: str, key: str, value: Any) -> str:
    """One value as the string pyiceberg takes: TOML's numbers and booleans as text, tables refused."""
    if isinstance(value, dict):
        message = f"[catalogs.{name}.{key}]: nested tables are not supported yet in a catalog block"
        path = [key]
        inner: Any = value
        while isinstance(inner, dict) and inner:
            path.append(next(iter(inner)))
            inner = inner[path[-1]]
        if key not in PLANNED_TABLES and len(path) > 1:
            # `s3.endpoint = "…"` unquoted: TOML reads a table `s3` holding `endpoint`.
            dotted = ".".join(path)
            message += f'; a dotted property name must be quoted: "{dotted}" = …, not {dotted} = …'
        raise CatalogError(message)
    if key in NESTED_KEYS:
        raise CatalogError(
            f"[catalogs.{name}] {key}: pyiceberg takes it as a nested table, "
            "and nested tables are not supported yet in a catalog block"
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    kind = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
    raise CatalogError(f"[catalogs.{name}] {key}: must be a string, not {kind}")


def _check_key(name: str, key: str) -> None:
    if key in PLAIN_KEYS or key in OWN_KEYS:
        return
    if "." in key and not key.startswith(OWN_PREFIX):
        return  # one of pyiceberg's dotted property families
    known = sorted(PLAIN_KEYS | OWN_KEYS) + list(COMMON_DOTTED)
    close = difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.6)
    meant = f" (did you mean {close[0]}?)" if close else ""
    if key.startswith(OWN_PREFIX):
        ours = ", ".join(sorted(OWN_KEYS))
        raise CatalogError(f"[catalogs.{name}] {key}: unknown setting{meant}; this server's are {ours}")
    raise CatalogError(
        f"[catalogs.{name}] {key}: unknown setting{meant}; a name without a dot must be a pyiceberg "
        'catalog property or one of ours, and dotted ones such as "s3.endpoint" are passed on as they are'
    )


def catalog_kind(props: Mapping[str, str]) -> str | None:
    """The catalog's type as pyiceberg takes it: given, else told by the uri ("" when it tells
    none); None for a catalog class of its own (`py-catalog-impl`)."""
    if props.get("py-catalog-impl"):
        return None
    if props.get("type"):
        return props["type"].lower()
    uri = props.get("uri", "")
    if uri.startswith("http"):
        return "rest"
    if uri.startswith("thrift"):
        return "hive"
    if uri.startswith(("sqlite", "postgresql")):
        return "sql"
    return ""


def catalog_settings(name: str, block: Mapping[str, Any]) -> dict[str, str]:
    """One `[catalogs.NAME]` block, checked, as the strings pyiceberg takes.

    A pure function of the block: `CatalogError` names the catalog and the key
    at fault (and no value but the type's), so that the configuration is refused
    when read rather than at the catalog's first use.
    """
    if uses_grammar(block):
        return documented_settings(name, block)
    props = {key: _setting(name, key, value) for key, value in block.items()}
    for key in props:
        _check_key(name, key)
    types = ", ".join(CATALOG_TYPES)
    if props.get("type") and props.get("py-catalog-impl"):
        raise CatalogError(f"[catalogs.{name}] type, py-catalog-impl: set one of them, not both")
    if "sharing.backend" in props:
        return _own_backend(name, props)
    kind = catalog_kind(props)
    if kind is None:
        return props
    if not kind:
        missing = (
            "has neither type nor uri" if not props.get("uri") else "has no type, and its uri tells none"
        )
        raise CatalogError(f"[catalogs.{name}] {missing}: set type ({types})")
    if kind not in CATALOG_TYPES:
        raise CatalogError(
            f"[catalogs.{name}] type: '{props['type']}' is not a catalog type; use one of {types}"
        )
    for key in REQUIRED_KEYS.get(kind, ()):
        if not props.get(key):
            raise CatalogError(f"[catalogs.{name}] {key}: missing, and a {kind} catalog needs it")
    return props


def _own_backend(name: str, props: dict[str, str]) -> dict[str, str]:
    """A block the documented grammar already made for one of our own catalogs (`sharing.backend`),
    checked and taken as it is: the configuration converts each block when it is read, and the
    registry checks the result again, which must not fail for want of pyiceberg's `type`."""
    backend = props["sharing.backend"]
    if backend not in OWN_BACKENDS:
        ours = ", ".join(OWN_BACKENDS)
        raise CatalogError(f"[catalogs.{name}] sharing.backend: '{backend}' is not one of ours; use {ours}")
    clash = [key for key in ("type", "uri", "py-catalog-impl") if props.get(key)]
    if clash:
        raise CatalogError(
            f"[catalogs.{name}] {', '.join(clash)}: pyiceberg's catalog, beside sharing.backend, "
            "our own; set one of them"
        )
    for key in OWN_BACKENDS[backend]:
        if not props.get(key):
            raise CatalogError(f"[catalogs.{name}] {key}: missing, and a {backend} catalog needs it")
    if backend == "s3tables":
        table_bucket_region(name, "sharing.table-bucket-arn", props["sharing.table-bucket-arn"])
    return props
