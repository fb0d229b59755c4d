"""`sharing-server table maintenance spark [ALIAS] WAREHOUSE NAMESPACE [TABLE]`: Spark maintains a big table.

Launches the job `sharing_server.spark_jobs.maintenance` (what it does and when to use it: its
docstring) on one table of an own warehouse, or on every table of a namespace, through the
running server's catalog (`--server URL`, the catalog at URL/_iceberg): with `spark-submit`
(`--spark-submit PATH`, say for a cluster; `--jars`, `--packages` and `--conf` go to it), or
with a Python that has pyspark and Java (`--python PATH`, default this one; those go to the
job's session). The job is a file of the installed package, found by its module, so this works
from a wheel as from the repository.

The bearer token (`--token`, else the admin token) or a catalog user's `KEY:SECRET`
(`--credential`, or $SHARING_CATALOG_CREDENTIAL) reaches the job in its environment, never on a
command line, where `ps` would show it; `--dry-run` prints the command and runs nothing. The
grammar (`table_grammar`) sets `warehouse`, `namespace` and `table` (None: the whole
namespace); `add_arguments` adds the options.
"""

from __future__ import annotations

import argparse
import inspect
import os
import shlex
import subprocess
import sys
from pathlib import Path

from share_store.errors import AdminError
from sharing_server import paths
from sharing_server.spark_jobs import maintenance as job

JOB = Path(inspect.getfile(job))
#: Where `--server` comes from when the option is not given after the command.
SERVER_VARIABLE = "SHARING_ADMIN_URL"
ADMIN_TOKEN_VARIABLE = "SHARING_ADMIN_TOKEN"  # noqa: S105 - a variable's name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `table maintenance spark`, after the words the grammar adds."""
    parser.add_argument(
        "--server",
        # Unset unless given here: the top-level `--server` (and $SHARING_ADMIN_URL) then stands.
        default=argparse.SUPPRESS,
        metavar="URL",
        help=f"the running server, whose catalog is URL/_iceberg (default: the top-level --server, "
        f"${SERVER_VARIABLE})",
    )
    parser.add_argument(
        "--token",
        help=f"a bearer token for the catalog (default: the admin token, --admin-token or "
        f"${ADMIN_TOKEN_VARIABLE}; prefer the variable)",
    )
    parser.add_argument(
        "--credential",
        metavar="KEY:SECRET",
        help=f"a catalog user's keys instead of a token (default ${job.CREDENTIAL_VARIABLE}; prefer it)",
    )
    parser.add_argument(
        "--procedures",
        type=job.procedures_argument,
        default=list(job.PROCEDURES),
        metavar="NAME[,NAME…]",
        help=f"Iceberg's procedures to run, of {', '.join(job.PROCEDURES)} (default: all, in that order)",
    )
    parser.add_argument(
        "--spark-submit",
        metavar="PATH",
        help="submit the job with this spark-submit (default: run it with --python, in a local Spark)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the Python with pyspark that runs the job (default: this one); with --spark-submit, the "
        "driver's and executors' (spark.pyspark.python)",
    )
    parser.add_argument(
        "--jars", metavar="JAR[,JAR…]", help="jars for Spark: Iceberg's Spark runtime, at least"
    )
    parser.add_argument(
        "--packages", metavar="COORDINATES", help="Maven coordinates for Spark, instead of --jars"
    )
    parser.add_argument(
        "--conf",
        action="append",
        type=job.conf_argument,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeat for more), e.g. spark.sql.catalog.sharing.KEY=VALUE",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the command, run nothing")


def run(args: argparse.Namespace) -> None:
    """Launch the job (or, with --dry-run, print its command); AdminError if it cannot or failed."""
    command = spark_command(args)
    if args.dry_run:
        print(shlex.join(command))
        return
    environment = job_environment(args)
    sys.stdout.flush()  # the job's lines come after ours
    try:
        done = subprocess.run(command, env=environment, check=False)  # noqa: S603 - our own job, no shell
    except OSError as error:  # no such spark-submit or Python, or not executable
        raise AdminError(f"cannot run {command[0]}: {error.strerror or error}") from None
    if done.returncode == 1:
        raise AdminError("the maintenance of some table failed: its line above says why")
    if done.returncode != 0:
        raise AdminError(f"the Spark job failed (exit status {done.returncode}): see its output above")


def spark_command(args: argparse.Namespace) -> list[str]:
    """The command that runs the job on the table (or namespace) of `args`, without a secret."""
    which = ["--table", f"{args.namespace}.{args.table}"] if args.table else ["--namespace", args.namespace]
    job_args = [
        str(JOB),
        *("--uri", catalog_uri(args), "--warehouse", args.warehouse),
        *which,
        *("--procedures", ",".join(args.procedures)),
    ]
    conf = [f"{key}={value}" for key, value in args.conf]
    if args.spark_submit:
        submit = [args.spark_submit]
        if args.jars:
            submit += ["--jars", args.jars]
        if args.packages:
            submit += ["--packages", args.packages]
        if args.python:
            conf.insert(0, f"spark.pyspark.python={args.python}")
        for setting in conf:
            submit += ["--conf", setting]
        return [*submit, *job_args]
    command = [args.python or sys.executable, *job_args]
    if args.jars:
        command += ["--jars", args.jars]
    if args.packages:
        command += ["--packages", args.packages]
    for setting in conf:
        command += ["--conf", setting]
    return command


def catalog_uri(args: argparse.Namespace) -> str:
    server = getattr(args, "server", None) or os.environ.get(SERVER_VARIABLE)
    if not server:
        raise AdminError(
            f"Spark maintains a table through the server's catalog: --server URL (or ${SERVER_VARIABLE})"
        )
    if not server.startswith(("http://", "https://")):
        raise AdminError(f"invalid --server {server!r}: expected http(s)://HOST[:PORT]")
    return server.rstrip("/") + paths.WAREHOUSE_PREFIX


def job_environment(args: argparse.Namespace) -> dict[str, str]:
    """This process's environment with the job's one secret (a token, or a catalog user's keys) and
    its Python for Spark."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in (job.TOKEN_VARIABLE, job.CREDENTIAL_VARIABLE)
    }
    credential = args.credential or os.environ.get(job.CREDENTIAL_VARIABLE)
    token = args.token or (
        None if credential else getattr(args, "admin_token", None) or os.environ.get(ADMIN_TOKEN_VARIABLE)
    )
    if args.spark_submit:
        # The spark-submit given runs the Spark it belongs to, which it finds itself without
        # SPARK_HOME: one inherited from this process (a PySpark of another version, say) would
        # have it run that Spark instead, with a runtime jar built for another Scala.
        environment.pop("SPARK_HOME", None)
    if args.python:  # spark-submit of a pip-installed pyspark finds its Spark with this Python
        environment["PYSPARK_PYTHON"] = args.python
        # The driver too: one inherited (a PySpark of another version) would drive this Spark.
        environment["PYSPARK_DRIVER_PYTHON"] = args.python
    elif not args.spark_submit:  # Spark's Python workers, the job's Python
        environment.setdefault("PYSPARK_PYTHON", sys.executable)
    if token:
        environment[job.TOKEN_VARIABLE] = token
    elif credential:
        environment[job.CREDENTIAL_VARIABLE] = credential
    else:
        raise AdminError(
            f"the catalog needs a token: --token, the admin token (${ADMIN_TOKEN_VARIABLE}) or "
            f"a catalog user's --credential KEY:SECRET"
        )
    return environment
