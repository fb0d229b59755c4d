"""Metadata files past the writable catalog's bound are refused, never read whole.

A real server on local storage. A caller registers, as a table and as a view, a metadata file
one byte over `MAX_METADATA_BYTES` that it wrote into the warehouse (valid, at a location of its
own: before the bound, the table was registered): a 400 in the Iceberg error model naming the
bound, nothing registered, and the file never read whole from storage. A commit whose new
metadata file would be over the bound (the bound lowered for the test) is refused the same way,
and the table is left as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from share_store.catalog import metadata_files
from share_store.catalog.metadata_files import MAX_METADATA_BYTES
from share_store.storage.file_uris import file_location
from tests.conftest import ADMIN_TOKEN, Deployment

WAREHOUSE = "bounded"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": True}],
}


@pytest.fixture(scope="module", autouse=True)
def namespace(server: Deployment) -> None:
    """The warehouse and its namespace `ns` the tables here are made in."""
    with server.catalog_api(ADMIN_TOKEN) as api:
        assert api.post("/warehouses", json={"name": WAREHOUSE}).status_code == 200
        assert api.post(f"/{WAREHOUSE}/namespaces", json={"namespace": ["ns"]}).status_code == 200


@pytest.fixture
def api(server: Deployment) -> Iterator[httpx.Client]:
    with server.catalog_api(ADMIN_TOKEN) as client:
        yield client


def create_table(api: httpx.Client, name: str) -> dict[str, Any]:
    made = api.post(f"/{WAREHOUSE}/namespaces/ns/tables", json={"name": name, "schema": SCHEMA})
    assert made.status_code == 200, made.text
    return dict(made.json())


def on_disk(server: Deployment, location: str) -> Path:
    bucket, key = file_location(server.storage, location)
    return Path(server.config.storage["root"]) / bucket / key


def bad_request(answer: httpx.Response, *words: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "BadRequestException" and error["code"] == 400, error
    assert all(word in error["message"] for word in words), error


@pytest.fixture
def oversized(server: Deployment, api: httpx.Client) -> str:
    """A metadata file one byte over the bound in the namespace's folder, as a caller could write
    it with the keys a load vends: a real table's file at a location of its own, padded with
    spaces (still valid JSON, so that only its size can refuse it)."""
    seed = create_table(api, "seed")
    location = seed["metadata-location"].replace("/seed-", "/big-", 1)
    path = on_disk(server, location)
    path.parent.mkdir(parents=True)
    metadata = json.loads(on_disk(server, seed["metadata-location"]).read_bytes())
    metadata["location"] = metadata["location"].replace("/seed-", "/big-", 1)  # a table of its own
    content = json.dumps(metadata).encode()
    path.write_bytes(content + b" " * (MAX_METADATA_BYTES + 1 - len(content)))
    return location


def test_registering_an_oversized_metadata_file_is_refused_and_it_is_never_read_whole(
    server: Deployment, api: httpx.Client, oversized: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, key = file_location(server.storage, oversized)
    whole_reads: list[str] = []
    storage_read, storage_open = server.storage.read, server.storage.open

    def read(bucket: str, name: str) -> bytes:
        whole_reads.append(name)
        return storage_read(bucket, name)

    def open_(bucket: str, name: str) -> Any:
        whole_reads.append(name)
        return storage_open(bucket, name)

    monkeypatch.setattr(server.storage, "read", read)
    monkeypatch.setattr(server.storage, "open", open_)

    table = api.post(
        f"/{WAREHOUSE}/namespaces/ns/register", json={"name": "big", "metadata-location": oversized}
    )
    bad_request(table, oversized, "64 MiB")
    view = api.post(
        f"/{WAREHOUSE}/namespaces/ns/register-view", json={"name": "bigview", "metadata-location": oversized}
    )
    bad_request(view, oversized, "64 MiB")
    assert key not in whole_reads
    assert api.head(f"/{WAREHOUSE}/namespaces/ns/tables/big").status_code == 404
    assert api.head(f"/{WAREHOUSE}/namespaces/ns/views/bigview").status_code == 404
    listed = api.get(f"/{WAREHOUSE}/namespaces/ns/tables").json()["identifiers"]
    assert [entry["name"] for entry in listed] == ["seed"]


def test_a_commit_whose_metadata_file_would_be_oversized_is_refused_and_changes_nothing(
    server: Deployment, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = create_table(api, "grown")
    before = made["metadata-location"]
    folder = on_disk(server, before).parent
    files = sorted(folder.iterdir())
    limit = on_disk(server, before).stat().st_size + 1024
    monkeypatch.setattr(metadata_files, "MAX_METADATA_BYTES", limit)

    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"pad": "x" * 4096}}]}
    answer = api.post(f"/{WAREHOUSE}/namespaces/ns/tables/grown", content=json.dumps(body))
    bad_request(answer, "bytes, over the")
    loaded = api.get(f"/{WAREHOUSE}/namespaces/ns/tables/grown").json()
    assert loaded["metadata-location"] == before and "pad" not in loaded["metadata"]["properties"]
    assert sorted(folder.iterdir()) == files  # no file written for it
