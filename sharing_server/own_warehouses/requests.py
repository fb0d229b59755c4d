"""What a request to the own warehouses' API names: its warehouse, namespace and JSON body, parsed
before any decision, and who is asking, as the catalog it may use (`catalog_for`)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from share_store.errors import InvalidParameter
from share_store.warehouses.access import CatalogAccess
from share_store.warehouses.catalog import WarehouseCatalog
from share_store.warehouses.names import check_warehouse, parse_namespace_path
from sharing_server.own_warehouses.callers import caller_of


async def catalog_for(request: Request) -> CatalogAccess:
    """The catalog as the request's authenticated caller may use it (every operation checks its policy)."""
    who = await caller_of(request)  # authenticated before anything of the request is looked at
    catalog: WarehouseCatalog = request.app.state.warehouses
    return CatalogAccess(catalog, who)


def warehouse_of(request: Request) -> str:
    return check_warehouse(request.path_params["prefix"])


def namespace_of(request: Request) -> tuple[str, ...]:
    return parse_namespace_path(request.path_params["namespace"])


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        raise InvalidParameter("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise InvalidParameter("the request body must be a JSON object")
    return body


def no_content() -> Response:
    return Response(status_code=204)
