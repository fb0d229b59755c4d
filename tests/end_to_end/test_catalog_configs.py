"""The documentation's multi-catalog example, pasted into a configuration file as a provider does.

Its glue, s3tables and hms blocks carry an empty `catalog_url` beside their backend table, a
legacy `[catalog]` block holds only that empty key, and `[query]` names a default catalog. Beside
them, a `hadoop` block in the same grammar points at a local warehouse holding a real Iceberg
table (pyiceberg writes it; the Hadoop layout's `vN.metadata.json` and hint are laid beside).
Everything runs through the `sharing-server` command, each in its own process: `share list`,
`share create` of a share holding the Hadoop table, `token create`, and `serve`, which must start
with the unreachable AWS and metastore catalogs configured (they load only when a table of theirs
is read) and serve the Hadoop table to `delta_sharing`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

import delta_sharing
import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from share_store.authentication.tokens import hash_secret
from testbed.seaweed import free_port

ADMIN_TOKEN = "dsa_catalog-configs-admin-token-0123456789"

#: As the documentation writes it (its `[query]` comment included).
DOCUMENTED_EXAMPLE = """
[catalog]
catalog_url = ""
[catalogs.aws_glue]
catalog_url = ""
[catalogs.aws_glue.backend]
type = "glue"
region = "eu-west-1"
warehouse = "s3://my-bucket/wh"
[catalogs.aws_s3tables]
catalog_url = ""
[catalogs.aws_s3tables.backend]
type = "s3tables"
table_bucket_arn = "arn:aws:s3tables:eu-west-2:111122223333:bucket/my-bucket"
[catalogs.legacy_hms]
catalog_url = ""
[catalogs.legacy_hms.backend]
type = "hms"
uri = "metastore.example.com:9083"
warehouse = "s3a://my-bucket/wh"
[query]
default_catalog = "aws_glue"   # the engine's default for unqualified names
"""

ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "region": pa.array(["eu", "us", "eu", "apac"], pa.string()),
        "amount": pa.array([10.5, 20.0, 7.25, 3.0], pa.float64()),
    }
)


def write_hadoop_table(warehouse: Path, scratch: Path) -> None:
    """`sales.orders` in a Hadoop-layout warehouse: pyiceberg writes the table at
    `<warehouse>/sales/orders`, and its current metadata is laid as `v1.metadata.json` with a hint."""
    writer = SqlCatalog("writer", uri=f"sqlite:///{scratch / 'writer.db'}", warehouse=warehouse.as_uri())
    writer.create_namespace("sales")
    location = warehouse / "sales" / "orders"
    table = writer.create_table("sales.orders", schema=ROWS.schema, location=location.as_uri())
    table.append(ROWS)
    current = Path(unquote(urlparse(table.metadata_location).path))
    shutil.copyfile(current, location / "metadata" / "v1.metadata.json")
    (location / "metadata" / "version-hint.text").write_text("1")


class Provider:
    """One configuration file, and the `sharing-server` command run on it as a provider runs it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        root = tmp / "buckets"
        self.warehouse = root / "lake" / "warehouse"
        self.warehouse.mkdir(parents=True)
        write_hadoop_table(self.warehouse, tmp)
        self.config = tmp / "sharing.toml"
        settings = (
            f'[server]\nhost = "127.0.0.1"\nport = {self.port}\ndata_dir = "{tmp / "data"}"\n'
            f'audit_log = "off"\n[storage]\ntype = "local"\nroot = "{root}"\n'
            f'[admin]\ntoken_hash = "{hash_secret(ADMIN_TOKEN)}"\n'
        )
        hadoop = (
            '[catalogs.local_hadoop]\ncatalog_url = ""\n'
            f'[catalogs.local_hadoop.backend]\ntype = "hadoop"\nwarehouse = "{self.warehouse}"\n'
        )
        self.config.write_text(settings + DOCUMENTED_EXAMPLE + hadoop)
        # The provider's environment, without any SHARING_* setting of the machine running the tests.
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("SHARING_")}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sharing_server", "--config", str(self.config), *args],
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, f"sharing-server {' '.join(args)}: {done.stderr.strip()}"
        assert "Traceback" not in done.stderr
        return done.stdout

    def admin(self, path: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        return httpx.get(f"{self.url}/admin/v1{path}", headers=headers, timeout=10)


@pytest.fixture
def provider(tmp_path: Path) -> Provider:
    return Provider(tmp_path)


@pytest.fixture
def served(provider: Provider) -> Iterator[subprocess.Popen[bytes]]:
    """`sharing-server serve` in its own process, once `/healthz` answers; stopped afterwards."""
    log_path = provider.tmp / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sharing_server", "--config", str(provider.config), "serve"],
            env=provider.env,
            cwd=provider.tmp,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 90
            while True:
                if process.poll() is not None:
                    pytest.fail(f"serve stopped ({process.returncode}): {log_path.read_text()[-2000:]}")
                try:
                    if httpx.get(provider.url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"serve did not answer /healthz: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


EXAMPLE_BACKENDS = {"aws_glue": "glue", "aws_s3tables": "s3tables", "legacy_hms": "hive"}


def test_share_list_and_share_create_take_the_documented_example(provider: Provider) -> None:
    assert provider.ok("share", "list") == ""
    created = provider.ok("share", "create", "lake", "sales", "orders:uniform:local_hadoop:sales:orders")
    assert created.strip() == "Created share 'lake' with 1 table(s)."
    assert "lake\t1 table(s)" in provider.ok("share", "list")
    info = provider.ok("share", "info", "lake")
    assert "orders  [uniform] local_hadoop:sales.orders" in info


def test_a_table_of_an_example_catalog_that_cannot_be_reached_is_refused_in_one_line(
    provider: Provider,
) -> None:
    """The AWS catalogs load when a table of theirs is added, and fail there, named, not before."""
    done = provider.run("share", "create", "aws", "sales", "orders:uniform:aws_s3tables:sales:orders")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "aws_s3tables" in done.stderr
    assert provider.ok("share", "list") == ""  # nothing was created


def test_serve_starts_with_the_documented_example_and_shares_the_hadoop_table(
    provider: Provider, served: subprocess.Popen[bytes]
) -> None:
    provider.ok("share", "create", "lake", "sales", "orders:uniform:local_hadoop:sales:orders")
    profile = provider.tmp / "lake.share"
    provider.ok(
        "token", "create", "lake", "--expires", "1d", "--description", "test", "--profile", str(profile)
    )

    health = provider.admin("/health")
    assert health.status_code == 200, health.text
    catalogs = {entry["name"]: entry for entry in health.json()["catalogs"]}
    assert set(catalogs) == {*EXAMPLE_BACKENDS, "local_hadoop"}  # no legacy catalog, no embedded one
    for name, backend in {**EXAMPLE_BACKENDS, "local_hadoop": "hadoop"}.items():
        assert catalogs[name]["backend"] == backend
        assert catalogs[name]["lastError"] is None and catalogs[name]["loaded"] is False  # none loaded yet

    for use_delta_format in (False, True):
        shared = delta_sharing.load_as_pandas(
            f"{profile}#lake.sales.orders", use_delta_format=use_delta_format
        )
        assert sorted(shared.to_dict("records"), key=lambda row: row["id"]) == ROWS.to_pylist()

    catalogs = {entry["name"]: entry for entry in provider.admin("/health").json()["catalogs"]}
    assert catalogs["local_hadoop"]["loaded"] is True
    assert not any(catalogs[name]["loaded"] for name in EXAMPLE_BACKENDS)  # still never reached
