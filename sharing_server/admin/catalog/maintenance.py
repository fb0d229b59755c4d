"""`sharing-server table maintenance get|set|run|status`: a warehouse's or a table's maintenance
(S3 Tables' three kinds), through a `MaintenanceBackend`, so that the store and a server's API
apply the same rules and answer in the same documents.

Each command prints a readable form, or with `--json` the document as the API gives it. A
configuration the rules refuse is a `ShareStoreError` (one `error:` line, exit status 2) and
changes nothing; so is a run in which a kind failed, after every kind's outcome is printed, so that
a script running maintenance learns of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from share_store.catalog.maintenance.configuration import KINDS
from share_store.catalog.names import TableName
from share_store.errors import AdminError, InvalidParameter
from sharing_server.admin.catalog.backend import TableBackend
from sharing_server.admin.catalog.maintenance_backend import MaintenanceBackend
from sharing_server.admin.catalog.parsing import dotted_namespace
from sharing_server.admin.catalog.verbs import require_warehouse

_WIDTH = max(len(kind) for kind in KINDS) + 2


def run_maintenance(tables: TableBackend, maintenance: MaintenanceBackend, args: argparse.Namespace) -> None:
    warehouse = require_warehouse(tables, args.warehouse)
    table = None
    if args.namespace is not None:
        table = TableName.of(warehouse, dotted_namespace(args.namespace), args.table)
    shown: tuple[str, ...] = KINDS  # of a configuration: every kind it has, or the one just set
    if args.what == "maintenance set":
        kind, value = args.type, configuration_value(args)
        if table is None:
            maintenance.configure_warehouse(warehouse, kind, value)
        else:
            maintenance.configure_table(table, kind, value)
        # On stderr under --json, so that stdout stays one JSON document.
        print(f"Set {kind} of {_subject(warehouse, table)}.", file=sys.stderr if args.json else sys.stdout)
        shown = (kind,)
    if args.what in ("maintenance get", "maintenance set"):
        if table is None:
            document = maintenance.warehouse_configuration(warehouse)
        else:
            document = maintenance.table_configuration(table)
        configuration = {kind: value for kind, value in document["configuration"].items() if kind in shown}
        _show(document, args.json, lambda: print_configuration(warehouse, table, configuration))
        return
    assert table is not None  # the grammar asks run and status for a table
    if args.what == "maintenance status":
        document = maintenance.status(table)
        _show(document, args.json, lambda: print_status(document["status"]))
        return
    kinds = tuple(dict.fromkeys(args.type)) if args.type else KINDS
    document = maintenance.run(table, kinds)
    _show(document, args.json, lambda: print_runs(kinds, document["runs"]))
    failed = [kind for kind, run in document["runs"].items() if run["status"] != "Successful"]
    if failed:
        raise AdminError(f"maintenance of {_subject(warehouse, table)} failed: {', '.join(failed)}")


def _show(document: dict[str, Any], as_json: bool, readable: Callable[[], None]) -> None:
    if as_json:
        print(json.dumps(document, indent=2))
    else:
        readable()


def configuration_value(args: argparse.Namespace) -> Any:
    """S3 Tables' `value` from `--value JSON`, or from `--status` and `--setting KEY=VALUE`s; the
    Maintainer (or the API) checks it."""
    if args.value is not None:
        if args.setting:
            raise AdminError("--setting goes with --status; --value holds the whole configuration")
        try:
            return json.loads(args.value)
        except ValueError as error:
            raise InvalidParameter(f"--value is not valid JSON: {error}") from None
    if args.status is None:
        raise AdminError("set takes --status enabled|disabled (with --setting KEY=VALUE...) or --value JSON")
    settings: dict[str, Any] = {}
    for pair in args.setting:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise AdminError(f"--setting takes KEY=VALUE, e.g. targetFileSizeMB=128, not {pair!r}")
        settings[key.strip()] = _setting(text.strip())
    return {"status": args.status, **({"settings": {args.type: settings}} if settings else {})}


def _setting(text: str) -> Any:
    # A number is sent as one (targetFileSizeMB=128), a word as a string (strategy=binpack).
    try:
        return json.loads(text)
    except ValueError:
        return text


def _subject(warehouse: str, table: TableName | None) -> str:
    return f"warehouse '{warehouse}'" if table is None else f"table '{table}' in warehouse '{warehouse}'"


def _pairs(values: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in values.items() if value is not None)


def _moment(timestamp: str) -> str:
    """An ISO timestamp as `table info` writes one: to the second, in UTC."""
    return datetime.fromisoformat(timestamp).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def print_configuration(warehouse: str, table: TableName | None, configuration: dict[str, Any]) -> None:
    print(f"Warehouse: {warehouse}" if table is None else f"Table:     {warehouse}: {table}")
    for kind, value in configuration.items():
        settings = _pairs(value.get("settings", {}).get(kind, {}))
        print(f"{kind:<{_WIDTH}}{value['status']:<10}{settings}".rstrip())
    if table is not None and len(configuration) > 1:
        # A table has no setting of its own for it: S3 Tables sets it on the table bucket.
        print(f"({KINDS[-1]} is set on the warehouse: `table maintenance get {warehouse}`)")


def print_status(status: dict[str, Any]) -> None:
    for kind, job in status.items():
        line = f"{kind:<{_WIDTH}}{job['status']:<13}"
        if "lastRunTimestamp" in job:
            line += f"{_moment(job['lastRunTimestamp'])}  {_pairs(job.get('details', {}))}"
        print(line.rstrip())
        for key in ("failureMessage", "message"):
            if job.get(key):
                print(f"{'':<{_WIDTH}}{job[key]}")


def print_runs(kinds: tuple[str, ...], runs: dict[str, Any]) -> None:
    for kind in kinds:
        run = runs.get(kind)
        if run is None:
            print(f"{kind:<{_WIDTH}}{'not run':<13}(disabled)")
            continue
        print(f"{kind:<{_WIDTH}}{run['status']:<13}{_pairs(run.get('details') or {})}".rstrip())
        if run.get("message"):
            print(f"{'':<{_WIDTH}}{run['message']}")
