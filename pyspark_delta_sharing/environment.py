"""Whether the Python Spark started for us can run this source, and what to set when it cannot.

Spark runs a Python data source in Python workers it starts itself, with
`spark.pyspark.python`, else `PYSPARK_PYTHON`, else `python3` from PATH; not
necessarily the interpreter of the user's program. When that Python lacks our
dependencies, importing them at module level would make Spark skip the whole
package and report only `DATA_SOURCE_NOT_FOUND`. So the package imports
nothing but PySpark at first, and this check names the interpreter, what it
lacks, and the setting that fixes it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import cache
from pathlib import Path

#: Imported by the source on workers; PySpark itself is always there (Spark ships it).
REQUIRED = ("pyarrow", "numpy", "requests", "delta_sharing", "pyroaring")


class MissingDependencies(ImportError):
    """The worker's Python cannot import what the data source needs."""


def missing_modules() -> list[str]:
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def environment_python(spark_home: str | None) -> str | None:
    """The interpreter of the environment PySpark is installed in, from its SPARK_HOME.

    A pip-installed PySpark lives in `<env>/lib/pythonX.Y/site-packages/pyspark`
    (Windows: `<env>/Lib/site-packages/pyspark`) and Spark runs with SPARK_HOME
    there, so the user's own environment is found even when the worker is
    another Python.
    """
    if not spark_home:
        return None
    home = Path(spark_home)
    for env in list(home.parents)[1:4]:
        for candidate in (env / "bin" / "python", env / "bin" / "python3", env / "python.exe"):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def advice(missing: list[str], executable: str, spark_home: str | None) -> str:
    """What to tell the user when `executable` lacks `missing`."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    lacks = ", ".join(missing)
    suggested = environment_python(spark_home)
    if suggested and Path(suggested).resolve() != Path(executable).resolve():
        fix = (
            f"Set PYSPARK_PYTHON={suggested} (or the Spark setting spark.pyspark.python) before the "
            "Spark session starts, so that Spark's Python workers run the interpreter that has "
            "table-sharing-server installed."
        )
    else:
        fix = (
            "Install table-sharing-server into that interpreter, or set PYSPARK_PYTHON (or "
            "spark.pyspark.python) to an interpreter that has it, before the Spark session starts."
        )
    return (
        f"The deltaSharing data source runs in the Python that Spark starts for its workers, "
        f"{executable} (Python {version}), which cannot import {lacks}. {fix}"
    )


@cache
def check() -> None:
    """Raise `MissingDependencies`, saying what to set, if this Python cannot run the source."""
    missing = missing_modules()
    if missing:
        raise MissingDependencies(advice(missing, sys.executable, os.environ.get("SPARK_HOME")))
