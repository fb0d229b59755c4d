"""The Starlette application: routes under the protocol prefix, errors as JSON."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from share_store.iceberg.catalogs import CatalogRegistry
from share_store.persistence import ShareStore
from share_store.storage.base import ObjectStorage
from sharing_server import routes
from sharing_server.errors import EXCEPTION_HANDLERS
from sharing_server.files import serve_file
from sharing_server.page_tokens import TokenCodec
from sharing_server.queries import TableQueries

TABLE = "/shares/{share}/schemas/{schema}/tables/{table}"


class SecurityHeaders:
    """Headers every response carries; protocol bodies are data, never pages."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"x-content-type-options", b"nosniff"))
                if not any(name.lower() == b"cache-control" for name, _ in headers):
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def health(_request: object) -> Response:
    return Response("ok\n", media_type="text/plain")


def protocol_routes() -> list[Route]:
    return [
        Route("/shares", routes.list_shares, methods=["GET"]),
        Route("/shares/{share}", routes.get_share, methods=["GET"]),
        Route("/shares/{share}/schemas", routes.list_schemas, methods=["GET"]),
        Route("/shares/{share}/schemas/{schema}/tables", routes.list_tables, methods=["GET"]),
        Route("/shares/{share}/all-tables", routes.list_all_tables, methods=["GET"]),
        # The legacy HEAD form answers like /version.
        Route(TABLE, routes.table_version, methods=["HEAD"]),
        Route(TABLE + "/version", routes.table_version, methods=["GET"]),
        Route(TABLE + "/metadata", routes.table_metadata, methods=["GET"]),
        Route(TABLE + "/query", routes.table_query, methods=["POST"]),
        Route(TABLE + "/changes", routes.table_changes, methods=["GET"]),
        Route("/files/{bucket}/{key:path}", serve_file, methods=["GET", "HEAD"]),
    ]


def create_app(
    store: ShareStore,
    storage: ObjectStorage,
    secret: bytes,
    prefix: str = "/delta-sharing",
    catalogs: CatalogRegistry | None = None,
) -> Starlette:
    app = Starlette(
        routes=[Route("/healthz", health, methods=["GET"]), Mount(prefix, routes=protocol_routes())],
        exception_handlers=EXCEPTION_HANDLERS,
        middleware=[Middleware(SecurityHeaders)],
    )
    app.state.store = store
    app.state.storage = storage
    app.state.queries = TableQueries(storage, secret, catalogs, store)
    app.state.list_tokens = TokenCodec(secret, "list-page")
    return app
