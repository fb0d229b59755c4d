"""`sharing-server share derive SHARE SCHEMA/NAME`: Spark makes a restricted table's derived files.

Run where the storage is reachable, on the share store's configuration (not through
`--server`: Spark's executors read and write the storage themselves). For each
audience (a recipient, or the share's own tokens) it binds the restriction as the
server would, plans the derived files the version still lacks, and has Spark make
them (`sharing_server.spark_jobs.derivation`). The server's next query of that
version finds them all and derives nothing: the way to prepare a big table, or a
new big version, before recipients ask (from a scheduler, after the provider's
pipeline commits).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

from share_store.errors import AdminError, Forbidden
from share_store.model import SharedTable, parse_table_ref
from share_store.persistence import ShareStore
from share_store.readers.table_readers import TableReaders
from share_store.restrictions.restricted_reader import RestrictedReader
from share_store.restrictions.restriction import Audience
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from share_store.tables.options import IcebergOptions
from sharing_server.config import ServerConfig


def audiences(store: ShareStore, table: SharedTable, names: list[str]) -> list[Audience]:
    """Whom to derive for: the recipients named, else every recipient granted the share when the
    filter names a recipient property, else the share's own tokens (no recipient)."""
    assert table.restriction is not None
    if names:
        found = []
        for name in names:
            recipient = store.get_recipient(name)
            if table.share.lower() not in {share.lower() for share in recipient.shares}:
                raise AdminError(f"recipient '{recipient.name}' is not granted share '{table.share}'")
            found.append(Audience(recipient.name, dict(recipient.properties)))
        return found
    if not table.restriction.recipient_keys:
        return [Audience()]
    return [
        Audience(recipient.name, dict(recipient.properties))
        for recipient in store.list_recipients()
        if table.share.lower() in {share.lower() for share in recipient.shares}
    ]


def run_derive(
    args: argparse.Namespace,
    store: ShareStore,
    config: ServerConfig,
    storage: Callable[[], ObjectStorage],
    catalogs: Callable[[], CatalogRegistry],
) -> None:
    schema, name = parse_table_ref(args.table)
    table = store.get_table(args.share, schema, name)
    if table.restriction is None:
        raise AdminError(f"table {table.full_name} is not restricted: there is nothing to derive")
    readers = TableReaders(storage(), catalogs(), store, iceberg=IcebergOptions(config.options.iceberg))
    plans = []
    for audience in audiences(store, table, args.recipient):
        who = audience.recipient or "the share's own tokens"
        reader = readers.reader(table_for(table, audience))
        assert isinstance(reader, RestrictedReader)
        try:
            tasks = reader.derivation_tasks(args.version)
        except Forbidden as refused:  # a recipient the table is closed to: nothing of it to derive
            print(f"{who}: skipped: {refused.message}")
            continue
        print(f"{who}: {len(tasks)} file(s) to derive, {sum(t.size for t in tasks):,} bytes of source")
        plans.append((reader, tasks))
    if args.dry_run:
        return
    todo = [(reader, tasks) for reader, tasks in plans if tasks]
    if not todo:
        print("Nothing to derive: every file is in the cache.")
        return
    from pyspark.sql import SparkSession

    from sharing_server.spark_jobs.derivation import derive_on_spark

    # A session already running in this process (a notebook's) is used and left running.
    ours = SparkSession.getActiveSession() is None
    if args.master.startswith("local") and not os.environ.get("PYSPARK_PYTHON"):
        # Local executors run this Python, which has the package; a cluster's are its own.
        os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = SparkSession.builder.master(args.master).appName("sharing-server share derive").getOrCreate()
    try:
        for reader, tasks in todo:
            started = time.monotonic()
            cache = (reader.files.bucket, reader.files.prefix)
            done = derive_on_spark(spark, tasks, dict(config.storage), cache)
            print(
                f"Derived {done.files} file(s) ({done.rows:,} rows kept of {done.source_bytes:,} bytes "
                f"of source) in {time.monotonic() - started:.1f} s."
            )
    finally:
        if ours:
            spark.stop()


def table_for(table: SharedTable, audience: Audience) -> SharedTable:
    import dataclasses

    return dataclasses.replace(table, audience=audience)
