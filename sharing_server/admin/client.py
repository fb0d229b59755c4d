"""`RemoteAdmin`: the admin operations of `sharing_server.admin.commands`, through a server's `/admin/v1`.

Used by the CLI's `--server URL`, so an operator manages a deployment (say,
replicas on PostgreSQL) from anywhere the admin API is reachable, without the
store's credentials. Errors come back as the server's JSON messages.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from share_store.errors import AdminError, AdminNotFound
from share_store.model import parse_table_ref
from share_store.persistence.share_metadata import NO_CHANGE, MetadataChange
from sharing_server import paths
from sharing_server.admin.restriction_commands import check_asked


class JsonApi:
    """A server's JSON API called with a bearer token, over urllib: the CLI's runtime has no HTTP
    client library of its own. Errors come back as the server's messages, in either error shape
    (`{"message"}`, or the Iceberg REST catalog's `{"error": {"message"}}`)."""

    def __init__(self, server: str, prefix: str, token: str, timeout: float, cafile: str | None) -> None:
        if not server.startswith(("http://", "https://")):
            raise AdminError(f"invalid --server {server!r}: expected http(s)://HOST[:PORT]")
        self.base = server.rstrip("/") + prefix
        self._token = token
        self._timeout = timeout
        self._context = ssl.create_default_context(cafile=cafile) if cafile else None

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in __init__
            self.base + path, data=data, method=method
        )
        request.add_header("Authorization", f"Bearer {self._token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(  # noqa: S310
                request, timeout=self._timeout, context=self._context
            ) as response:
                payload = response.read()
        except urllib.error.HTTPError as error:
            raise _error_from(error) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise AdminError(f"cannot reach {self.base}: {reason}") from None
        return json.loads(payload) if payload else None


