"""The libraries whose internals the code reaches into are pinned to the minor version tested.

pyiceberg 0.11.1 satisfied `>=0.9` and answered every Iceberg `/query` with a 500
(`DataScan` had no `_manifest_planner` yet). Each library below is used through
private names; its range in pyproject.toml must hold the version installed here
(the one the tests ran) and stop before the next minor version.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: Library → a private name the code uses, and the file that uses it.
INTERNALS = {
    "pyiceberg": ("_manifest_planner", "share_store/iceberg/planning.py"),
    "starlette": ("_handle_simple", "sharing_server/http/files.py"),
    "delta-sharing": ("_session", "pyspark_delta_sharing/listing.py"),
}


def requirement(name: str) -> Requirement:
    project = PYPROJECT["project"]
    declared = project["dependencies"] + [
        r for extra in project["optional-dependencies"].values() for r in extra
    ]
    found = [Requirement(text) for text in declared if Requirement(text).name == name]
    assert found, f"{name} is not a declared dependency"
    return found[0]


@pytest.mark.parametrize("name", sorted(INTERNALS))
def test_a_library_used_through_its_internals_is_pinned_to_the_minor_version_tested(name: str) -> None:
    private, user = INTERNALS[name]
    assert re.search(rf"\.{private}\b", (ROOT / user).read_text()), f"{user} no longer uses {private}"
    specifier = requirement(name).specifier
    installed = Version(version(name))
    assert installed in specifier, f"{name} {installed} (tested) is outside {specifier}"
    next_minor = Version(f"{installed.major}.{installed.minor + 1}.0")
    assert next_minor not in specifier, f"{name} {specifier} lets an untested {next_minor} in"


def test_pyiceberg_versions_without_the_planner_the_code_uses_are_refused() -> None:
    assert Version("0.11.1") not in requirement("pyiceberg").specifier


def test_mysql_catalogs_have_their_driver_as_an_extra() -> None:
    extra = [Requirement(text) for text in PYPROJECT["project"]["optional-dependencies"]["mysql"]]
    assert [r.name for r in extra] == ["pymysql"]
