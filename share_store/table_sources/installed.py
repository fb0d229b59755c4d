"""What a catalog needs installed to load: pyiceberg's support for its type, a SQL catalog's driver.

`check_installed` imports them (nothing is connected to) and says, in one
`CatalogError` line naming the catalog, what is missing and how to get it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from share_store.errors import CatalogError
from share_store.table_sources.settings import catalog_kind

#: SQL drivers not installed with this package, by the module SQLAlchemy imports: how to get one.
DRIVER_HINTS = {
    "pymysql": "pip install 'table-sharing-server[mysql]'",
    "MySQLdb": "use mysql+pymysql:// with pip install 'table-sharing-server[mysql]'",
    "psycopg2": "use postgresql+psycopg://, whose driver is installed",
}


#: The pyiceberg module each catalog type needs beyond what this package installs, and its extra.
TYPE_MODULES = {
    "hive": ("pyiceberg.catalog.hive", "hive"),
    "glue": ("pyiceberg.catalog.glue", "glue"),
    "dynamodb": ("pyiceberg.catalog.dynamodb", "dynamodb"),
    "bigquery": ("pyiceberg.catalog.bigquery_metastore", "bigquery"),
}


def check_installed(name: str, props: Mapping[str, str]) -> None:
    """CatalogError unless what the catalog needs is installed: pyiceberg's support for its type
    and, for a SQL catalog, the driver its uri names (imported; nothing is connected to)."""
    kind = catalog_kind(props)
    if kind in TYPE_MODULES:
        module, extra = TYPE_MODULES[kind]
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise CatalogError(
                f"[catalogs.{name}] type: a {kind} catalog needs the module '{error.name}', "
                f"which is not installed; pip install 'pyiceberg[{extra}]'"
            ) from None
    uri = props.get("uri", "")
    if kind != "sql" or "://" not in uri:
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    scheme = uri.partition("://")[0]
    try:
        dialect = make_url(uri).get_dialect()
    except NoSuchModuleError:
        raise CatalogError(f"[catalogs.{name}] uri: SQLAlchemy knows no database '{scheme}'") from None
    except (ArgumentError, ValueError):
        raise CatalogError(f"[catalogs.{name}] uri: not a database URL SQLAlchemy can read") from None
    try:
        dialect.import_dbapi()
    except ImportError as error:
        module = error.name or scheme
        hint = DRIVER_HINTS.get(module, "install the package that provides it, or use another driver")
        raise CatalogError(
            f"[catalogs.{name}] uri: {scheme}:// needs the module '{module}', which is not installed; {hint}"
        ) from None
