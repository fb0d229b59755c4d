"""Storage outages: 503 TEMPORARILY_UNAVAILABLE within seconds, then service back by itself.

The test runs its own SeaweedFS, since it stops it, and its own sharing server,
which keeps running through the outage: only the storage goes down and comes
back. A Delta table (uploaded from the test data) and an Iceberg table (SQL
catalog on SQLite, warehouse on SeaweedFS) are read before, during and after.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from sqlalchemy import make_url

from share_store.delta.reader import DeltaTableReader
from share_store.errors import StorageUnavailable
from share_store.model import TableSpec
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.table_sources.registry import CatalogRegistry
from sharing_server.delta_sharing.responses import TableResponse
from testbed.deltalake_access import deltalake_options, table_uri
from testbed.seaweed import SeaweedS3, start_seaweed, upload_tree
from tests.conftest import Deployment, deploy
from tests.end_to_end.test_client_local import canonical

BUCKET = "outage"
DELTA = "simple_table_with_cdc"  # small, change data feed on: every endpoint answers for it
WAREHOUSE = "icewh"
SHARE = "outage"
# Each request of an outage must be answered within this many seconds.
QUICK = 5.0

ICEBERG_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
)


@dataclass
class Setup:
    seaweed: SeaweedS3
    deployment: Deployment
    writer: Catalog  # the provider's own catalog, apart from the server's
    token: str
    profile: str

    def delta_options(self) -> dict[str, str]:
        return deltalake_options(self.deployment.storage) | {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}

    def delta_direct(self) -> pd.DataFrame:
        uri = table_uri(self.deployment.storage, BUCKET, DELTA)
        return DeltaTable(uri, storage_options=self.delta_options()).to_pandas()


def iceberg_rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, testdata: Path) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("outage")
    seaweed = start_seaweed(tmp / "seaweed")
    deployment: Deployment | None = None
    try:
        client = seaweed.client()
        client.create_bucket(Bucket=BUCKET)
        upload_tree(client, testdata / DELTA, BUCKET, DELTA)
        client.create_bucket(Bucket=WAREHOUSE)
        s3 = {
            "s3.endpoint": seaweed.endpoint,
            "s3.access-key-id": seaweed.access_key,
            "s3.secret-access-key": seaweed.secret_key,
            "s3.region": seaweed.region,
        }
        catalog = {
            "type": "sql",
            "uri": f"sqlite:///{tmp / 'catalog.db'}",
            "warehouse": f"s3://{WAREHOUSE}/wh",
        }
        # The same name as the server's: a SQL catalog keeps its tables under its name.
        writer = load_catalog(WAREHOUSE, **catalog, **s3)
        writer.create_namespace("sales")
        table = writer.create_table("sales.customers", ICEBERG_SCHEMA)
        table.append(iceberg_rows(1, 3).cast(table.schema().as_arrow()))
        deployment = deploy(tmp, seaweed.storage_config(), {WAREHOUSE: catalog | s3})
        deployment.share_tables(SHARE, {"delta": DELTA}, bucket=BUCKET)
        spec = TableSpec.parse(f"default:iceberg:uniform:{WAREHOUSE}:sales:customers")
        deployment.store.update_share(SHARE, add=[spec])
        yield Setup(seaweed, deployment, writer, deployment.token(SHARE), deployment.profile(SHARE))
    finally:
        if deployment is not None:
            deployment.server.stop()
            deployment.store.close()
        seaweed.stop()


def requests_for(table: str, version: int) -> list[tuple[str, str, dict[str, Any]]]:
    """Every table endpoint, `version` being one the server has not read yet."""
    base = f"shares/{SHARE}/schemas/default/tables/{table}"
    return [
        ("GET", f"{base}/version", {}),
        ("HEAD", base, {}),
        ("GET", f"{base}/metadata", {}),
        ("POST", f"{base}/query", {"json": {}}),
        ("POST", f"{base}/query", {"json": {"version": version}}),
        ("POST", f"{base}/query", {"json": {"startingVersion": version}}),
        ("GET", f"{base}/changes", {"params": {"startingVersion": version}}),
    ]


def send(setup: Setup, method: str, path: str, options: dict[str, Any]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = httpx.request(
        method,
        f"{setup.deployment.endpoint}/{path}",
        headers={"Authorization": f"Bearer {setup.token}"},
        timeout=60,
        **options,
    )
    return response, time.monotonic() - started


def assert_all_ok(setup: Setup, requests: list[tuple[str, str, dict[str, Any]]]) -> None:
    for method, path, options in requests:
        response, _ = send(setup, method, path, options)
        assert response.status_code == 200, (method, path, response.text)


def test_outage_answers_503_and_service_resumes(setup: Setup, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    # Before: both tables served, and their current versions cached by the server.
    assert_all_ok(setup, requests_for("delta", 2) + requests_for("iceberg", 0))

    # New versions the server has not read yet, so that nothing cached can answer for them.
    write_deltalake(
        table_uri(setup.deployment.storage, BUCKET, DELTA),
        pa.table({"id": pa.array([100, 101], pa.int32()), "name": ["new-a", "new-b"]}),
        mode="append",
        storage_options=setup.delta_options(),
    )
    table = setup.writer.load_table("sales.customers")
    table.append(iceberg_rows(4, 2).cast(table.schema().as_arrow()))
    expected_delta = setup.delta_direct()
    expected_iceberg = setup.writer.load_table("sales.customers").scan().to_arrow().to_pandas()
    during = requests_for("delta", 3) + requests_for("iceberg", 1)

    setup.seaweed.stop()
    try:
        for method, path, options in during:
            response, elapsed = send(setup, method, path, options)
            assert response.status_code == 503, (method, path, response.text)
            assert elapsed < QUICK, (method, path, elapsed)
            assert response.headers["retry-after"] == "5", (method, path)
            if method == "HEAD":
                continue
            assert response.headers["content-type"].startswith("application/json")
            body = response.json()
            assert body["errorCode"] == "TEMPORARILY_UNAVAILABLE", body
            assert "unreachable" in body["message"], body
            assert "Traceback" not in response.text and setup.seaweed.secret_key not in response.text
    finally:
        setup.seaweed.start_again()

    # After: the same requests succeed, with the new versions, from the same server.
    assert_all_ok(setup, during)
    version, _ = send(setup, "GET", f"shares/{SHARE}/schemas/default/tables/delta/version", {})
    assert version.headers["delta-table-version"] == "3"
    shared = delta_sharing.load_as_pandas(f"{setup.profile}#{SHARE}.default.delta")
    pd.testing.assert_frame_equal(canonical(shared), canonical(expected_delta))
    assert {"new-a", "new-b"} <= set(shared["name"])
    changes = delta_sharing.load_table_changes_as_pandas(
        f"{setup.profile}#{SHARE}.default.delta", starting_version=3
    )
    assert sorted(changes["id"]) == [100, 101]
    shared_iceberg = delta_sharing.load_as_pandas(f"{setup.profile}#{SHARE}.default.iceberg")
    assert canonical(shared_iceberg[["id", "name"]]).equals(canonical(expected_iceberg[["id", "name"]]))

    # Outages are logged as one-line warnings: no 500s, no tracebacks.
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert [r for r in caplog.records if r.exc_info] == []
    assert any("storage unavailable" in r.getMessage() for r in caplog.records)


# -- a store or catalog that accepts connections and never answers --------------------------------


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A port whose kernel accepts connections (backlog) for a server that never reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def within(seconds: float, action: Any) -> BaseException | None:
    """What `action()` raised, asserting it returned or raised within `seconds` (not hung)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"still waiting after {seconds} s"
    return outcome[0]


