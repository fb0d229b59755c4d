"""Directory access's endpoint and OpenSharing's table endpoint, thin: parse, call, encode.

`POST .../tables/{t}/temporary-table-credentials` (Delta Sharing 2026-02) hands a recipient's
engine keys that read the table's folder (or a folder under it) and nothing else; which tables
may have them, and what the keys reach, is `share_store.readers.directory_access`'s decision.
`GET .../tables/{t}` (OpenSharing) answers the table's item, with its `format`. Both are
authorized as every table route is (`authorize_table`: the token, its share, the rate limits).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from share_store.errors import MalformedRequest
from share_store.model import Share, SharedTable, Token
from share_store.persistence import ShareStore
from share_store.readers.directory_access import DirectoryAccess, TableCredentials, table_format
from sharing_server.auth.bearer import authorize_table
from sharing_server.http.json_text import NotAJsonObject, json_object
from sharing_server.http.ndjson import JSON, dumps
from sharing_server.observability.audit import audit_fields


def table_item(
    table: SharedTable,
    share: Share,
    url_share: str,
    url_schema: str | None = None,
    directory: DirectoryAccess | None = None,
) -> dict[str, Any]:
    """A table as list-tables, list-all-tables and get-table answer it."""
    # Like the reference, echo the share (and schema) as the URL spelled them.
    item: dict[str, Any] = {
        "name": table.name,
        "schema": url_schema or table.schema,
        "share": url_share,
        "shareId": share.id,
        "id": table.id,
        "format": table_format(table),
    }
    if directory is not None:
        item.update(directory.of(table).item_fields())
    return item


def asked_location(body: bytes) -> str | None:
    """The body's `location` (None: the table's own): no body, `{}` or `{"location": null}` ask
    for the table's folder; anything not a JSON object with a string `location` is malformed."""
    if not body.strip():
        return None
    try:
        parsed = json_object(body)
    except NotAJsonObject as error:
        raise MalformedRequest(f"Expected a JSON object as request body: {error.message}") from None
    location = parsed.get("location")
    if location is not None and not isinstance(location, str):
        raise MalformedRequest("Expected a string for location")
    return location


def credentials_body(vended: TableCredentials) -> dict[str, Any]:
    keys = vended.keys
    return {
        "credentials": {
            "location": vended.location,
            "awsTempCredentials": {
                "accessKeyId": keys.access_key,
                "secretAccessKey": keys.secret_key,
                "sessionToken": keys.session_token,
            },
            "expirationTime": int(keys.expires_at * 1000),
        }
    }


class TableAccessEndpoints:
    def __init__(self, store: ShareStore, directory: DirectoryAccess) -> None:
        self.store = store
        self.directory = directory

    def _authorized(self, request: Request) -> tuple[Token, SharedTable]:
        token, table = authorize_table(self.store, request)
        audit_fields(request).update(schema=table.schema, table=table.name)
        return token, table

    async def get_table(self, request: Request) -> Response:
        def run() -> dict[str, Any]:
            _, table = self._authorized(request)
            share = self.store.get_share(table.share)  # its id, which the table item carries
            params = request.path_params
            return {"table": table_item(table, share, params["share"], params["schema"], self.directory)}

        return _json(await run_in_threadpool(run))

    async def temporary_table_credentials(self, request: Request) -> Response:
        body = await request.body()

        def run() -> dict[str, Any]:
            token, table = self._authorized(request)
            asked = asked_location(body)
            not_after = token.expires_at.astimezone(UTC).timestamp() if token.expires_at else None
            vended = self.directory.credentials(table, token.id, not_after, asked)
            audit_fields(request)["vended"] = {
                "location": vended.location,
                "scope": vended.keys.scope.describe(),
                "expires": int(vended.keys.expires_at),
                "key": vended.keys.access_key[:8] + "…",  # enough to match the store's logs, never the secret
            }
            return credentials_body(vended)

        # Keys: no cache or proxy keeps them.
        return _json(await run_in_threadpool(run), {"Cache-Control": "no-store"})


def _json(payload: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    # One line, as every answer of the protocol.
    return Response(dumps(payload), media_type=None, headers={"Content-Type": JSON, **(headers or {})})
