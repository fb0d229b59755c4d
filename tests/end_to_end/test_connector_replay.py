"""The request sequences of the Spark connectors and Databricks, replayed line by line.

The official JVM connectors cannot be downloaded here, so their requests (from
their source, protocol notes §5.2-5.4) are replayed with httpx and every line
is checked against what the connectors require.
"""

from __future__ import annotations

import json

import httpx
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.conftest import TESTDATA_BUCKET, Deployment

LEGACY = {"delta-sharing-capabilities": "responseformat=parquet"}
DELTA_FEATURES = (
    "deletionVectors,columnMapping,timestampNtz,typeWidening-preview,typeWidening,variantType-preview,"
    "geospatial,variantType,variantShredding-preview,variantShredding"
)
AUTO = {"delta-sharing-capabilities": f"responseformat=parquet,delta;readerfeatures={DELTA_FEATURES}"}
DELTA = {"delta-sharing-capabilities": f"responseformat=delta;readerfeatures={DELTA_FEATURES}"}


@pytest.fixture(scope="module")
def api(local: Deployment) -> httpx.Client:
    root = local.storage.root / TESTDATA_BUCKET / "streaming"
    config = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(str(root), pa.table({"id": [1, 2], "v": ["a", "b"]}), configuration=config)  # v0
    write_deltalake(str(root), pa.table({"id": [3], "v": ["c"]}), mode="append")  # v1
    DeltaTable(str(root)).delete("id = 1")  # v2
    write_deltalake(
        str(root), pa.table({"id": [4], "v": ["d"], "extra": [1.5]}), mode="append", schema_mode="merge"
    )  # v3: metadata change
    local.share_tables(
        "spark",
        {
            "streaming": "streaming",
            "dv": "table-with-dv-small",
            "part": "delta-0.8.0-partitioned",
            "cdf": "cdf-table",
        },
    )
    client = httpx.Client(
        base_url=f"{local.endpoint}/shares/spark/schemas/default/tables",
        headers={
            "Authorization": f"Bearer {local.token('spark')}",
            "User-Agent": "Delta-Sharing-Spark/1.3.2 Spark/4.0.0",
        },
    )
    yield client
    client.close()


