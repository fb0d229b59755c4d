"""`sharing-server table …`: AIStor Tables' warehouses, namespaces, Iceberg tables, their
maintenance and catalog users; where each command runs, and which module does it.

Warehouse, namespace, table and maintenance commands work on the configured store and storage
through the same `WarehouseCatalog` (and `Maintainer`) the server's `/_iceberg/v1` runs, or on a
running server through that API (`RemoteTables`, `RemoteMaintenance`, `--server`, the admin token
sent as a bearer token, which the catalog allows everything). Catalog users are made on the store
only: the server has no HTTP API for them. Every name, the schema and the partition fields are
checked before anything is written, so bad input changes nothing; the refusal is a
`ShareStoreError`, which `cli.main` prints on one line with exit status 2.

The commands themselves: `table_verbs` (warehouses, namespaces, tables), `table_maintenance`,
`table_users`; the backends they go through: `table_backend`, `table_maintenance_backend`.
"""

from __future__ import annotations

import argparse

from share_store.catalog.access import PROVIDER, CatalogAccess
from share_store.catalog.catalog import WarehouseCatalog
from share_store.catalog.users import CatalogUsers
from share_store.errors import AdminError
from share_store.persistence import ShareStore
from sharing_server.admin.catalog import spark_maintenance
from sharing_server.admin.catalog.backend import RemoteTables, TableBackend
from sharing_server.admin.catalog.maintenance import run_maintenance
from sharing_server.admin.catalog.maintenance_backend import (
    LocalMaintenance,
    MaintenanceBackend,
    RemoteMaintenance,
)
from sharing_server.admin.catalog.users import run_user
from sharing_server.admin.catalog.verbs import run_namespace, run_table_verb, run_warehouse
from sharing_server.config import ServerConfig

__all__ = ["RemoteTables", "TableBackend", "run_local", "run_remote", "run_table"]


def run_local(args: argparse.Namespace, store: ShareStore, config: ServerConfig, secret: bytes) -> None:
    """On the configured store; the server key (`secret`) seals users' secrets as the server expects."""
    if args.what == "maintenance spark":  # a Spark job through a server's catalog, not the store
        spark_maintenance.run(args)
        return
    catalog = WarehouseCatalog(store.transactions, config.make_storage(secret))
    # The provider on its own store: the same rules as every other entry point, all actions allowed.
    tables = CatalogAccess(catalog, PROVIDER)
    maintenance = LocalMaintenance(catalog, config.options.maintenance_limits)
    run_table(args, tables, CatalogUsers(store.transactions, secret), maintenance)


def run_remote(args: argparse.Namespace) -> None:
    if args.what == "maintenance spark":  # its own credentials: a catalog user's will do
        spark_maintenance.run(args)
        return
    if args.what.startswith("user "):
        raise AdminError(
            "catalog users are managed on the store only (the server has no HTTP API for "
            "them): run `table user …` without --server, with the server's configuration"
        )
    token, cafile = args.admin_token or "", args.cafile
    maintenance = RemoteMaintenance(args.server, token, cafile=cafile)
    run_table(args, RemoteTables(args.server, token, cafile=cafile), None, maintenance)


def run_table(
    args: argparse.Namespace,
    tables: TableBackend,
    users: CatalogUsers | None,
    maintenance: MaintenanceBackend | None = None,
) -> None:
    what: str = args.what
    if what.startswith("user "):
        assert users is not None  # run_remote refuses user commands
        run_user(users, args)
    elif what.startswith("warehouse "):
        run_warehouse(tables, args)
    elif what.startswith("namespace "):
        run_namespace(tables, args)
    elif what.startswith("maintenance "):
        assert maintenance is not None  # both run_local and run_remote give one
        run_maintenance(tables, maintenance, args)
    else:
        run_table_verb(tables, args)
