"""Maintenance of an own-warehouse table too big for the server's own, by Spark: Iceberg's procedures.

Use it for a table the server's own maintenance (compaction, snapshot expiry, unreferenced-file
removal, which it runs in its own process) is too small for: hundreds of GB to rewrite, files
beyond counting to list, equality deletes. It runs Iceberg's `rewrite_data_files`,
`expire_snapshots` and `remove_orphan_files` on the table (or on every table of a namespace)
through the server's catalog at `/_iceberg`, with the table's maintenance configuration as the
server serves it (`GET .../tables/{t}/maintenance`), and prints what each did:

    export SHARING_CATALOG_TOKEN=...        # the admin token; or a catalog user's keys:
    # export SHARING_CATALOG_CREDENTIAL=KEY:SECRET
    spark-submit --jars iceberg-spark-runtime-3.5_2.12-1.10.2.jar examples/spark_maintenance.py \\
        --uri http://127.0.0.1:8080/_iceberg --warehouse analytics --table sales.orders \\
        [--procedures rewrite_data_files,expire_snapshots]

(or `python examples/spark_maintenance.py ... --jars JAR` with a pyspark 3.5, or
`sharing-server table maintenance spark WAREHOUSE NAMESPACE [TABLE] --server URL`, which builds
this command). `--help` lists the options; the job's code and its full account of what it
calls with which settings is `sharing_server/spark_jobs/maintenance.py`, shipped with the server
so that the CLI finds it in an installed package: this file only runs it, from the repository
beside it or from the installed package, in a Python where the server need not be installed.
"""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path

JOB = Path("sharing_server") / "spark_jobs" / "maintenance.py"


def job_path() -> Path:
    """The job in the repository this example is part of, else in the installed package (found
    without importing it: the server's dependencies need not be where Spark runs)."""
    beside = Path(__file__).resolve().parents[1] / JOB
    if beside.is_file():
        return beside
    spec = importlib.util.find_spec("sharing_server")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"neither {beside} nor an installed sharing_server: run from the repository")
    return Path(next(iter(spec.submodule_search_locations))).parent / JOB


if __name__ == "__main__":
    runpy.run_path(str(job_path()), run_name="__main__")
