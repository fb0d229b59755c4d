"""The grammar of `sharing-server table …`: AIStor Tables' warehouses, namespaces, tables,
their maintenance (`table_maintenance_grammar`) and users.

It follows MinIO AIStor's `mc table`, an alias first word optional (`table_words`), told from a
name by counting words: so `namespace list A B` is `ALIAS WAREHOUSE`, as in mc, and a parent
namespace without an alias is given with `--parent`. `sharing_server.admin.catalog.commands` runs
what is parsed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sharing_server.admin.catalog.maintenance_grammar import add_maintenance_commands
from sharing_server.admin.catalog.words import leaf


def add_table_commands(commands: Any) -> None:
    """`table …` under the top-level subparsers `commands`."""
    table = commands.add_parser(
        "table",
        help="manage AIStor Tables: warehouses, namespaces, Iceberg tables, maintenance, catalog users",
        description="AIStor Tables, in the grammar of `mc table`: an ALIAS given first is ignored. "
        "With --server, through the server's catalog API (/_iceberg/v1) as the admin.",
    ).add_subparsers(dest="action", required=True)

    warehouse = table.add_parser("warehouse", help="manage warehouses (each is a bucket)")
    verbs = warehouse.add_subparsers(dest="verb", required=True)
    created = leaf(verbs, "create", "warehouse create", ("warehouse",), "create a warehouse and its bucket")
    created.add_argument(
        "--adopt",
        action="store_true",
        help="take a bucket that already exists as the warehouse, objects and all (refused otherwise)",
    )
    leaf(verbs, "list", "warehouse list", (), "list warehouses")
    defaults = leaf(
        verbs,
        "defaults",
        "warehouse defaults",
        ("warehouse",),
        "show, set or unset the properties every new table of a warehouse starts with "
        "(under its namespace's table-default.* and the create's own)",
    )
    defaults.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a table property's default, e.g. format-version=3 (repeat for more)",
    )
    defaults.add_argument(
        "--unset", action="append", default=[], metavar="KEY", help="drop a default (repeat for more)"
    )
    retention = leaf(
        verbs,
        "retention",
        "warehouse retention",
        ("warehouse",),
        "show or set how long a warehouse keeps its dropped tables (undroppable) before they are purged",
    )
    retention.add_argument(
        "--set", dest="retention", metavar="DURATION", help="e.g. 7d (the default), 36h, 1w, 0s (at once)"
    )
    leaf(verbs, "remove", "warehouse remove", ("warehouse",), "remove an empty warehouse")

    namespace = table.add_parser("namespace", help="manage namespaces (dotted for nested: sales.eu)")
    verbs = namespace.add_subparsers(dest="verb", required=True)
    leaf(
        verbs,
        "create",
        "namespace create",
        ("warehouse", "namespace"),
        "create a namespace; a nested one's parent must exist",
    )
    nlist = leaf(
        verbs,
        "list",
        "namespace list",
        ("warehouse", "parent"),
        "list namespaces, top-level or under a parent",
        optional=1,
    )
    nlist.add_argument(
        "--parent",
        dest="parent_option",
        metavar="NAMESPACE",
        help="list the namespaces under this one (dotted: sales.eu)",
    )
    leaf(verbs, "remove", "namespace remove", ("warehouse", "namespace"), "remove an empty namespace")

    create = leaf(
        table, "create", "table create", ("warehouse", "namespace", "table"), "create an Iceberg table"
    )
    create.add_argument(
        "--schema",
        required=True,
        metavar="JSON",
        help='the Iceberg schema: {"type": "struct", "fields": [...]}',
    )
    create.add_argument(
        "--partition",
        action="append",
        default=[],
        metavar="FIELD[:TRANSFORM]",
        help="partition by FIELD (identity) or FIELD:year|month|day|hour|bucket[N]|truncate[W]|void; "
        "repeat for more fields, in order",
    )
    create.add_argument(
        "--format-version",
        type=int,
        choices=(1, 2, 3),
        help="the Iceberg format version (default: the namespace's or warehouse's table default, else 2)",
    )
    create.add_argument(
        "--location",
        metavar="URI",
        help="where the table lives, inside its warehouse (default: chosen by the catalog)",
    )
    tlist = leaf(table, "list", "table list", ("warehouse", "namespace"), "list a namespace's tables")
    tlist.add_argument(
        "--dropped",
        action="store_true",
        help="list the tables dropped without purge instead: each one's id, when it was dropped and "
        "when it is purged",
    )
    undrop = leaf(
        table,
        "undrop",
        "table undrop",
        ("warehouse", "namespace", "table"),
        "bring back a table dropped without purge, under its name (refused while a table holds it)",
    )
    undrop.add_argument(
        "--id",
        dest="table_id",
        metavar="ID",
        help="which dropped table of that name (`list --dropped`); default: the latest dropped",
    )
    leaf(
        table,
        "info",
        "table info",
        ("warehouse", "namespace", "table"),
        "show a table's location, schema, partition spec and snapshots",
    )
    remove = leaf(
        table,
        "remove",
        "table remove",
        ("warehouse", "namespace", "table"),
        "remove a table from the catalog",
    )
    remove.add_argument(
        "--purge",
        action="store_true",
        help="also delete its files (metadata, manifests, data) inside its location; without it the "
        "table is dropped: kept, undroppable, for its warehouse's retention",
    )

    add_maintenance_commands(table)

    local_only = (
        "manage catalog users (SigV4 keys and policies), on the store only: the server has no HTTP "
        "API for users, so these commands refuse --server"
    )
    user = table.add_parser("user", help=local_only, description=local_only)
    verbs = user.add_subparsers(dest="verb", required=True)
    ucreate = verbs.add_parser("create", help="create a user; its secret key is shown once")
    ucreate.add_argument("name")
    ucreate.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="an IAM-style s3tables: policy (JSON); default: full access",
    )
    ucreate.set_defaults(what="user create")
    verbs.add_parser("list", help="list users").set_defaults(what="user list")
    uremove = verbs.add_parser("remove", help="remove a user; its keys stop working")
    uremove.add_argument("name")
    uremove.set_defaults(what="user remove")
