"""Maintenance of catalog tables too big for the server's own: Iceberg's procedures, run by Spark.

For a table whose maintenance is more than one machine should do (hundreds of GB rewritten per
run, hundreds of thousands of files, equality deletes): `rewrite_data_files`, `expire_snapshots`
and `remove_orphan_files` through the server's catalog (`/_iceberg`), with the table's effective
maintenance configuration, as the server would (docs/aistor-tables.md, "Big tables: maintenance
by Spark", says what each call is given and why). Usage, the admin's or a catalog user's token in
$SHARING_CATALOG_TOKEN or a catalog user's KEY:SECRET in $SHARING_CATALOG_CREDENTIAL:

    spark-submit --jars iceberg-spark-runtime-3.5_2.12-1.10.2.jar maintenance.py \\
        --uri https://sharing.example.com/_iceberg --warehouse analytics --table sales.orders \\
        [--namespace sales instead of --table] [--procedures rewrite_data_files,...]

or `python maintenance.py ... --jars JAR`. One line per table and procedure says what it did; exit
status 1 if any failed. `sharing_server.admin.catalog.spark_maintenance` builds this command. One
file, the standard library and pyspark only: spark-submit ships it alone, where the server is not
installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

PROCEDURES = ("rewrite_data_files", "expire_snapshots", "remove_orphan_files")
TOKEN_VARIABLE = "SHARING_CATALOG_TOKEN"  # noqa: S105 - a variable's name
CREDENTIAL_VARIABLE = "SHARING_CATALOG_CREDENTIAL"
#: Spark's name for the server's catalog in the job's session.
CATALOG = "sharing"
COMPACTION = "icebergCompaction"
SNAPSHOT_MANAGEMENT = "icebergSnapshotManagement"
UNREFERENCED_FILE_REMOVAL = "icebergUnreferencedFileRemoval"
#: The maintenance kind each procedure does.
KIND = dict(zip(PROCEDURES, (COMPACTION, SNAPSHOT_MANAGEMENT, UNREFERENCED_FILE_REMOVAL), strict=True))
#: Iceberg's table properties, which win over the configured snapshot management.
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MB = 1024 * 1024
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
#: Removed orphan files listed by path, at most: a big table's list would flood the output.
SHOWN_ORPHANS = 20
#: Where Spark lists a table's files itself (Hadoop's file systems); elsewhere (s3://, gs://, …) it
#: lists through the table's FileIO, which has the catalog's credentials (`prefix_listing`).
HADOOP_LISTED = ("file", "hdfs")
# Java's Long.parseLong: an optional `+` and ASCII digits (Python's int() takes more).
_WHOLE_NUMBER = re.compile(r"\+?[0-9]+")


class JobError(Exception):
    """What stops the job before Spark starts, or one table's maintenance: said on one line."""


# -- the catalog's own API: what the procedures do not read -----------------------------------


