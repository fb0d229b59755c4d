"""What a request to the own warehouses' API names: its warehouse, namespace and JSON body, parsed
before any handler decides anything, and the catalog every handler asks."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from share_store.errors import InvalidParameter
from share_store.warehouses.catalog import WarehouseCatalog
from share_store.warehouses.names import check_warehouse, parse_namespace_path


def catalog(request: Request) -> WarehouseCatalog:
    return request.app.state.warehouses  # type: ignore[no-any-return]


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
