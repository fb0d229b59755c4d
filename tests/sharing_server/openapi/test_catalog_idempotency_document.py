"""The OpenAPI document names `Idempotency-Key` on exactly the `/_iceberg` operations whose handler
takes one (`sharing_server.catalog.idempotent_routes`), with the refusals a key adds."""

from __future__ import annotations

import re

from starlette.routing import Mount, Route

from sharing_server import paths
from sharing_server.catalog.idempotent_routes import IdempotentEndpoint
from sharing_server.openapi.document import openapi_document
from tests.sharing_server.openapi.test_document import PREFIX, _app


def test_the_key_is_documented_where_it_is_taken_and_nowhere_else() -> None:
    app = _app(PREFIX)
    document = openapi_document(PREFIX, app.routes)
    documented = {
        (path, method.upper())
        for path, item in document["paths"].items()
        for method, spec in item.items()
        if any(p.get("name") == "Idempotency-Key" for p in spec.get("parameters", []))
    }
    mount = next(r for r in app.routes if isinstance(r, Mount) and r.path == paths.WAREHOUSE_PREFIX)
    served = {
        (re.sub(r"\{(\w+):\w+\}", r"{\1}", paths.WAREHOUSE_PREFIX + route.path), method)
        for route in mount.routes
        if isinstance(route, Route)
        and isinstance(getattr(route.endpoint, "__self__", None), IdempotentEndpoint)
        for method in route.methods or ()
        if method in {"POST", "PUT", "DELETE"}
    }
    assert documented == served and len(served) > 20
    commit = document["paths"][paths.WAREHOUSE_PREFIX + "/v1/{prefix}/namespaces/{namespace}/tables/{table}"]
    assert {"400", "422", "503"} <= set(commit["post"]["responses"])