class CatalogApi:
    """The server's catalog API (`/_iceberg/v1`): a table's metadata and maintenance configuration."""

    def __init__(self, uri: str, warehouse: str, token: str | None, credential: str | None) -> None:
        self.root = uri.rstrip("/") + "/v1"
        self.warehouse = warehouse
        self.token = token or self._traded(credential or "")
        config = self._get("/config?" + urllib.parse.urlencode({"warehouse": warehouse}))
        prefix = str(config.get("overrides", {}).get("prefix", ""))
        self.prefix = f"/{prefix}" if prefix else ""

    def table_metadata(self, levels: tuple[str, ...], name: str) -> dict[str, Any]:
        # Only the snapshots refs point at: a big table's full list is of no use here.
        return dict(self._get(self._table(levels, name) + "?snapshots=refs")["metadata"])

    def table_maintenance(self, levels: tuple[str, ...], name: str) -> dict[str, Any]:
        return dict(self._get(self._table(levels, name) + "/maintenance")["configuration"])

    def warehouse_maintenance(self) -> dict[str, Any]:
        warehouse = urllib.parse.quote(self.warehouse, safe="")
        return dict(self._get(f"/warehouses/{warehouse}/maintenance")["configuration"])

    def _table(self, levels: tuple[str, ...], name: str) -> str:
        namespace = urllib.parse.quote("\x1f".join(levels), safe="")
        return f"{self.prefix}/namespaces/{namespace}/tables/{urllib.parse.quote(name, safe='')}"

    def _traded(self, credential: str) -> str:
        """A catalog user's KEY:SECRET traded for a bearer token (OAuth2 client credentials)."""
        key, colon, secret = credential.partition(":")
        if not colon or not key or not secret:
            raise JobError(f"no token: set ${TOKEN_VARIABLE}, or ${CREDENTIAL_VARIABLE} to KEY:SECRET")
        form = {"grant_type": "client_credentials", "client_id": key, "client_secret": secret}
        body = urllib.parse.urlencode(form).encode()
        return str(self._request("/oauth/tokens", body, {})["access_token"])

    def _get(self, path: str) -> Any:
        return self._request(path, None, {"Authorization": f"Bearer {self.token}"})

    def _request(self, path: str, body: bytes | None, headers: dict[str, str]) -> Any:
        if not self.root.startswith(("http://", "https://")):
            raise JobError(f"invalid catalog URI {self.root!r}: expected http(s)://HOST[:PORT]/_iceberg")
        request = urllib.request.Request(self.root + path, data=body, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - checked above
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise JobError(f"{path.partition('?')[0]}: HTTP {error.code}: {_message(error)}") from None
        except (urllib.error.URLError, OSError) as error:
            raise JobError(f"cannot reach {self.root}: {getattr(error, 'reason', error)}") from None


def _message(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read())
        return str(body["error"]["message"] if "error" in body else body["message"])
    except (ValueError, KeyError, TypeError):
        return str(error.reason)


# -- what to call: pure, from the configuration and the table's metadata ------------------------


@dataclass(frozen=True)
class Kind:
    """One maintenance kind of a configuration in S3 Tables' shape: on or off, and its settings."""

    enabled: bool
    settings: dict[str, Any]


def kind_of(configuration: dict[str, Any], name: str) -> Kind:
    value = configuration[name]
    return Kind(value.get("status") == "enabled", dict(value.get("settings", {}).get(name, {})))


@dataclass(frozen=True)
class Call:
    """One procedure for one table: its SQL and the settings it came from, or (no SQL) why not."""

    procedure: str
    sql: str | None
    why: str


def rewrite_call(table: str, compaction: Kind, metadata: dict[str, Any]) -> Call:
    procedure = "rewrite_data_files"
    if not compaction.enabled:
        return Call(procedure, None, f"{COMPACTION} is disabled")
    sorted_table = _has_sort_order(metadata)
    strategy = compaction.settings.get("strategy", "auto")
    if strategy == "sort" and not sorted_table:
        return Call(procedure, None, "strategy 'sort' but the table has no sort order")
    chosen = "sort" if sorted_table and strategy in ("auto", "sort") else "binpack"
    target = int(compaction.settings["targetFileSizeMB"]) * MB
    options = {
        "target-file-size-bytes": str(target),
        "min-input-files": "2",
        "delete-file-threshold": "1",
        "partial-progress.enabled": "true",
    }
    if int(metadata.get("format-version", 1)) >= 2:
        options["remove-dangling-deletes"] = "true"
    pairs = ", ".join(f"{_literal(key)}, {_literal(value)}" for key, value in options.items())
    sql = (
        f"CALL {CATALOG}.system.rewrite_data_files(table => {_literal(table)}, "
        f"strategy => {_literal(chosen)}, options => map({pairs}))"
    )
    return Call(procedure, sql, f"{chosen}, targetFileSizeMB {compaction.settings['targetFileSizeMB']}")


def expire_call(table: str, management: Kind, metadata: dict[str, Any], now_ms: int) -> Call:
    procedure = "expire_snapshots"
    if not management.enabled:
        return Call(procedure, None, f"{SNAPSHOT_MANAGEMENT} is disabled")
    properties = metadata.get("properties", {})
    keep, kept_by = _property(properties, MIN_SNAPSHOTS_TO_KEEP), MIN_SNAPSHOTS_TO_KEEP
    if keep is None:
        keep, kept_by = int(management.settings["minSnapshotsToKeep"]), "minSnapshotsToKeep"
    age, aged_by = _property(properties, MAX_SNAPSHOT_AGE_MS), MAX_SNAPSHOT_AGE_MS
    if age is None:
        age, aged_by = int(management.settings["maxSnapshotAgeHours"]) * HOUR_MS, "maxSnapshotAgeHours"
    older_than = _timestamp(now_ms - age)
    sql = (
        f"CALL {CATALOG}.system.expire_snapshots(table => {_literal(table)}, "
        f"older_than => TIMESTAMP {_literal(older_than)}, retain_last => {max(keep, 1)}, "
        "stream_results => true)"
    )
    return Call(procedure, sql, f"older than {older_than} ({aged_by}), retain last {keep} ({kept_by})")


def orphan_call(table: str, removal: Kind, metadata: dict[str, Any], now_ms: int) -> Call:
    procedure = "remove_orphan_files"
    if not removal.enabled:
        return Call(procedure, None, f"{UNREFERENCED_FILE_REMOVAL} is disabled")
    days = int(removal.settings["unreferencedDays"]) + int(removal.settings["nonCurrentDays"])
    older_than = _timestamp(now_ms - days * DAY_MS)
    scheme = urllib.parse.urlsplit(str(metadata.get("location", ""))).scheme or "file"
    listing = "" if scheme in HADOOP_LISTED else ", prefix_listing => true"
    sql = (
        f"CALL {CATALOG}.system.remove_orphan_files(table => {_literal(table)}, "
        f"older_than => TIMESTAMP {_literal(older_than)}{listing})"
    )
    return Call(procedure, sql, f"older than {older_than} (unreferencedDays + nonCurrentDays = {days})")


def call_for(
    procedure: str, table: str, configuration: dict[str, Any], metadata: dict[str, Any], now_ms: int
) -> Call:
    kind = kind_of(configuration, KIND[procedure])
    if procedure == "rewrite_data_files":
        return rewrite_call(table, kind, metadata)
    if procedure == "expire_snapshots":
        return expire_call(table, kind, metadata, now_ms)
    return orphan_call(table, kind, metadata, now_ms)


def _has_sort_order(metadata: dict[str, Any]) -> bool:
    default = metadata.get("default-sort-order-id", 0)
    orders = metadata.get("sort-orders", [])
    return any(order.get("order-id") == default and order.get("fields") for order in orders)


def _property(properties: dict[str, str], name: str) -> int | None:
    value = properties.get(name)
    if value is None or not _WHOLE_NUMBER.fullmatch(value) or int(value) <= 0:
        return None
    return int(value)


def _timestamp(ms: int) -> str:
    """A timestamp Spark reads as the same instant whatever the session's time zone (UTC, `Z`)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _literal(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def identifier(*parts: str) -> str:
    """A name in Spark SQL, each part quoted (a part may hold any character)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


# -- running them -------------------------------------------------------------------------------


def session(args: argparse.Namespace, token: str | None, credential: str | None) -> Any:
    """A Spark session whose catalog `sharing` is the server's REST catalog, as the caller's."""
    from pyspark.sql import SparkSession

    catalog = f"spark.sql.catalog.{CATALOG}"
    settings = {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type": "rest",
        f"{catalog}.uri": args.uri,
        f"{catalog}.warehouse": args.warehouse,
        # A token or a key pair, both OAuth2 to Iceberg's REST client (said, else it warns).
        f"{catalog}.rest.auth.type": "oauth2",
        # Spark's own INFO lines would bury the job's; `--conf spark.log.level=INFO` brings them back.
        "spark.log.level": "WARN",
        # Spark's default hides keys with `token` or `secret` from its UI and event logs, not
        # `credential`: the catalog user's key pair would show there.
        "spark.redaction.regex": "(?i)secret|password|token|access[.]key|credential",
    }
    if token:
        settings[f"{catalog}.token"] = token
    else:
        settings[f"{catalog}.credential"] = credential or ""
        settings[f"{catalog}.oauth2-server-uri"] = args.uri.rstrip("/") + "/v1/oauth/tokens"
    if args.jars:
        settings["spark.jars"] = args.jars
    if args.packages:
        settings["spark.jars.packages"] = args.packages
    settings.update(args.conf)  # the caller's own last: they may change any of the above
    builder = SparkSession.builder.appName(f"table maintenance: {args.warehouse}")
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def run_call(spark: Any, name: str, call: Call) -> bool:
    """One procedure, and a line saying what it did; False if it failed."""
    if call.sql is None:
        print(f"{name} {call.procedure}: skipped: {call.why}", flush=True)
        return True
    try:
        rows = [row.asDict() for row in spark.sql(call.sql).collect()]
    except Exception as error:  # noqa: BLE001 - one procedure's failure is said, the others still run
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        print(f"{name} {call.procedure} ({call.why}): FAILED: {first}", flush=True)
        return False
    if call.procedure == "remove_orphan_files":
        paths = [str(row["orphan_file_location"]) for row in rows]
        print(f"{name} {call.procedure} ({call.why}): removed {len(paths)} file(s)", flush=True)
        for path in paths[:SHOWN_ORPHANS]:
            print(f"  removed {path}")
        if len(paths) > SHOWN_ORPHANS:
            print(f"  … and {len(paths) - SHOWN_ORPHANS} more")
    else:
        done = ", ".join(f"{key}={value}" for row in rows for key, value in row.items())
        print(f"{name} {call.procedure} ({call.why}): {done or 'nothing to do'}", flush=True)
    return True


def maintain(spark: Any, api: CatalogApi, levels: tuple[str, ...], name: str, procedures: list[str]) -> bool:
    """The procedures on one table; False if any failed."""
    shown = ".".join((*levels, name))
    try:
        metadata = api.table_metadata(levels, name)
        configuration = api.table_maintenance(levels, name)
        if "remove_orphan_files" in procedures:  # a warehouse's setting (S3 Tables' table bucket's)
            removal = api.warehouse_maintenance()[UNREFERENCED_FILE_REMOVAL]
            configuration = {**configuration, UNREFERENCED_FILE_REMOVAL: removal}
    except JobError as error:
        print(f"{shown}: FAILED: {error}", flush=True)
        return False
    ok = True
    # In the order that leaves least behind, the server's: the compaction, then the expiry that can
    # drop the snapshots it superseded, then the removal of what neither reaches any more.
    for procedure in [p for p in PROCEDURES if p in procedures]:
        # Each call's clock is read as it starts: a long compaction must not shorten the expiry's ages.
        now_ms = int(datetime.now(UTC).timestamp() * 1000)
        call = call_for(procedure, identifier(*levels, name), configuration, metadata, now_ms)
        ok = run_call(spark, shown, call) and ok
    return ok


def tables_of(spark: Any, levels: tuple[str, ...]) -> list[str]:
    listed = spark.sql(f"SHOW TABLES IN {CATALOG}.{identifier(*levels)}").collect()
    return sorted(str(row.tableName) for row in listed)


# -- the command line ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Iceberg maintenance of a big own-warehouse table with Spark, through the server's "
        "catalog and with the table's maintenance configuration."
    )
    parser.add_argument("--uri", required=True, help="the catalog: https://HOST[:PORT]/_iceberg")
    parser.add_argument("--warehouse", required=True)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--table", help="NAMESPACE.TABLE (a nested namespace dotted: sales.eu.orders)")
    which.add_argument("--namespace", help="every table of this namespace (dotted: sales.eu)")
    parser.add_argument(
        "--procedures", type=procedures_argument, default=list(PROCEDURES),
        help=f"comma-separated, of {', '.join(PROCEDURES)} (default: all, in that order)",
    )  # fmt: skip
    parser.add_argument("--token", help=f"a bearer token (default ${TOKEN_VARIABLE}; prefer the variable)")
    parser.add_argument(
        "--credential", help=f"a catalog user's KEY:SECRET (default ${CREDENTIAL_VARIABLE}; likewise)"
    )
    parser.add_argument("--jars", help="jars for Spark (spark.jars) when not run by spark-submit")
    parser.add_argument("--packages", help="Maven coordinates (spark.jars.packages), likewise")
    parser.add_argument(
        "--conf", action="append", type=conf_argument, default=[], metavar="KEY=VALUE",
        help="a Spark setting (repeat for more)",
    )  # fmt: skip
    return parser.parse_args(argv)


