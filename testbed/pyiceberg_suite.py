"""pyiceberg's own catalog test suite, taken from its source distribution on PyPI.

`make pyiceberg-suite` runs `python -m testbed.pyiceberg_suite DIR`: it downloads the sdist of
the pyiceberg version installed in the project's venv (never a newer one: the suite tests the
client we ship against), and keeps only its `tests/` tree and `pyproject.toml` (the suite's
pytest settings) under `DIR/pyiceberg-<version>/`. Nothing of it is committed.
`tests/end_to_end/test_pyiceberg_catalog_suite.py` runs it against the server.

One file is added: an empty `tests/__init__.py`. The suite imports its helpers as
`tests.conftest`, and without it that name would resolve to this project's own `tests`
package (a regular package wins over a namespace one); no test of the suite changes.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path, PurePosixPath

KEPT = ("tests/", "pyproject.toml")


def suite_dir(cache: Path) -> Path:
    return cache / f"pyiceberg-{version('pyiceberg')}"


def fetch(cache: Path) -> Path:
    """The suite of the installed pyiceberg under `cache`, downloaded unless it is there."""
    target = suite_dir(cache)
    if (target / "tests" / "integration" / "test_catalog.py").exists():
        return target
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             f"pyiceberg=={version('pyiceberg')}", "--dest", download],
            check=True,
        )  # fmt: skip
        (sdist,) = Path(download).glob("pyiceberg-*.tar.gz")
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cache))
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                inside = PurePosixPath(member.name).parts[1:]  # below `pyiceberg-<version>/`
                relative = "/".join(inside)
                if not inside or not relative.startswith(KEPT) or not (member.isfile() or member.isdir()):
                    continue
                member.name = relative
                archive.extract(member, staging, filter="data")
    (staging / "tests" / "__init__.py").write_text("")
    staging.rename(target)  # whole or not at all: a broken download leaves no half suite
    return target


if __name__ == "__main__":
    print(fetch(Path(sys.argv[1])))