def test_hung_object_store_is_503_after_the_read_timeout(silent_endpoint: str) -> None:
    storage = S3Storage(
        S3Settings(endpoint=silent_endpoint, access_key="a", secret_key="b", read_timeout=0.5, max_attempts=1)
    )
    error = within(QUICK, lambda: list(storage.list("bucket", "table/_delta_log/")))
    assert isinstance(error, StorageUnavailable) and "unreachable" in error.message


def test_hung_rest_catalog_is_503_not_a_hang(silent_endpoint: str) -> None:
    """pyiceberg's REST client sets no timeout of its own: a hung catalog would hold the request forever."""
    registry = CatalogRegistry({"rest": {"type": "rest", "uri": silent_endpoint, "rest.read-timeout": "0.5"}})
    error = within(QUICK, lambda: registry.catalog("rest"))
    assert isinstance(error, StorageUnavailable), error
    assert error.message == "the Iceberg catalog for warehouse 'rest' is unreachable; try again later"


# -- failures after the log listing, and after the headers -----------------------------------------


class FlakyStorage(LocalStorage):
    """Local storage whose reads (not listings) fail while `down`: storage lost mid-request."""

    down = False

    def read(self, bucket: str, key: str) -> bytes:
        if self.down:
            raise StorageUnavailable("object storage is unreachable; try again later")
        return super().read(bucket, key)