def procedures_argument(value: str) -> list[str]:
    chosen = [word.strip() for word in value.split(",") if word.strip()]
    unknown = [word for word in chosen if word not in PROCEDURES]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"procedures are {', '.join(PROCEDURES)}, not {value!r}")
    return chosen


def conf_argument(value: str) -> tuple[str, str]:
    key, equals, setting = value.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    return key, setting


def split_table(text: str) -> tuple[tuple[str, ...], str]:
    *levels, name = text.split(".")
    if not levels or not all(levels) or not name:
        raise JobError(f"expected NAMESPACE.TABLE, got {text!r}")
    return tuple(levels), name


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    token = args.token or os.environ.get(TOKEN_VARIABLE)
    credential = args.credential or os.environ.get(CREDENTIAL_VARIABLE)
    try:
        api = CatalogApi(args.uri, args.warehouse, token, credential)
        chosen = split_table(args.table) if args.table else None
    except JobError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    spark = session(args, token, credential)
    try:
        if chosen is not None:
            names = [chosen]
        else:
            levels = tuple(args.namespace.split("."))
            try:
                names = [(levels, name) for name in tables_of(spark, levels)]
            except Exception as error:  # noqa: BLE001 - Spark's (Java's) error, said on one line
                print(f"error: the tables of {args.namespace}: {str(error).strip().splitlines()[0]}")
                return 2
        failed = sum(not maintain(spark, api, levels, name, args.procedures) for levels, name in names)
    finally:
        spark.stop()
    print(f"done: {len(names)} table(s), {failed} with a failure", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
