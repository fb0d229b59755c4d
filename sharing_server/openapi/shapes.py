"""The building blocks of the OpenAPI document: common schemas and the dicts OpenAPI nests.

Every area's operations (`protocol`, `admin`, `iceberg`, `warehouses`,
`service`) and the shared `components` are written with these, so that an
operation spec reads as its summary, responses and parameters rather than as
OpenAPI's nesting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]
Security = list[dict[str, list[str]]]
# An operation is found by the name of the route serving it (its endpoint's
# name) and the method: one endpoint may serve several operations, as
# `table_version` serves both the HEAD of a table and its `/version`.
OperationKey = tuple[str, str]

STRING: Schema = {"type": "string"}
INTEGER: Schema = {"type": "integer", "format": "int64"}
BOOLEAN: Schema = {"type": "boolean"}
DATE_TIME: Schema = {"type": "string", "format": "date-time"}
NAME: Schema = {"type": "string", "minLength": 1}
TEXT = {"text/plain": {"schema": STRING}}


@dataclass(frozen=True)
class Area:
    """One part of the API: its tags, its operations, and the components only they use."""

    tags: dict[str, str]
    operations: dict[OperationKey, Schema]
    schemas: dict[str, Schema] = field(default_factory=dict)
    parameters: dict[str, Schema] = field(default_factory=dict)


def ref(section: str, name: str) -> Schema:
    return {"$ref": f"#/components/{section}/{name}"}


def model(name: str) -> Schema:
    return ref("schemas", name)


def json_content(schema: Schema) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def object_schema(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    schema: Schema = {"type": "object", "properties": {**required, **(optional or {})}}
    if required:
        schema["required"] = list(required)
    return schema


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def header(schema: Schema, required: bool = True) -> Schema:
    return {"schema": schema, "required": required}


def response(
    description: str, content: dict[str, Any] | None = None, headers: Schema | None = None
) -> Schema:
    answer: Schema = {"description": description}
    if content:
        answer["content"] = content
    if headers:
        answer["headers"] = headers
    return answer


def operation(
    operation_id: str,
    summary: str,
    tag: str,
    security: Security,
    responses: dict[str, Schema],
    parameters: list[Schema] | None = None,
    body: Schema | None = None,
    description: str | None = None,
) -> Schema:
    spec: Schema = {"operationId": operation_id, "summary": summary}
    if description:
        spec["description"] = description
    spec.update({"tags": [tag], "security": security, "responses": responses})
    if parameters:
        spec["parameters"] = parameters
    if body is not None:
        spec["requestBody"] = body
    return spec


def json_body(schema: Schema, required: bool = True) -> Schema:
    return {"required": required, "content": json_content(schema)}


def parameter(name: str, where: str, schema: Schema, description: str, required: bool = False) -> Schema:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "schema": schema,
        "description": description,
    }


def query(name: str, schema: Schema, description: str) -> Schema:
    return parameter(name, "query", schema, description)


def parameter_refs(*names: str) -> list[Schema]:
    return [ref("parameters", name) for name in names]
