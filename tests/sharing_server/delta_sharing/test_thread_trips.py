"""How many trips to a worker thread a table response takes: under load each waits its turn at the GIL.

Under 64 clients a trip to a worker thread and back waited some 25 ms; a
/metadata took three (one to make it, one for its chunk, one to learn that no
other followed), a /query two. Now a response whose lines fit in its first
chunk is made, chunked and ended in the trip that authorizes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anyio.to_thread
import httpx
import pytest
from starlette.applications import Starlette

from sharing_server.delta_sharing import routes, table_streams
from tests.conftest import Deployment
from tests.sharing_server.delta_sharing.conftest import lines


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The functions run in worker threads (`run_in_threadpool` and streamed sync iterators alike)."""
    calls: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(func, "__qualname__", repr(func)))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    yield calls


def test_metadata_takes_one_trip(api: httpx.Client, trips: list[str]) -> None:
    response = api.get("/shares/proto/schemas/default/tables/t_simple/metadata")
    assert response.status_code == 200
    assert [next(iter(line)) for line in lines(response)] == ["protocol", "metaData"]
    assert len(trips) == 1, trips


def test_a_query_that_fits_one_chunk_takes_one_trip(api: httpx.Client, trips: list[str]) -> None:
    response = api.post("/shares/proto/schemas/default/tables/t_checkpoint/query", json={})
    assert response.status_code == 200
    kinds = [next(iter(line)) for line in lines(response)]
    assert kinds[:2] == ["protocol", "metaData"] and kinds.count("file") > 1
    assert len(trips) == 1, trips


def test_a_query_of_many_chunks_is_whole(
    local: Deployment, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With chunks of a few hundred bytes, the first chunk is not the response's end: the rest follows."""
    path = "/shares/proto/schemas/default/tables/t_checkpoint/query"
    whole = lines(api.post(path, json={}))
    monkeypatch.setattr(table_streams, "FIRST_CHUNK_BYTES", 256)
    monkeypatch.setattr(_protocol_endpoints(local), "stream_buffer_bytes", 256)
    response = api.post(path, json={})
    assert response.status_code == 200
    cut = lines(response)
    assert len(response.content) > 4 * 256 and len(cut) == len(whole)
    # Signed URLs differ between answers; all else is the same.
    for mine, theirs in zip(cut, whole, strict=True):
        assert next(iter(mine)) == next(iter(theirs))
        if "file" in mine:
            assert mine["file"]["id"] == theirs["file"]["id"]
        else:
            assert mine == theirs


def _protocol_endpoints(local: Deployment) -> routes.ProtocolEndpoints:
    app = local.server.app
    assert isinstance(app, Starlette)
    for mount in app.routes:
        for route in getattr(mount, "routes", []):
            owner = getattr(getattr(route, "endpoint", None), "__self__", None)
            if isinstance(owner, routes.ProtocolEndpoints):
                return owner
    raise AssertionError("no protocol endpoints")