def ndjson(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    assert "\n\n" not in response.text and response.text.endswith("\n")
    return [json.loads(line) for line in response.text.splitlines()]


def kinds(lines: list[dict]) -> list[str]:
    return [next(iter(line)) for line in lines]


def test_legacy_spark_batch_read(api: httpx.Client) -> None:
    metadata = api.get("/part/metadata", headers=LEGACY)
    assert len(ndjson(metadata)) == 2  # getMetadata throws on anything but two lines
    assert ndjson(metadata)[1]["metaData"]["size"] > 0  # else Spark runs an extra /query to size the table
    body = {"predicateHints": [], "includeRefreshToken": True}
    query = api.post("/part/query", json=body, headers=LEGACY)
    lines = ndjson(query)
    assert query.text.splitlines()[:2] == metadata.text.splitlines()  # checkSchemaNotChange
    assert kinds(lines)[2:-1] == ["file"] * 6 and kinds(lines)[-1] == "endStreamAction"
    assert query.headers["delta-table-version"] == metadata.headers["delta-table-version"]
    for line in lines[2:-1]:
        file = line["file"]
        ranged = httpx.get(file["url"], headers={"Range": f"bytes=0-{file['size'] - 1}"})
        assert ranged.status_code == 206 and len(ranged.content) == file["size"]  # anything but 206 fails
    refresh = {
        "predicateHints": [],
        "includeRefreshToken": True,
        "refreshToken": lines[-1]["endStreamAction"]["refreshToken"],
    }
    again = ndjson(api.post("/part/query", json=refresh, headers=LEGACY))
    assert sorted(line["file"]["id"] for line in again[2:-1]) == sorted(
        line["file"]["id"] for line in lines[2:-1]
    )


def test_legacy_spark_time_travel(api: httpx.Client) -> None:
    metadata = api.get("/streaming/metadata", params={"version": 1}, headers=LEGACY)
    assert metadata.headers["delta-table-version"] == "1"
    query = api.post(
        "/streaming/query",
        json={"predicateHints": [], "version": 1, "includeRefreshToken": False},
        headers=LEGACY,
    )
    assert query.headers["delta-table-version"] == "1"  # require(versionAsOf == version)
    lines = ndjson(query)
    assert kinds(lines)[2:] == ["file"] * 2 and all(line["file"]["version"] == 1 for line in lines[2:])


def test_legacy_spark_streaming(api: httpx.Client) -> None:
    assert api.get("/streaming/version", headers=LEGACY).headers["delta-table-version"] == "3"
    initial = ndjson(
        api.post(
            "/streaming/query",
            headers=LEGACY,
            json={"predicateHints": [], "version": 3, "includeRefreshToken": False},
        )
    )
    assert kinds(initial)[2:] == ["file"] * 3
    response = api.post(
        "/streaming/query",
        headers=LEGACY,
        json={"predicateHints": [], "startingVersion": 1, "endingVersion": 3},
    )
    assert response.headers["delta-table-version"] == "1"
    lines = ndjson(response)
    assert lines[1]["metaData"]["version"] == 1
    body = [(kind, line[kind].get("version")) for kind, line in zip(kinds(lines), lines, strict=True)][2:]
    # Versions in order; within a version the commit's own order.
    assert [v for _, v in body] == sorted(v for _, v in body)
    assert sorted(body) == sorted([("add", 1), ("remove", 2), ("add", 2), ("metaData", 3), ("add", 3)])
    for kind, line in zip(kinds(lines)[2:], lines[2:], strict=True):
        if kind != "metaData":
            assert {
                "url",
                "id",
                "partitionValues",
                "size",
                "timestamp",
                "version",
                "expirationTimestamp",
            } <= set(line[kind])
    assert "extra" in lines[5]["metaData"]["schemaString"]


def test_streaming_validation(api: httpx.Client) -> None:
    def fails(body: dict, message: str) -> None:
        response = api.post("/streaming/query", json=body, headers=LEGACY)
        assert response.status_code == 400 and message in response.json()["message"], response.text

    fails(
        {"startingVersion": 3, "endingVersion": 2},
        "startingVersion(3) must be smaller than or equal to endingVersion(2).",
    )
    fails(
        {"startingVersion": 0, "endingVersion": 10},
        "Provided end version(10) is invalid. End version cannot be greater "
        "than the latest version of the table(3).",
    )
    fails({"startingVersion": -1}, "startingVersion cannot be negative.")
    fails({"startingVersion": 1, "version": 1}, "Please only provide one of")


def test_legacy_spark_cdf(api: httpx.Client) -> None:
    ndjson(api.get("/cdf/metadata", headers=LEGACY))
    response = api.get("/cdf/changes", params={"startingVersion": 0, "endingVersion": 3}, headers=LEGACY)
    lines = ndjson(response)
    assert response.headers["delta-table-version"] == "0"
    assert set(kinds(lines)[2:]) <= {"add", "cdf", "remove"}
    paged = api.get("/cdf/changes?startingVersion=0&endingVersion=3&maxFiles=100000", headers=LEGACY)
    assert kinds(ndjson(paged))[-1] == "endStreamAction"


def test_delta_lake_connector_batch(api: httpx.Client) -> None:
    resolved = api.get("/dv/metadata", headers=AUTO)
    assert resolved.headers["delta-sharing-capabilities"] == "responseformat=delta"
    plain = api.get("/part/metadata", headers=AUTO)
    assert plain.headers["delta-sharing-capabilities"] == "responseformat=parquet"  # reader version 1
    query = api.post("/dv/query", json={"predicateHints": [], "includeRefreshToken": True}, headers=DELTA)
    lines = ndjson(query)
    assert query.text.splitlines()[:2] == resolved.text.splitlines()
    assert kinds(lines) == ["protocol", "metaData", "file", "endStreamAction"]
    assert lines[1]["metaData"]["size"] == 635  # DeltaSharingFileIndex throws without it
    file = lines[2]["file"]
    assert (
        file["deletionVectorFileId"]
        and file["deltaSingleAction"]["add"]["deletionVector"]["storageType"] == "p"
    )


def test_delta_lake_connector_streaming_and_cdf(api: httpx.Client) -> None:
    headers = DELTA | {"fileidhash": "delta"}
    response = api.post(
        "/streaming/query",
        json={"startingVersion": 0, "endingVersion": 3, "includeHistoricalProtocol": True},
        headers=headers,
    )
    assert response.headers["fileidhash"] == "delta"
    lines = ndjson(response)
    files = [line["file"] for line in lines[2:] if "file" in line]
    assert all(isinstance(f["version"], int) and isinstance(f["timestamp"], int) for f in files)
    assert sorted(next(iter(f["deltaSingleAction"])) for f in files) == ["add", "add", "add", "add", "remove"]
    assert [line["metaData"]["version"] for line in lines[1:] if "metaData" in line] == [0, 3]
    changes = api.get(
        "/cdf/changes", params={"startingVersion": 0, "includeHistoricalMetadata": "true"}, headers=DELTA
    )
    cdf = ndjson(changes)
    assert cdf[1]["metaData"]["version"] == 0 and "deltaMetadata" in cdf[1]["metaData"]
    actions = {next(iter(line["file"]["deltaSingleAction"])) for line in cdf[2:] if "file" in line}
    assert actions <= {"add", "remove", "cdc"} and "cdc" in actions


def test_end_stream_action_with_capability_and_pagination(api: httpx.Client) -> None:
    headers = {
        "delta-sharing-capabilities": f"responseformat=delta;readerfeatures={DELTA_FEATURES};"
        "includeendstreamaction=true"
    }
    response = api.post("/part/query", json={"maxFiles": 4}, headers=headers)
    assert (
        response.headers["delta-sharing-capabilities"] == "responseformat=delta;includeendstreamaction=true"
    )
    first = ndjson(response)
    end = first[-1]["endStreamAction"]
    assert end["minUrlExpirationTimestamp"] > 0 and end["nextPageToken"]
    second = ndjson(
        api.post("/part/query", json={"maxFiles": 4, "pageToken": end["nextPageToken"]}, headers=headers)
    )
    assert second[:2] == first[:2]
    assert "nextPageToken" not in second[-1]["endStreamAction"]
    ids = [line["file"]["id"] for line in first[2:-1] + second[2:-1]]
    assert len(ids) == len(set(ids)) == 6
