"""pyiceberg's own catalog test suite (apache/iceberg-python `tests/integration/test_catalog.py`, the
installed version's, `make pyiceberg-suite`) run in full against the server's `/_iceberg`.

The suite's hook for a third-party REST catalog is its `rest_test_catalog` fixture: a catalog
named by `PYICEBERG_TEST_CATALOG` and configured from `PYICEBERG_CATALOG__*` variables, as a user
configures pyiceberg. It runs twice: as the provider's engine (the admin token, a warehouse on
local disk), and as a catalog user configured as AIStor documents pyiceberg (SigV4 with the
user's keys, `s3tables` signing) with vended keys on SeaweedFS, with no S3 keys of its own.

What the suite skips, it skips by itself: names with `/` (pyiceberg assumes a REST catalog has
none) and names with `.`, which the server refuses on purpose (`share_store/catalog/
names.py`: a namespace's levels are joined with `.` in policy ARNs, so `a.b` would be the
two-level `a`, `b`). The server says so in `/v1/config`'s defaults with the suite's own
`supports_dot_in_identifier` (a catalog property, which a REST catalog's users could not set here:
the suite reads no configuration file, and an environment variable cannot spell `_`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from share_store.catalog.users import CatalogUsers
from testbed.pyiceberg_suite import suite_dir
from testbed.seaweed import WRITER_ROLE_ARN, SeaweedS3
from tests.conftest import ADMIN_TOKEN, Deployment, deploy
from tests.end_to_end.test_warehouse_catalog import signed

SUITE = suite_dir(Path(__file__).resolve().parents[2] / ".cache" / "pyiceberg-suite")
WAREHOUSE = "suite"
#: The suite's tests that skip themselves for what the catalog declares it does not support.
SKIPPED_BY_THE_SUITE = {
    "test_namespace_with_slash",
    "test_table_name_with_slash",
    "test_namespace_with_dot",
    "test_table_name_with_dot",
}


def run_suite(catalog: dict[str, str], tmp: Path) -> dict[str, str]:
    """Each test of the suite's `rest_test_catalog` runs, by name, with its outcome."""
    assert (SUITE / "tests" / "integration" / "test_catalog.py").exists(), "run `make pyiceberg-suite`"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYICEBERG_")}
    env["PYICEBERG_TEST_CATALOG"] = "ours"
    env.update({f"PYICEBERG_CATALOG__OURS__{k}": v for k, v in catalog.items()})
    # Only the plugin the suite needs: this project's own (schemathesis's) would load into it.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    report = tmp / "suite.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration/test_catalog.py", "-k", "rest_test_catalog",
         "-p", "pytest_lazy_fixtures.plugin", "-p", "no:cacheprovider", "-q", "--tb=short",
         f"--junitxml={report}"],
        cwd=SUITE, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = case.attrib["name"].removesuffix("[rest_test_catalog]")
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcomes[name] = kinds.pop() if kinds else "passed"
    assert done.returncode == 0, done.stdout[-6000:]
    return outcomes


def check(outcomes: dict[str, str]) -> None:
    assert len(outcomes) >= 40  # the whole suite of pyiceberg 0.12 ran, not a part of it
    not_passed = {name: outcome for name, outcome in outcomes.items() if outcome != "passed"}
    assert not_passed == dict.fromkeys(SKIPPED_BY_THE_SUITE, "skipped")


def test_pyiceberg_catalog_suite_as_the_providers_engine(server: Deployment, tmp_path: Path) -> None:
    api = f"{server.server.url}/_iceberg/v1"
    made = httpx.post(f"{api}/warehouses", json={"name": WAREHOUSE},
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})  # fmt: skip
    assert made.status_code == 200, made.text
    outcomes = run_suite(
        {
            "URI": f"{server.server.url}/_iceberg",
            "WAREHOUSE": WAREHOUSE,
            "TOKEN": ADMIN_TOKEN,
        },
        tmp_path,
    )
    check(outcomes)


@pytest.fixture(scope="module")
def on_s3(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3) -> Iterator[Deployment]:
    env = {
        "SHARING_WAREHOUSES_ACCESS_DELEGATION": "vended-credentials",
        "SHARING_ICEBERG_CREDENTIAL_ROLE_ARN": WRITER_ROLE_ARN,
    }
    deployment = deploy(
        tmp_path_factory.mktemp("pyiceberg-suite-s3"), seaweed.storage_config(path_style="true"), env=env
    )
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def test_pyiceberg_catalog_suite_as_a_catalog_user_with_sigv4_and_vended_keys(
    on_s3: Deployment, tmp_path: Path
) -> None:
    user = CatalogUsers(on_s3.store.transactions, on_s3.secret).create("suite-user")
    root = f"{on_s3.server.url}/_iceberg"
    made = signed(user, "POST", f"{root}/v1/warehouses", json.dumps({"name": "suite-s3"}).encode())
    assert made.status_code == 200, made.text
    outcomes = run_suite(
        {
            # AIStor's pyiceberg configuration; the variables' `_` are pyiceberg's `-` and `__` its `.`.
            "URI": root,
            "WAREHOUSE": "suite-s3",
            "REST__SIGV4_ENABLED": "true",
            "REST__SIGNING_NAME": "s3tables",
            "REST__SIGNING_REGION": "local",
            "CLIENT__REGION": "local",
            "CLIENT__ACCESS_KEY_ID": user.access_key,
            "CLIENT__SECRET_ACCESS_KEY": user.secret_key,
            "HEADER__X_ICEBERG_ACCESS_DELEGATION": "vended-credentials",
        },
        tmp_path,
    )
    check(outcomes)
