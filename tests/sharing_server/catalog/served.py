"""The catalog's HTTP layer served in process for its tests: the app over a SQLite store and local
storage (`Served`), the request helpers, and what every answer in the Iceberg error model holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from starlette.testclient import TestClient

from share_store.catalog.names import LEVEL_SEPARATOR
from share_store.catalog.users import CatalogUsers, IssuedUser
from share_store.persistence import ShareStore

ADMIN = "dsa_own-warehouses-routes-admin-token-0123456789"
SECRET = b"own-warehouses-routes-secret-key"
API = "/_iceberg/v1"
WH = "whs"
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "name", "type": "string", "required": False},
    ],
}
V2 = {"format-version": "2"}
NESTED = f"a{LEVEL_SEPARATOR}b"


@dataclass
class Served:
    client: TestClient
    store: ShareStore
    root: Path

    def call(self, method: str, path: str, body: Any = None, token: str | None = ADMIN, **kwargs: Any) -> Any:
        headers = dict(kwargs.pop("headers", {}))
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            kwargs["content"] = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        return self.client.request(method, API + path, headers=headers, **kwargs)

    def user(self, name: str, policy: str | None = None) -> IssuedUser:
        return CatalogUsers(self.store.transactions, SECRET).create(name, policy)

    def token_of(self, user: IssuedUser) -> str:
        answer = self.client.post(
            f"{API}/oauth/tokens",
            data={"grant_type": "client_credentials", "client_id": user.access_key,
                  "client_secret": user.secret_key},
        )  # fmt: skip
        assert answer.status_code == 200, answer.text
        assert answer.json()["token_type"] == "bearer"
        assert answer.headers["cache-control"] == "no-store"
        return str(answer.json()["access_token"])

    def metadata_files(self) -> list[Path]:
        return sorted(self.root.rglob("*.metadata.json"))


def create_table(served: Served, namespace: str, name: str, token: str | None = ADMIN, **more: Any) -> Any:
    body = {"name": name, "schema": SCHEMA, "properties": V2, **more}
    return served.call("POST", f"/{WH}/namespaces/{quote(namespace, safe='')}/tables", body, token=token)


def table_path(namespace: str, name: str) -> str:
    return f"/{WH}/namespaces/{quote(namespace, safe='')}/tables/{quote(name, safe='')}"


def set_properties(**properties: str) -> dict[str, Any]:
    return {"updates": [{"action": "set-properties", "updates": properties}]}


def error_of(response: httpx.Response, status: int, kind: str) -> str:
    """The message of a refusal in the Iceberg REST error model, after its status and type."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "code"}
    assert body["error"]["type"] == kind, body
    assert body["error"]["code"] == status
    return str(body["error"]["message"])
