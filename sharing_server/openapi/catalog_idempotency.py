"""`Idempotency-Key` in the OpenAPI specs of `/_iceberg` (issue 52): every operation whose handler
takes a key (`sharing_server.catalog.idempotent_routes.takes_key`) documents the header and the
refusals a key adds: a key that is not a UUID (400), one used for another request (422), one whose
request is still in progress (503, with `Retry-After`)."""

from __future__ import annotations

from sharing_server.catalog.idempotent_routes import takes_key
from sharing_server.openapi.iceberg_shares import iceberg_error
from sharing_server.openapi.shapes import (
    OperationKey,
    Schema,
    header,
    json_content,
    model,
    parameter,
    response,
)

KEY = parameter(
    "Idempotency-Key",
    "header",
    {"type": "string", "format": "uuid", "minLength": 36, "maxLength": 36},
    "A UUID (the spec asks for a UUIDv7), one per request and the same on its retries: a retry of a "
    "finalized request (a 2xx, or a 4xx it would get again) gets its answer, status and body, with "
    "`Idempotent-Replayed: true`; kept for `idempotency-key-lifetime` of `/v1/config`. Bound to the "
    "caller, method, path and body.",
)
NOT_A_UUID = "An `Idempotency-Key` that is not a UUID, or a malformed request (`BadRequestException`)."
REUSED = "The `Idempotency-Key` was used for another request (`UnprocessableEntityException`)."
IN_PROGRESS = response(
    "The `Idempotency-Key`'s request is still in progress, or storage cannot be reached right now "
    "(`ServiceUnavailableException`); see `Retry-After`.",
    json_content(model("IcebergError")),
    {"Retry-After": header({"type": "integer", "minimum": 1}, required=False)},
)


def with_idempotency_keys(operations: dict[OperationKey, Schema]) -> dict[OperationKey, Schema]:
    """`operations`, those that take a key with its header and refusals."""
    keyed: dict[OperationKey, Schema] = {}
    for (name, method), spec in operations.items():
        if not takes_key(name, method):
            keyed[name, method] = spec
            continue
        responses = dict(spec["responses"])
        responses.setdefault("400", iceberg_error(NOT_A_UUID))
        responses["422"] = iceberg_error(REUSED)
        responses["503"] = IN_PROGRESS
        keyed[name, method] = {
            **spec,
            "parameters": [*spec.get("parameters", []), KEY],
            "responses": responses,
        }
    return keyed
