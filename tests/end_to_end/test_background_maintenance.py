"""The server keeping its tables by itself, as a provider runs it: `[maintenance]` set through the
environment (one-second rounds), a streaming writer appending with pyiceberg through the catalog
while the background compacts under it, and a recipient reading the shared table.

Nothing is asked of the maintenance API: the writer's many small files end up in a few, every row
the writer committed is read exactly once, the change data feed holds each row once (no row for a
compaction), and the table's metadata files on storage stay within its metadata log.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import delta_sharing
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from tests.conftest import ADMIN_TOKEN, Deployment
from tests.end_to_end.test_warehouse_engines import share
from tests.end_to_end.test_warehouse_maintenance import shared_files

WAREHOUSE = "streamed"
APPENDS = 60
#: The metadata log the writer's table keeps (`write.metadata.previous-versions-max`).
LOGGED = 5


@pytest.fixture(scope="module")
def server_settings() -> dict[str, str]:
    """Background maintenance on, a round a second, with the whole of a core."""
    return {
        "SHARING_MAINTENANCE_BACKGROUND": "true",
        "SHARING_MAINTENANCE_INTERVAL_SECONDS": "1",
        "SHARING_MAINTENANCE_CPU_SHARE": "1",
    }


def test_a_streaming_writers_table_is_kept_without_being_asked(server: Deployment) -> None:
    api = server.catalog_api(ADMIN_TOKEN)
    assert api.post("/warehouses", json={"name": WAREHOUSE}).status_code == 200
    catalog = load_catalog(f"b-{uuid.uuid4().hex[:6]}", **{
        "type": "rest", "uri": f"{server.server.url}/_iceberg", "warehouse": WAREHOUSE, "token": ADMIN_TOKEN,
    })  # fmt: skip
    catalog.create_namespace("db")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    table = catalog.create_table(
        "db.ticks", schema=schema, properties={"write.metadata.previous-versions-max": str(LOGGED)}
    )
    url = share(server, WAREHOUSE, "db", "ticks")
    first_version = delta_sharing.get_table_version(url)
    for n in range(APPENDS):
        ids = list(range(n * 10, n * 10 + 10))
        table.append(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=schema))
        time.sleep(0.2)  # a micro-batch every few hundred milliseconds
    last_append = time.time()
    # Rounds came while the writer wrote (its appends went on over the compactions' commits).
    during = [s for s in table.refresh().snapshots() if s.summary and s.summary.operation.value == "replace"]
    assert during, "no background compaction while the writer wrote"

    # The round after the writer stopped compacts what it left.
    status: dict[str, dict[str, str]] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status = api.get(f"/{WAREHOUSE}/namespaces/db/tables/ticks/maintenance-job-status").json()["status"]
        compaction = status["icebergCompaction"]
        ran_since = compaction.get("lastRunTimestamp", "") > time.strftime(
            "%Y-%m-%dT%H:%M:%S", time.gmtime(last_append + 0.5))  # fmt: skip
        if ran_since and compaction["status"] == "Successful" and shared_files(server, url) <= 2:
            break
        time.sleep(0.5)
    assert status["icebergCompaction"]["status"] == "Successful", status
    assert status["icebergSnapshotManagement"]["status"] == "Successful", status
    assert status["icebergUnreferencedFileRemoval"]["status"] == "Successful", status
    assert shared_files(server, url) <= 2

    read = delta_sharing.load_as_pandas(url)
    assert sorted(read["id"]) == list(range(APPENDS * 10))
    changes = delta_sharing.load_table_changes_as_pandas(
        url, starting_version=first_version + 1, ending_version=delta_sharing.get_table_version(url)
    )
    assert sorted(changes["id"]) == list(range(APPENDS * 10))
    assert set(changes["_change_type"]) == {"insert"}

    # The table's folder keeps its current metadata file and those its log names, no more.
    folder = next((Path(server.tmp) / "storage" / WAREHOUSE / "db").glob("ticks-*/metadata"))
    assert len(list(folder.glob("*.metadata.json"))) <= LOGGED + 1