def test_failed_replay_is_not_cached(testdata: Path) -> None:
    storage = FlakyStorage(testdata.parent, UrlSigner(b"k" * 32, "http://127.0.0.1/files"))
    reader = DeltaTableReader(storage, testdata.name, "simple_table")
    storage.down = True
    with pytest.raises(StorageUnavailable):
        reader.snapshot()
    storage.down = False
    assert reader.snapshot().version == 4
    assert reader.snapshot(4).num_files == len(DeltaTable(str(testdata / "simple_table")).file_uris())


def metadata_url(setup: Setup) -> str:
    return f"{setup.deployment.endpoint}/shares/{SHARE}/schemas/default/tables/delta/metadata"


def failing_lines(before: int) -> Iterator[dict[str, Any]]:
    yield {"protocol": {"minReaderVersion": 1}}
    for index in range(before):
        yield {"file": {"id": f"{index:08d}", "padding": "x" * 100}}
    raise StorageUnavailable("object storage is unreachable; try again later")


def test_failure_in_the_first_chunk_is_a_503(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    queries = setup.deployment.server.app.state.services.queries
    monkeypatch.setattr(queries, "metadata", lambda *args: TableResponse(0, "parquet", failing_lines(10)))
    response = httpx.get(metadata_url(setup), headers={"Authorization": f"Bearer {setup.token}"})
    assert response.status_code == 503
    assert response.json()["errorCode"] == "TEMPORARILY_UNAVAILABLE"
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []


def test_failure_after_the_headers_cuts_the_response_off(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Too late for a 503: the client must see a broken response, never a complete-looking short one."""
    queries = setup.deployment.server.app.state.services.queries
    # Well past the first 64 KB chunk, which is made before the headers go out.
    monkeypatch.setattr(queries, "metadata", lambda *args: TableResponse(0, "parquet", failing_lines(5000)))
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(metadata_url(setup), headers={"Authorization": f"Bearer {setup.token}"})
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert any("response cut off" in r.getMessage() for r in caplog.records)


def test_share_store_outage_is_503_and_service_resumes(tmp_path: Path, postgres, postgres_url: str) -> None:
    """The store's PostgreSQL database vanishes (renamed away) and comes back: 503, then 200."""
    database = make_url(postgres_url).database
    deployment = deploy(
        tmp_path,
        {"type": "local", "root": str(tmp_path / "buckets")},
        env={"SHARING_STORE_URL": postgres_url},
    )
    try:
        deployment.store.create_share("outage")
        token = deployment.token("outage")
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.get(deployment.endpoint + "/shares", headers=headers).status_code == 200

        def rename(old: str, new: str) -> None:
            with postgres.connect() as conn:
                for _ in range(50):  # the pool may reconnect between the two statements
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (old,)
                    )
                    try:
                        conn.execute(f'ALTER DATABASE "{old}" RENAME TO "{new}"')
                        return
                    except Exception:  # still in use: terminate again
                        time.sleep(0.05)
                raise AssertionError("could not rename the database")

        rename(database, database + "_away")
        try:
            started = time.monotonic()
            response = httpx.get(deployment.endpoint + "/shares", headers=headers)
            assert time.monotonic() - started < 10
            assert response.status_code == 503
            assert response.json() == {
                "errorCode": "TEMPORARILY_UNAVAILABLE",
                "message": "the share store is unreachable; try again later",
            }
        finally:
            rename(database + "_away", database)
        assert httpx.get(deployment.endpoint + "/shares", headers=headers).status_code == 200
    finally:
        deployment.server.stop()
        deployment.store.close()