class RemoteAdmin:
    def __init__(self, server: str, token: str, timeout: float = 30, cafile: str | None = None) -> None:
        api = JsonApi(server, paths.ADMIN_PREFIX, token, timeout, cafile)
        if not token:
            raise AdminError("the admin API needs a token: set SHARING_ADMIN_TOKEN or pass --admin-token")
        self.base = api.base
        self._call = api.call

    def list_shares(self) -> list[dict[str, Any]]:
        return self._call("GET", paths.ADMIN_SHARES)["items"]

    def create_share(
        self,
        name: str,
        tables: list[str],
        history: bool = True,
        check: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> dict[str, Any]:
        body = {
            "name": name,
            "tables": tables,
            "history": history,
            "check": check,
            **_metadata_body(metadata),
        }
        return self._call("POST", paths.ADMIN_SHARES, body)

    def share_info(self, name: str) -> dict[str, Any]:
        return self._call("GET", _path(paths.ADMIN_SHARE, share=name))

    def update_share(
        self,
        name: str,
        add: list[str],
        remove: list[str],
        history: bool = True,
        check: bool = True,
        metadata: MetadataChange = NO_CHANGE,
    ) -> dict[str, Any]:
        body = {"add": add, "remove": remove, "history": history, "check": check, **_metadata_body(metadata)}
        return self._call("PATCH", _path(paths.ADMIN_SHARE, share=name), body)

    def remove_share(self, name: str) -> None:
        self._call("DELETE", _path(paths.ADMIN_SHARE, share=name))

    def restrict(
        self,
        share: str,
        table: str,
        where: str | None = None,
        columns: str | list[str] | None = None,
        clear: bool = False,
    ) -> dict[str, Any]:
        schema, name = parse_table_ref(table)
        path = _path(paths.ADMIN_TABLE_RESTRICTION, share=share, schema=schema, table=name)
        check_asked(where, columns, clear)
        if clear:
            return self._call("DELETE", path)
        # The server checks the names; splitting here keeps "a,b" and ["a", "b"] one request.
        listed = columns.split(",") if isinstance(columns, str) else columns
        return self._call("PUT", path, {"where": where, "columns": listed})

    def create_token(self, share: str, expires: str, description: str) -> dict[str, Any]:
        body = {"expires": expires, "description": description}
        return self._call("POST", _path(paths.ADMIN_TOKENS, share=share), body)

    def list_tokens(self, share: str) -> list[dict[str, Any]]:
        return self._call("GET", _path(paths.ADMIN_TOKENS, share=share))["items"]

    def rotate_token(self, share: str, token_id: str, grace: str) -> dict[str, Any]:
        path = _path(paths.ADMIN_TOKEN_ROTATE, share=share, token_id=token_id)
        return self._call("POST", path, {"grace": grace})

    def update_token(
        self, share: str, token_id: str, expires: str | None = None, description: str | None = None
    ) -> dict[str, Any]:
        body = {
            key: value
            for key, value in (("expires", expires), ("description", description))
            if value is not None
        }
        return self._call("PATCH", _path(paths.ADMIN_TOKEN, share=share, token_id=token_id), body)

    def revoke_token(self, share: str, token_id: str) -> None:
        self._call("DELETE", _path(paths.ADMIN_TOKEN, share=share, token_id=token_id))

    def create_oauth_client(self, share: str, expires: str, description: str) -> dict[str, Any]:
        body = {"expires": expires, "description": description}
        return self._call("POST", _path(paths.ADMIN_OAUTH_CLIENTS, share=share), body)

    def list_oauth_clients(self, share: str) -> list[dict[str, Any]]:
        return self._call("GET", _path(paths.ADMIN_OAUTH_CLIENTS, share=share))["items"]

    def revoke_oauth_client(self, share: str, client_id: str) -> None:
        self._call("DELETE", _path(paths.ADMIN_OAUTH_CLIENT, share=share, client_id=client_id))

    # -- named recipients ---------------------------------------------------------

    def create_recipient(self, name: str, properties: dict[str, str] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if properties:
            body["properties"] = properties
        return self._call("POST", paths.ADMIN_RECIPIENTS, body)

    def update_recipient(
        self, name: str, properties: dict[str, str] | None = None, unset: list[str] | None = None
    ) -> dict[str, Any]:
        body = {"properties": properties or {}, "unset": unset or []}
        return self._call("PATCH", _path(paths.ADMIN_RECIPIENT, recipient=name), body)

    def list_recipients(self) -> list[dict[str, Any]]:
        return self._call("GET", paths.ADMIN_RECIPIENTS)["items"]

    def recipient_info(self, name: str) -> dict[str, Any]:
        return self._call("GET", _path(paths.ADMIN_RECIPIENT, recipient=name))

    def remove_recipient(self, name: str) -> None:
        self._call("DELETE", _path(paths.ADMIN_RECIPIENT, recipient=name))

    def grant_share(self, name: str, share: str) -> dict[str, Any]:
        return self._call("POST", _path(paths.ADMIN_RECIPIENT_SHARES, recipient=name), {"share": share})

    def revoke_recipient_share(self, name: str, share: str) -> dict[str, Any]:
        return self._call("DELETE", _path(paths.ADMIN_RECIPIENT_SHARE, recipient=name, share=share))

    def create_recipient_token(
        self, name: str, expires: str, description: str, activation: bool = False
    ) -> dict[str, Any]:
        body = {"expires": expires, "description": description, "activation": activation}
        return self._call("POST", _path(paths.ADMIN_RECIPIENT_TOKENS, recipient=name), body)

    def list_recipient_tokens(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", _path(paths.ADMIN_RECIPIENT_TOKENS, recipient=name))["items"]

    def revoke_recipient_token(self, name: str, token_id: str) -> None:
        self._call("DELETE", _path(paths.ADMIN_RECIPIENT_TOKEN, recipient=name, token_id=token_id))


def _metadata_body(change: MetadataChange) -> dict[str, Any]:
    """The admin API's fields of a share's metadata change: only what it asks ("" clears)."""
    body: dict[str, Any] = {}
    if change.display_name is not None:
        body["displayName"] = change.display_name
    if change.comment is not None:
        body["comment"] = change.comment
    if change.properties:
        body["properties"] = dict(change.properties)
    if change.unset:
        body["unset"] = list(change.unset)
    return body


def _path(template: str, **names: str) -> str:
    """An admin path of `paths` with its `{name}` parameters filled in, each quoted as one segment."""
    return template.format_map({key: urllib.parse.quote(value, safe="") for key, value in names.items()})


def _error_from(error: urllib.error.HTTPError) -> AdminError:
    try:
        body = json.loads(error.read())
        message = body["message"] if "message" in body else body["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {error.code} {error.reason}"
    if error.code == 404:
        return AdminNotFound(message)
    return AdminError(message)
