"""The keyed handlers of `/_iceberg`'s mutations (`idempotent_routes`) over a real store and the
catalog's real authentication: what is kept (not a 5xx, nor a crash), and that a request cancelled
mid-commit (its client gone, the server stopping) still keeps its answer for the retry."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from share_store.authentication.sign_in_throttle import AdminToken
from share_store.authentication.tokens import hash_secret
from share_store.catalog.callers import CatalogCallers
from share_store.catalog.idempotency import CLAIM, REPLAY, Answer, Binding, body_digest
from share_store.catalog.idempotency_keys import IdempotencyKeys
from share_store.catalog.users import CatalogUsers
from share_store.errors import StorageUnavailable
from share_store.persistence import ShareStore, sqlite_url
from share_store.signing.token_codec import TokenCodec
from sharing_server.auth.catalog_callers import CatalogAuthentication
from sharing_server.catalog.idempotent_routes import IdempotentEndpoint, idempotent_routes
from sharing_server.http.iceberg_errors import MISSING, iceberg_error_model

ADMIN = "dsa_idempotent-routes-admin-token-0123456789"
SECRET = b"idempotent-routes-secret-key-0123"
AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShareStore]:
    opened = ShareStore(sqlite_url(tmp_path / "store.db"))
    yield opened
    opened.close()


def authentication(store: ShareStore) -> CatalogAuthentication:
    users = CatalogUsers(store.transactions, SECRET)
    return CatalogAuthentication(
        CatalogCallers(users, TokenCodec(SECRET, "catalog-access"), AdminToken(hash_secret(ADMIN)))
    )


def test_a_5xx_and_a_crash_are_not_kept_and_the_retry_runs(store: ShareStore) -> None:
    runs: list[int] = []
    caller = authentication(store)

    async def flaky(request: Request) -> Response:
        await caller.caller(request)  # as every catalog handler does first: the key is claimed there
        runs.append(1)
        if len(runs) == 1:
            raise StorageUnavailable("the object store is down")
        if len(runs) == 2:
            raise RuntimeError("a bug")
        return JSONResponse({"run": len(runs)})

    keys = IdempotencyKeys(store.transactions, SECRET)
    routes = idempotent_routes([Route("/t", flaky, methods=["POST"], name="t")], keys, {})
    app = Starlette(routes=[Mount("/_iceberg", routes=routes, middleware=[iceberg_error_model(routes, {})])])
    key = str(uuid.uuid4())
    headers = {**AUTH, "Idempotency-Key": key}
    with TestClient(app, raise_server_exceptions=False) as client:
        down = client.post("/_iceberg/t", content=b"{}", headers=headers)
        assert down.status_code == 503  # (in the Iceberg model under the real app's `/_iceberg`)
        assert client.post("/_iceberg/t", content=b"{}", headers=headers).status_code == 500
        first = client.post("/_iceberg/t", content=b"{}", headers=headers)
        again = client.post("/_iceberg/t", content=b"{}", headers=headers)
        unauthenticated = client.post("/_iceberg/t", content=b"{}", headers={"Idempotency-Key": key})
    assert first.json() == again.json() == {"run": 3} and len(runs) == 3
    assert unauthenticated.status_code == 401 and len(runs) == 3


def test_a_request_cancelled_mid_commit_still_keeps_its_answer(store: ShareStore) -> None:
    committed: list[int] = []
    caller = authentication(store)

    async def slow_commit(request: Request) -> Response:
        await caller.caller(request)
        await asyncio.sleep(0.3)
        committed.append(1)
        return JSONResponse({"metadata-location": "s3://wh/t/metadata/00001.json"})

    keys = IdempotencyKeys(store.transactions, SECRET)
    keyed = IdempotentEndpoint(slow_commit, "t", keys, MISSING)
    key, body = str(uuid.uuid4()), b'{"updates": []}'

    async def cut_off() -> None:
        scope: dict[str, object] = {
            "type": "http",
            "method": "POST",
            "path": "/_iceberg/t",
            "raw_path": b"/_iceberg/t",
            "query_string": b"",
            "root_path": "",
            "scheme": "http",
            "server": ("127.0.0.1", 80),
            "client": ("127.0.0.1", 5000),
            "headers": [
                (b"authorization", AUTH["Authorization"].encode()),
                (b"idempotency-key", key.encode()),
            ],
        }

        async def receive() -> dict[str, object]:
            return {"type": "http.request", "body": body, "more_body": False}

        request = asyncio.ensure_future(keyed(Request(scope, receive)))
        await asyncio.sleep(0.1)
        request.cancel()  # the client went away, or the server stops
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.sleep(0.6)
        assert scope["state"]["audit"]["idempotency_key"] == "ran"  # type: ignore[index]

    asyncio.run(cut_off())
    assert committed == [1]
    binding = Binding("provider", "POST", "t", "/_iceberg/t", body_digest(body))
    outcome, answer = keys.claim(key, binding)
    assert outcome == REPLAY and isinstance(answer, Answer) and answer.status == 200
    assert b"00001.json" in answer.body
    assert keys.claim(str(uuid.uuid4()), binding)[0] == CLAIM
