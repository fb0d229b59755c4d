"""The admin REST API under `/admin/v1`: everything the CLI does, behind the admin token.

    GET    /shares             ?search&after&limit   list shares (a page of them with limit)
    POST   /shares                 {name, tables, history, check, displayName, comment, properties}
    GET    /shares/{share}                           schemas, tables, credential counts, metadata
    PATCH  /shares/{share}         {add, remove, history, check, displayName, comment, properties, unset}
    DELETE /shares/{share}                           also revokes its tokens and clients
    PUT    /shares/{share}/schemas/{schema}/tables/{table}/restriction  {where, columns}
    DELETE /shares/{share}/schemas/{schema}/tables/{table}/restriction  the table shared whole again
    GET    /shares/{share}/tokens
    POST   /shares/{share}/tokens  {expires, description}      -> secret, shown once
    POST   /shares/{share}/tokens/{id}/rotate  {grace}         -> new secret
    PATCH  /shares/{share}/tokens/{id}  {expires, description}  expiry from now, bounded
    DELETE /shares/{share}/tokens/{id}
    GET    /shares/{share}/oauth-clients
    POST   /shares/{share}/oauth-clients  {expires, description} -> client secret, shown once
    DELETE /shares/{share}/oauth-clients/{id}
    GET    /health                                   the store, and each catalog's backend and last error
    GET    /recipients                               named recipients and their shares
    POST   /recipients             {name, properties}
    GET    /recipients/{r}                           shares, properties and tokens
    PATCH  /recipients/{r}         {properties, unset}  set and remove properties, all or none
    DELETE /recipients/{r}                           also revokes its tokens
    POST   /recipients/{r}/shares  {share}           grant a share
    DELETE /recipients/{r}/shares/{share}            revoke a share
    GET    /recipients/{r}/tokens
    POST   /recipients/{r}/tokens  {expires, description, activation} -> secret or one-time link
    DELETE /recipients/{r}/tokens/{id}

Tables added are checked to be there unless `check` is false (the CLI's
`--no-check`), by `Admin` as on every other path. The API is off unless
`[admin] token_hash` is set; the token itself is never stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from share_store.authentication.sign_in_throttle import AdminToken
from share_store.errors import MalformedRequest, Unauthenticated
from share_store.persistence.share_metadata import MetadataChange
from sharing_server import paths
from sharing_server.admin.authentication import AdminAuthentication
from sharing_server.admin.commands import DEFAULT_EXPIRES, DEFAULT_GRACE, Admin, iso
from sharing_server.admin.share_metadata import metadata_change
from sharing_server.http import json_text

Handler = Callable[[Admin, Request, dict[str, Any]], Any]


def _field(body: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = body.get(key, default)
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise MalformedRequest(f"'{key}' must be an array of strings")
    elif not isinstance(value, kind):
        raise MalformedRequest(f"'{key}' must be a {kind.__name__}")
    return value


def endpoint(handler: Handler, admin: Admin, status: int = 200) -> Callable[[Request], Awaitable[Response]]:
    """Parse a JSON object body, run `handler` off the event loop, answer JSON (the caller is the
    provider, authenticated by the route's `AdminAuthentication`)."""

    async def run(request: Request) -> Response:
        # The route's backend let the provider in; a route left without it is closed, not open.
        if not getattr(request.scope.get("user"), "is_authenticated", False):
            raise Unauthenticated("invalid admin token")
        body: dict[str, Any] = {}
        if request.method in ("POST", "PATCH", "PUT"):
            raw = await request.body()
            try:
                # An empty body is no fields: a POST that needs none may send none.
                body = json_text.json_object(raw) if raw.strip() else {}
            except json_text.NotAJsonObject as refused:
                raise MalformedRequest(refused.message) from None
        result = await run_in_threadpool(handler, admin, request, body)
        if result is None:
            return Response(status_code=204)
        return JSONResponse(result, status_code=status)

    run.__name__ = f"admin_{handler.__name__}"  # the route's name in metrics and the audit log
    return run


def _share(request: Request) -> str:
    return request.path_params["share"]


MAX_PAGE = 1000


def list_shares(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    """All shares, or with `limit` one page of them: `next` is the `after` of the following page."""
    params = request.query_params
    limit_text = params.get("limit")
    limit = None
    if limit_text is not None:
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE:
            raise MalformedRequest(f"'limit' must be a whole number from 1 to {MAX_PAGE}")
        limit = int(limit_text)
    items = admin.list_shares(params.get("search", ""), params.get("after"), limit)
    answer: dict[str, Any] = {"items": items}
    if limit is not None and len(items) == limit:
        answer["next"] = items[-1]["name"]
    return answer


def _text_or_cleared(body: dict[str, Any], key: str) -> str | None:
    """`key` of `body`: None when absent (left as it is), "" when null (cleared), else its string."""
    if key not in body:
        return None
    return "" if body[key] is None else _field(body, key, str, None)


def _metadata(body: dict[str, Any]) -> MetadataChange:
    """A body's share metadata: `displayName` and `comment` (null or "" clear them), `properties`
    (an object, its pairs set) and `unset` (an array of keys removed)."""
    return metadata_change(
        _text_or_cleared(body, "displayName"),
        _text_or_cleared(body, "comment"),
        _optional(body, "properties", dict),
        _optional(body, "unset", list),
    )


def create_share(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.create_share(
        _field(body, "name", str, None),
        _field(body, "tables", list, []),
        _field(body, "history", bool, True),
        _field(body, "check", bool, True),
        _metadata(body),
    )


def share_info(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return admin.share_info(_share(request))


def update_share(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.update_share(
        _share(request),
        _field(body, "add", list, []),
        _field(body, "remove", list, []),
        _field(body, "history", bool, True),
        _field(body, "check", bool, True),
        _metadata(body),
    )


def remove_share(admin: Admin, request: Request, _body: dict[str, Any]) -> None:
    admin.remove_share(_share(request))


def _optional(body: dict[str, Any], key: str, kind: type) -> Any:
    """`key` of `body` if given and not null, checked as `_field` checks it; else None."""
    return _field(body, key, kind, None) if body.get(key) is not None else None


def _table_ref(request: Request) -> str:
    return f"{request.path_params['schema']}/{request.path_params['table']}"


def set_restriction(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    """Restrict a shared table: `where` (a SQL predicate) and/or `columns`, checked against its schema."""
    return admin.restrict(
        _share(request), _table_ref(request), _optional(body, "where", str), _optional(body, "columns", list)
    )


def clear_restriction(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return admin.restrict(_share(request), _table_ref(request), clear=True)


def list_tokens(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return {"items": admin.list_tokens(_share(request))}


def create_token(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.create_token(
        _share(request), _field(body, "expires", str, DEFAULT_EXPIRES), _field(body, "description", str, "")
    )


def rotate_token(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.rotate_token(
        _share(request), request.path_params["token_id"], _field(body, "grace", str, DEFAULT_GRACE)
    )


def update_token(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.update_token(
        _share(request),
        request.path_params["token_id"],
        _field(body, "expires", str, None) if "expires" in body else None,
        _field(body, "description", str, None) if "description" in body else None,
    )


def revoke_token(admin: Admin, request: Request, _body: dict[str, Any]) -> None:
    admin.revoke_token(_share(request), request.path_params["token_id"])


def list_oauth_clients(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return {"items": admin.list_oauth_clients(_share(request))}


def create_oauth_client(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.create_oauth_client(
        _share(request), _field(body, "expires", str, DEFAULT_EXPIRES), _field(body, "description", str, "")
    )


def revoke_oauth_client(admin: Admin, request: Request, _body: dict[str, Any]) -> None:
    admin.revoke_oauth_client(_share(request), request.path_params["client_id"])


def health(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    """Whether the store answers, and each Iceberg catalog with its backend and last load error."""
    catalogs = admin.catalog_health()
    for entry in catalogs:
        if entry["lastErrorAt"] is not None:
            entry["lastErrorAt"] = iso(datetime.fromtimestamp(entry["lastErrorAt"], UTC))
    return {"store": admin.store.ping(), "catalogs": catalogs}


def _recipient(request: Request) -> str:
    return request.path_params["recipient"]


def list_recipients(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return {"items": admin.list_recipients()}


def create_recipient(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.create_recipient(_field(body, "name", str, None), _optional(body, "properties", dict))


def update_recipient(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.update_recipient(
        _recipient(request), _optional(body, "properties", dict), _optional(body, "unset", list)
    )


def recipient_info(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return admin.recipient_info(_recipient(request))


def remove_recipient(admin: Admin, request: Request, _body: dict[str, Any]) -> None:
    admin.remove_recipient(_recipient(request))


def grant_share(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.grant_share(_recipient(request), _field(body, "share", str, None))


def revoke_recipient_share(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return admin.revoke_recipient_share(_recipient(request), _share(request))


def list_recipient_tokens(admin: Admin, request: Request, _body: dict[str, Any]) -> dict[str, Any]:
    return {"items": admin.list_recipient_tokens(_recipient(request))}


def create_recipient_token(admin: Admin, request: Request, body: dict[str, Any]) -> dict[str, Any]:
    return admin.create_recipient_token(
        _recipient(request),
        _field(body, "expires", str, DEFAULT_EXPIRES),
        _field(body, "description", str, ""),
        _field(body, "activation", bool, False),
    )


def revoke_recipient_token(admin: Admin, request: Request, _body: dict[str, Any]) -> None:
    admin.revoke_recipient_token(_recipient(request), request.path_params["token_id"])


def admin_routes(admin: Admin, admin_token: AdminToken) -> list[Route]:
    """The admin API's routes, each given the admin commands, and behind the admin token."""
    # On each route, not the mount: an unknown path or method is a 404 or 405 whoever asks.
    authentication = [Middleware(AuthenticationMiddleware, backend=AdminAuthentication(admin_token))]

    def _route(path: str, handler: Handler, method: str, status: int = 200) -> Route:
        # The route takes its name, admin_<handler>, from the endpoint.
        return Route(path, endpoint(handler, admin, status), methods=[method], middleware=authentication)

    return [
        _route(paths.ADMIN_SHARES, list_shares, "GET"),
        _route(paths.ADMIN_SHARES, create_share, "POST", 201),
        _route(paths.ADMIN_SHARE, share_info, "GET"),
        _route(paths.ADMIN_SHARE, update_share, "PATCH"),
        _route(paths.ADMIN_SHARE, remove_share, "DELETE"),
        _route(paths.ADMIN_TABLE_RESTRICTION, set_restriction, "PUT"),
        _route(paths.ADMIN_TABLE_RESTRICTION, clear_restriction, "DELETE"),
        _route(paths.ADMIN_TOKENS, list_tokens, "GET"),
        _route(paths.ADMIN_TOKENS, create_token, "POST", 201),
        _route(paths.ADMIN_TOKEN_ROTATE, rotate_token, "POST", 201),
        _route(paths.ADMIN_TOKEN, update_token, "PATCH"),
        _route(paths.ADMIN_TOKEN, revoke_token, "DELETE"),
        _route(paths.ADMIN_OAUTH_CLIENTS, list_oauth_clients, "GET"),
        _route(paths.ADMIN_OAUTH_CLIENTS, create_oauth_client, "POST", 201),
        _route(paths.ADMIN_OAUTH_CLIENT, revoke_oauth_client, "DELETE"),
        _route(paths.ADMIN_HEALTH, health, "GET"),
        _route(paths.ADMIN_RECIPIENTS, list_recipients, "GET"),
        _route(paths.ADMIN_RECIPIENTS, create_recipient, "POST", 201),
        _route(paths.ADMIN_RECIPIENT, recipient_info, "GET"),
        _route(paths.ADMIN_RECIPIENT, update_recipient, "PATCH"),
        _route(paths.ADMIN_RECIPIENT, remove_recipient, "DELETE"),
        _route(paths.ADMIN_RECIPIENT_SHARES, grant_share, "POST", 201),
        _route(paths.ADMIN_RECIPIENT_SHARE, revoke_recipient_share, "DELETE"),
        _route(paths.ADMIN_RECIPIENT_TOKENS, list_recipient_tokens, "GET"),
        _route(paths.ADMIN_RECIPIENT_TOKENS, create_recipient_token, "POST", 201),
        _route(paths.ADMIN_RECIPIENT_TOKEN, revoke_recipient_token, "DELETE"),
    ]
