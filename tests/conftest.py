"""Session fixtures: one SeaweedFS S3 server, one PostgreSQL cluster, one sharing server per storage kind;
and `server`, a sharing server of each test module's own (its settings the module's `server_settings`).

Every server binds 127.0.0.1 on a free port and stops at the end of its scope.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from share_store.authentication.tokens import hash_secret
from share_store.model import parse_create_args
from share_store.persistence import ShareStore
from share_store.storage.base import ObjectStorage
from share_store.table_sources.registry import CatalogRegistry
from sharing_server.auth.profiles import write_profile
from sharing_server.config import ServerConfig, load_config
from sharing_server.startup import build_app, open_services
from testbed.seaweed import SeaweedS3, free_port, start_seaweed
from tests.live_server import LiveServer
from tests.postgres import Postgres, start_postgres

#: Spark- and delta-rs-written Delta tables kept in the repository (tests/data/README.md says
#: whose they are); SHARING_TESTDATA points the tests at another copy.
TESTDATA = Path(os.environ.get("SHARING_TESTDATA") or Path(__file__).resolve().parent / "data" / "delta")

TESTDATA_BUCKET = "testdata"

#: The provider's token of the servers the tests start (`server`, and the modules' own).
ADMIN_TOKEN = "dsa_test-admin-token-0123456789abcdefghijklmnop"


@dataclass
class Deployment:
    """A running sharing server with its store, storage and config."""

    config: ServerConfig
    store: ShareStore
    storage: ObjectStorage
    server: LiveServer
    tmp: Path
    catalogs: CatalogRegistry
    secret: bytes

    @property
    def endpoint(self) -> str:
        return self.config.endpoint

    def share_tables(
        self,
        share: str,
        tables: dict[str, str],
        bucket: str = TESTDATA_BUCKET,
        schema: str = "default",
        history: bool = True,
    ) -> None:
        """Create `share` holding `{table name: path in bucket}`."""
        args = [schema] + [f"{name}:delta:{bucket}:{path}" for name, path in tables.items()]
        self.store.create_share(share, parse_create_args(args), history_shared=history)

    def token(self, share: str, expires: timedelta | None = timedelta(days=1)) -> str:
        _, secret = self.store.create_token(share, expires, "test")
        return secret

    def profile(self, share: str) -> str:
        secret = self.token(share)
        path = self.tmp / f"{share}-{secret[-6:]}.share"
        write_profile(path, self.endpoint, secret, None)
        return str(path)

    def catalog_api(self, bearer: str, timeout: float = 120) -> httpx.Client:
        """The writable catalog's API (`/_iceberg/v1`) with a bearer token: the admin's or a user's."""
        headers = {"Authorization": f"Bearer {bearer}"}
        return httpx.Client(base_url=f"{self.server.url}/_iceberg/v1", headers=headers, timeout=timeout)


def audit_records(server: Deployment) -> list[dict]:
    path = server.tmp / "audit.log"
    if not path.exists():
        return []
    *complete, _partial = path.read_text().split("\n")  # a line still being written is left for later
    return [json.loads(line) for line in complete]


def audit_record(server: Deployment, request_id: str) -> dict:
    """The audit line of one request, waiting for it: the line is written after the last byte is sent."""
    deadline = time.monotonic() + 10
    while True:
        found = [r for r in audit_records(server) if r["request_id"] == request_id]
        if found or time.monotonic() > deadline:
            assert found, f"no audit line for request {request_id}"
            return found[0]
        time.sleep(0.02)


