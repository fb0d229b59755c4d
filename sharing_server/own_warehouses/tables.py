"""AIStor Tables' catalog API for tables: list, create (staged too), load, commit, drop, rename,
register, multi-table transactions and metrics reports, under `/_iceberg/v1/{prefix}`.

Request bodies are parsed with pyiceberg's own models (`CreateTableRequest`,
`CommitTableRequest`, `RegisterTableRequest`); a body that does not fit is a 400
naming the first problem. A failed requirement, or a commit that lost the race
for the table's pointer, is a 409 `CommitFailedException`, which clients answer
by refreshing and retrying.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.catalog.rest import CreateTableRequest, RegisterTableRequest
from pyiceberg.table import CommitTableRequest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from share_store.errors import InvalidParameter
from share_store.warehouses.catalog import LoadedTable, TableName
from share_store.warehouses.commits import metadata_dict, parse_model
from share_store.warehouses.names import check_name, check_namespace
from share_store.warehouses.policies import table_arn
from sharing_server.http.iceberg_errors import iceberg_errors
from sharing_server.own_warehouses.requests import (
    catalog_for,
    json_body,
    namespace_of,
    no_content,
    warehouse_of,
)


def _table(request: Request) -> TableName:
    return TableName.of(
        warehouse_of(request), namespace_of(request), check_name(request.path_params["table"])
    )


def _arn(table: TableName) -> str:
    return table_arn(table.warehouse, table.namespace, table.name)


def load_result(loaded: LoadedTable, snapshots: str = "all") -> dict[str, Any]:
    metadata = metadata_dict(loaded.metadata)
    if snapshots == "refs":
        # Only the snapshots a branch or tag points at, as the spec's `snapshots=refs` asks.
        wanted = {ref["snapshot-id"] for ref in metadata.get("refs", {}).values()}
        metadata["snapshots"] = [s for s in metadata.get("snapshots", []) if s["snapshot-id"] in wanted]
    result: dict[str, Any] = {"metadata": metadata, "config": {}}
    if loaded.metadata_location is not None:
        result["metadata-location"] = loaded.metadata_location
    return result


def _identifier(raw: Any, what: str) -> tuple[tuple[str, ...], str]:
    if not isinstance(raw, dict) or not isinstance(raw.get("namespace"), list) or "name" not in raw:
        raise InvalidParameter(f'{what} must be {{"namespace": [...], "name": "..."}}')
    return check_namespace(raw["namespace"]), check_name(raw["name"])


@iceberg_errors("NoSuchNamespaceException")
async def tables(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse, levels = warehouse_of(request), namespace_of(request)
    if request.method == "POST":
        # The spec makes these optional; pyiceberg's model wants them present.
        body = {"location": None, "partition-spec": None, "write-order": None, **await json_body(request)}
        create = parse_model(CreateTableRequest, body, "create table request")
        table = TableName.of(warehouse, levels, create.name)
        loaded = await run_in_threadpool(
            access.create_table, table, create.table_schema, create.partition_spec,
            create.write_order, create.location, create.properties, create.stage_create,
        )  # fmt: skip
        return JSONResponse(load_result(loaded))
    names = await run_in_threadpool(access.list_tables, warehouse, levels)
    identifiers = [{"namespace": list(levels), "name": name} for name in names]
    return JSONResponse({"identifiers": identifiers, "next-page-token": None})


@iceberg_errors("NoSuchTableException")
async def table(request: Request) -> Response:
    access = await catalog_for(request)
    name = _table(request)
    if request.method == "DELETE":
        purge = request.query_params.get("purgeRequested", "false").lower() == "true"
        await run_in_threadpool(access.drop_table, name, purge)
        return no_content()
    if request.method == "POST":
        commit = parse_model(CommitTableRequest, _with_identifier(await json_body(request), name), "commit")
        loaded = await run_in_threadpool(access.commit, name, commit)
        return JSONResponse({"metadata-location": loaded.metadata_location,
                             "metadata": metadata_dict(loaded.metadata)})  # fmt: skip
    if request.method == "HEAD":
        exists = await run_in_threadpool(access.table_exists, name)
        return no_content() if exists else Response(status_code=404)
    snapshots = request.query_params.get("snapshots", "all")
    if snapshots not in ("all", "refs"):
        raise InvalidParameter("snapshots must be 'all' or 'refs'")
    loaded = await run_in_threadpool(access.load_table, name)
    return JSONResponse(load_result(loaded, snapshots))


def _with_identifier(body: dict[str, Any], name: TableName) -> dict[str, Any]:
    """The commit as pyiceberg's model takes it: the path names the table, whatever the body says."""
    return {**body, "identifier": {"namespace": list(name.namespace), "name": name.name}}


@iceberg_errors("NoSuchNamespaceException")
async def register(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse, levels = warehouse_of(request), namespace_of(request)
    # The spec makes `overwrite` optional; pyiceberg's model wants it present.
    raw = {"overwrite": False, **await json_body(request)}
    body = parse_model(RegisterTableRequest, raw, "register table request")
    name = TableName.of(warehouse, levels, body.name)
    loaded = await run_in_threadpool(access.register_table, name, body.metadata_location, body.overwrite)
    return JSONResponse(load_result(loaded))


@iceberg_errors("NoSuchTableException")
async def rename(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse = warehouse_of(request)
    body = await json_body(request)
    source = TableName.of(warehouse, *_identifier(body.get("source"), "source"))
    target = TableName.of(warehouse, *_identifier(body.get("destination"), "destination"))
    await run_in_threadpool(access.rename_table, source, target)
    return no_content()


@iceberg_errors("NoSuchTableException")
async def transaction(request: Request) -> Response:
    access = await catalog_for(request)
    warehouse = warehouse_of(request)
    changes = (await json_body(request)).get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise InvalidParameter('the body must list the commits: {"table-changes": [...]}')
    commits = []
    for raw in changes:
        commit = parse_model(CommitTableRequest, raw, "table change")
        if commit.identifier is None:
            raise InvalidParameter("each table change must name its table (identifier)")
        name = TableName.of(warehouse, commit.identifier.namespace.root, commit.identifier.name)
        commits.append((name, commit))
    await run_in_threadpool(access.commit_transaction, commits)
    return no_content()


@iceberg_errors("NoSuchTableException")
async def metrics(request: Request) -> Response:
    """Metrics reports are accepted and dropped: the audit line already records the request."""
    access = await catalog_for(request)
    name = _table(request)
    access.report_metrics(name)
    await json_body(request)
    return no_content()
