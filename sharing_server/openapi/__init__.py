"""The OpenAPI description of every endpoint the app serves, built as a plain dict.

Served at `/openapi.json` so that recipients and operators see the protocol,
OAuth and admin surfaces in one place, and fuzzed by the test suite
(schemathesis) so that the description and the server cannot drift apart.

OpenAPI 3.0.3 rather than 3.1: schemathesis 3.x supports 3.1 only
experimentally.

`document` walks the app's routes and looks each one up in the areas' specs:
`protocol` (under the prefix: the protocol, OAuth and file URLs), `admin`,
`iceberg` (the read-only catalog), `warehouses` (AIStor Tables' writable
catalog, its bodies in `warehouse_schemas`) and `service`, written with
`shapes` and sharing `components`.
"""

from sharing_server.openapi.document import OpenApiEndpoint, SpecMismatch, openapi_document

__all__ = ["OpenApiEndpoint", "SpecMismatch", "openapi_document"]
