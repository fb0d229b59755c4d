"""The recipient's incremental job: the shared `orders` table streamed into the recipient's own Delta table.

    python examples/tpch_pipeline.py --workdir .pipeline      # the provider's tables and share
    python examples/incremental_orders.py --workdir .pipeline

A `readStream.format("deltaSharing")` query with `Trigger.AvailableNow` runs like
a scheduled job: its first run copies the table's snapshot, each later run only
the commits the provider made since, from where its checkpoint says the last run
ended. Each micro-batch is appended to the recipient's table by deltalake with
the batch id as an idempotent transaction (Delta's `txnAppId`/`txnVersion`), so a
batch Spark runs again after a crash is not written twice.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tpch_pipeline import _wait_for, free_port, local_spark, orders_between, step

APP_ID = "recipient-orders-from-share"


def append_batch(target: Path):  # noqa: ANN201 - a foreachBatch function
    """Spark's foreachBatch: one micro-batch appended to the Delta table at `target`, once."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    def write(frame, batch_id: int) -> None:  # noqa: ANN001 - a Spark DataFrame
        done = (
            DeltaTable(str(target)).transaction_version(APP_ID) if (target / "_delta_log").exists() else None
        )
        if done is not None and done >= batch_id:
            return  # written before a crash: Spark runs the batch again, the table has it
        data = frame.toArrow()
        if data.num_rows == 0:
            return
        done = CommitProperties(app_transactions=[Transaction(APP_ID, batch_id)])
        write_deltalake(str(target), data, mode="append", commit_properties=done)

    return write


def stream_once(spark, url: str, target: Path, checkpoint: Path) -> None:  # noqa: ANN001
    """One run of the job: every commit of the shared table not yet in `target`, then stop."""
    query = (
        spark.readStream.format("deltaSharing")
        .load(url)
        .writeStream.foreachBatch(append_batch(target))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception():
        raise RuntimeError(str(query.exception()))


def provider_commits(spark, table: Path, count: int, size: int) -> None:  # noqa: ANN001
    """The provider's next `count` commits to its orders table, `size` new orders each."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    current = DeltaTable(str(table)).to_pyarrow_table(columns=["o_orderkey", "o_custkey"])
    last, customers = max(current["o_orderkey"].to_pylist()), max(current["o_custkey"].to_pylist())
    schema = pa.schema(DeltaTable(str(table)).schema().to_arrow())
    for n in range(count):
        first = last + 1 + n * size
        rows = orders_between(spark, first, first + size - 1, customers).toArrow()
        write_deltalake(str(table), rows.cast(schema), mode="append")
        version = DeltaTable(str(table)).version()
        step(f"provider: committed orders {first}..{first + size - 1} (version {version})")


def recipient_keys(target: Path) -> list[int]:
    from deltalake import DeltaTable

    return sorted(DeltaTable(str(target)).to_pyarrow_table(columns=["o_orderkey"])["o_orderkey"].to_pylist())


def run(spark, workdir: Path, commits: int = 2, size: int = 100) -> dict[str, int]:  # noqa: ANN001
    import delta_sharing
    from deltalake import DeltaTable

    workdir = workdir.resolve()
    config, profile = workdir / "sharing.toml", workdir / "test.share"
    if not config.exists() or not profile.exists():
        raise SystemExit(f"no share in {workdir}: run examples/tpch_pipeline.py --workdir {workdir} first")
    # The provider's server was stopped; serve it again on a free port, the profile following.
    port = free_port()
    config.write_text(re.sub(r"(?m)^port = \d+$", f"port = {port}", config.read_text()))
    credentials = json.loads(profile.read_text())
    credentials["endpoint"] = re.sub(r"//127\.0\.0\.1:\d+", f"//127.0.0.1:{port}", credentials["endpoint"])
    profile.write_text(json.dumps(credentials))
    provider_table = workdir / "buckets" / "testdelta" / "tpch" / "orders"
    target = workdir / "recipient" / "orders"
    checkpoint = workdir / "recipient" / "_checkpoints" / "orders"
    url = f"{profile}#test.tpch.orders"

    step(f"serving the share on 127.0.0.1:{port}")
    log = (workdir / "server-incremental.log").open("wb")
    server = subprocess.Popen(  # noqa: S603 - our own server
        [sys.executable, "-m", "sharing_server", "--config", str(config), "serve"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(port)
        step(f"recipient: streaming {url.split('#')[1]} into its own Delta table {target}")
        stream_once(spark, url, target, checkpoint)
        first_run = len(recipient_keys(target))
        version = DeltaTable(str(target)).version()
        step(f"recipient: first run copied {first_run} orders (its table at version {version})")
        provider_commits(spark, provider_table, commits, size)
        stream_once(spark, url, target, checkpoint)
        step(f"recipient: next run added {len(recipient_keys(target)) - first_run} orders")
        version = DeltaTable(str(target)).version()
        stream_once(spark, url, target, checkpoint)  # nothing new: no commit
        unchanged = DeltaTable(str(target)).version() == version
        shared = sorted(int(k) for k in delta_sharing.load_as_pandas(url)["o_orderkey"])
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()

    got = recipient_keys(target)
    if got != shared:
        raise AssertionError(
            f"the recipient's table ({len(got)} orders) differs from the share ({len(shared)})"
        )
    if not unchanged:
        raise AssertionError("a run with no new commits wrote to the recipient's table")
    step(f"OK: the recipient's table equals the shared table ({len(got)} orders, none twice)")
    return {"first_run": first_run, "orders": len(got), "new": len(got) - first_run}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", type=Path, default=Path(".pipeline"))
    parser.add_argument("--commits", type=int, default=2, help="the provider's new commits between runs")
    parser.add_argument("--size", type=int, default=100, help="new orders per commit")
    args = parser.parse_args()
    spark = local_spark("incremental-orders")
    try:
        print(run(spark, args.workdir, args.commits, args.size))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