def audit_lines(server: Deployment, matches: Callable[[dict], bool], count: int = 1) -> list[dict]:
    """The audit lines `matches` accepts, waiting (10 s at most) until there are `count` of them: a
    line is written after the response's last byte is sent."""
    deadline = time.monotonic() + 10
    while True:
        found = [record for record in audit_records(server) if matches(record)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def deploy(
    tmp: Path,
    storage: dict[str, str],
    catalogs: dict[str, dict[str, str]] | None = None,
    env: dict[str, str] | None = None,
) -> Deployment:
    """Serve on a free port; `env` adds `SHARING_*` settings (admin token hash, limits, store URL)."""
    port = free_port()
    settings = {
        "SHARING_SERVER_DATA_DIR": str(tmp / "data-dir"),
        "SHARING_SERVER_PORT": str(port),
        "SHARING_SERVER_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "SHARING_SERVER_AUDIT_LOG": str(tmp / "audit.log"),
        # Background maintenance (on by default) would rewrite tests' tables under them whenever a
        # module outlasts its interval; the tests of it turn it back on.
        "SHARING_MAINTENANCE_BACKGROUND": "false",
    }
    settings.update({f"SHARING_STORAGE_{k.upper()}": v for k, v in storage.items()})
    settings.update(env or {})
    config = load_config(env=settings)
    config.catalogs = catalogs or {}
    services = open_services(config)
    server = LiveServer(build_app(services), port, options=config.options).start()
    return Deployment(
        config, services.store, services.storage, server, tmp, services.catalogs, services.secret
    )


@contextmanager
def served_locally(tmp: Path, admin_token: str, env: dict[str, str] | None = None) -> Iterator[Deployment]:
    """A server on local storage under `tmp` that takes `admin_token` as the provider's, with `env`'s
    `SHARING_*` settings besides, stopped after."""
    (tmp / "storage").mkdir()
    deployment = deploy(
        tmp, {"type": "local", "root": str(tmp / "storage")},
        env={"SHARING_ADMIN_TOKEN_HASH": hash_secret(admin_token), **(env or {})},
    )  # fmt: skip
    try:
        yield deployment
    finally:
        deployment.server.stop()
        deployment.store.close()


def copy_testdata(deployment: Deployment, directory: str, key: str | None = None) -> None:
    """The kept Delta table `directory` copied into the served local storage's testdata bucket, at
    `key` (its own name by default); the storage reads each request's files when it is asked."""
    root = Path(deployment.config.storage["root"]) / TESTDATA_BUCKET
    shutil.copytree(TESTDATA / directory, root / (key or directory))


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """The `SHARING_*` settings a module's `server` runs with besides the admin token: none here; a
    module that needs some (limits, maintenance) overrides this fixture with its own."""
    return {}


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, server_settings: dict[str, str]
) -> Iterator[Deployment]:
    """A server of the module's own on empty local storage that takes `ADMIN_TOKEN` as the
    provider's, with the module's `server_settings`; stopped after the module's last test."""
    tmp = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2])
    with served_locally(tmp, ADMIN_TOKEN, server_settings) as deployment:
        yield deployment


@pytest.fixture(scope="session")
def testdata() -> Path:
    assert TESTDATA.exists(), f"test tables not found at {TESTDATA}"
    return TESTDATA


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("local")
    root = tmp / "buckets"
    shutil.copytree(testdata, root / TESTDATA_BUCKET)
    deployment = deploy(tmp, {"type": "local", "root": str(root)})
    yield deployment
    deployment.server.stop()
    deployment.store.close()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    server = start_seaweed(tmp_path_factory.mktemp("seaweed"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


_database_ids = itertools.count(1)


@pytest.fixture
def postgres_url(postgres: Postgres, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for this test (dropped afterwards); its SQLAlchemy URL."""
    slug = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())
    name = f"t{next(_database_ids)}_{slug}"[:63]
    yield postgres.create_database(name)
    postgres.drop_database(name)


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory, seaweed: SeaweedS3, testdata: Path) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("s3")
    client = seaweed.client()
    client.create_bucket(Bucket=TESTDATA_BUCKET)
    deployment = deploy(
        tmp,
        seaweed.storage_config(path_style="true"),
    )
    deployment.seaweed = seaweed  # type: ignore[attr-defined]
    yield deployment
    deployment.server.stop()
    deployment.store.close()


def read_profile(path: str) -> dict[str, object]:
    return json.loads(Path(path).read_text())


# Iceberg tables with row-level deletes, written by Spark 3.5 + Iceberg (tests/iceberg_writer.py,
# with the session of testbed/spark_iceberg/, which `make spark-iceberg` sets up).
ICEBERG_WRITER = Path(__file__).with_name("iceberg_writer.py")
ROOT = Path(__file__).resolve().parents[1]
ICEBERG_SESSION = ROOT / "testbed" / "spark_iceberg" / "session.py"
CACHE = ROOT / ".cache"
SPARK_ICEBERG_PYTHON = CACHE / "spark-iceberg" / "venv" / "bin" / "python"


@pytest.fixture(scope="session")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Spark-written tables under BASE/buckets/spark, with BASE/expected.json."""
    # Written again whenever the writer or its session changes.
    key = hashlib.sha256(ICEBERG_WRITER.read_bytes() + ICEBERG_SESSION.read_bytes()).hexdigest()[:12]
    base = CACHE / "iceberg-deletes" / key
    if not (base / "expected.json").exists():
        assert SPARK_ICEBERG_PYTHON.exists(), (
            "the Spark 3.5 + Iceberg environment is missing: run `make spark-iceberg`"
        )
        shutil.rmtree(base, ignore_errors=True)
        (base / "buckets").mkdir(parents=True)
        draft = base / "expected.draft"
        log = tmp_path_factory.mktemp("spark-iceberg") / "writer.log"
        with log.open("w") as output:
            done = subprocess.run(
                [str(SPARK_ICEBERG_PYTHON), str(ICEBERG_WRITER), str(base / "buckets" / "spark"), str(draft)],
                stdout=output,
                stderr=subprocess.STDOUT,
                timeout=900,
                check=False,
            )
        assert done.returncode == 0, log.read_text()[-3000:]
        draft.rename(base / "expected.json")  # the cache is complete only now
    return base


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for every test module that reads through the deltaSharing source."""
    import os
    import sys

    from pyspark.sql import SparkSession

    # Spark's Python workers must be this interpreter, which has the data source installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sharing-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    yield session
    session.stop()
