"""The grammar of `sharing-server table maintenance …`: S3 Tables' maintenance of a warehouse's or
a table's Iceberg tables, in the `table` commands' words (`[ALIAS] WAREHOUSE [NAMESPACE TABLE]`).
`sharing_server.admin.catalog.maintenance` runs what is parsed here."""

from __future__ import annotations

import argparse
from typing import Any

from share_store.catalog.maintenance.configuration import KINDS, TABLE_KINDS
from sharing_server.admin.catalog import spark_maintenance
from sharing_server.admin.catalog.words import leaf

TABLE_WORDS = ("warehouse", "namespace", "table")
KIND_HELP = (
    f"the maintenance type: {', '.join(TABLE_KINDS)} (a warehouse's or a table's), or "
    f"{KINDS[-1]} (a warehouse's only)"
)


def add_maintenance_commands(table: Any) -> None:
    """`table maintenance get|set|run|status|spark` under the `table` subparsers."""
    text = (
        "configure, run and watch the maintenance of the own warehouses' tables: compaction, "
        "snapshot expiry and unreferenced-file removal, as AWS S3 Tables does them"
    )
    verbs = table.add_parser("maintenance", help=text, description=text).add_subparsers(
        dest="verb", required=True
    )
    get = leaf(
        verbs,
        "get",
        "maintenance get",
        TABLE_WORDS,
        "show a warehouse's maintenance configuration, or a table's (its own over its warehouse's)",
        optional=2,
        together=True,
    )
    put = leaf(
        verbs,
        "set",
        "maintenance set",
        TABLE_WORDS,
        "set one maintenance type of a warehouse (the default of its tables) or of a table, as S3 "
        "Tables' PutTableMaintenanceConfiguration: a status and settings, left-out settings at their "
        "defaults",
        optional=2,
        together=True,
    )
    put.add_argument("--type", required=True, choices=KINDS, metavar="TYPE", help=KIND_HELP)
    given = put.add_mutually_exclusive_group()
    given.add_argument("--status", choices=("enabled", "disabled"), help="the type on or off")
    given.add_argument(
        "--value",
        metavar="JSON",
        help='the whole configuration instead: {"status": "enabled", "settings": {TYPE: {...}}}',
    )
    put.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the type, with --status: targetFileSizeMB=128, strategy=binpack, "
        "minSnapshotsToKeep=5, maxSnapshotAgeHours=48, unreferencedDays=3, nonCurrentDays=10 "
        "(repeat for more)",
    )
    run = leaf(
        verbs,
        "run",
        "maintenance run",
        TABLE_WORDS,
        "run a table's enabled maintenance now, in order (compaction, snapshot expiry, "
        "unreferenced-file removal), and show each type's outcome",
    )
    run.add_argument(
        "--type",
        action="append",
        default=[],
        choices=KINDS,
        metavar="TYPE",
        help="run only this type (repeat for more; default: every enabled type)",
    )
    status = leaf(
        verbs,
        "status",
        "maintenance status",
        TABLE_WORDS,
        "show a table's maintenance job status: each type's last run (S3 Tables' "
        "GetTableMaintenanceJobStatus)",
    )
    for parser in (get, put, run, status):
        _json_option(parser)
    spark = leaf(
        verbs,
        "spark",
        "maintenance spark",
        TABLE_WORDS,
        "maintain a table too big for the server's own maintenance with Spark: Iceberg's "
        "rewrite_data_files, expire_snapshots and remove_orphan_files through the catalog, with the "
        "table's maintenance configuration",
    )
    spark_maintenance.add_arguments(spark)


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the document as the server's maintenance API gives it"
    )
