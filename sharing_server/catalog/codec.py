"""The Iceberg REST catalog's bodies, as the own warehouses read and answer them: pure functions.

A request body becomes one of pyiceberg's models (`CreateTableRequest`,
`CommitTableRequest`, `RegisterTableRequest`) or a checked value; one that does
not fit is an `InvalidParameter` (a 400) naming the first problem. A table comes
back as the spec's `LoadTableResult`. Kept under the HTTP layer so that its
handlers only read a request and call down once: what a body means, and whether
its names are allowed, is decided here with the rest of the catalog.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pyiceberg.table import CommitTableRequest

from share_store.catalog.catalog import LoadedTable, NewTable
from share_store.catalog.commits import metadata_dict, metadata_json, parse_model
from share_store.catalog.dropped_tables import DroppedTable
from share_store.catalog.names import (
    TableName,
    check_name,
    check_namespace,
    check_warehouse,
    parse_namespace_path,
)
from share_store.catalog.view_commits import ViewCommit
from share_store.catalog.views import LoadedView, NewView
from share_store.errors import InvalidParameter
from sharing_server.http import json_text

# pyiceberg's REST request models are imported where a body is parsed into one, not with this
# module: theirs brings `requests` and pyiceberg's REST client (5 MB) into every server, which one
# without own warehouses never needs (one with some loads it as it starts: `app.CATALOG_MODULES`).


def json_object(body: bytes) -> dict[str, Any]:
    """Every `/_iceberg` body, read once: JSON text, an object, no lone surrogate in it (one stored
    would make its namespace's or table's answers unencodable, a 500 for every caller since)."""
    try:
        return json_text.json_object(body)
    except json_text.NotAJsonObject as refused:
        raise InvalidParameter(refused.message) from None


def table_at(warehouse: str, namespace: str, table: str) -> TableName:
    """The table a URL's path names: warehouse, namespace segment (levels joined by %1F), table."""
    return TableName.of(check_warehouse(warehouse), parse_namespace_path(namespace), check_name(table))


def namespace_at(warehouse: str, namespace: str) -> tuple[str, tuple[str, ...]]:
    return check_warehouse(warehouse), parse_namespace_path(namespace)


def parent_namespace(text: str | None) -> tuple[str, ...]:
    """`?parent=` of a namespace listing: none for the top level."""
    return parse_namespace_path(text) if text else ()


# -- requests -------------------------------------------------------------------------------


def new_warehouse(body: bytes) -> tuple[str, bool]:
    """A warehouse create's name, and whether it adopts an existing bucket."""
    raw = json_object(body)
    name, adopt = raw.get("name"), raw.get("adopt", False)
    if not isinstance(name, str):
        raise InvalidParameter('the body must name the warehouse: {"name": "..."}')
    if not isinstance(adopt, bool):
        raise InvalidParameter("adopt must be true or false")
    return check_warehouse(name), adopt


def new_namespace(body: bytes) -> tuple[tuple[str, ...], dict[str, str]]:
    raw = json_object(body)
    levels = raw.get("namespace")
    if not isinstance(levels, list) or not all(isinstance(level, str) for level in levels):
        raise InvalidParameter('the body must name the namespace: {"namespace": ["level", ...]}')
    return check_namespace(levels), raw.get("properties") or {}


def property_changes(body: bytes) -> tuple[list[str], dict[str, str]]:
    """A namespace properties update's removals and updates."""
    raw = json_object(body)
    removals, updates = raw.get("removals") or [], raw.get("updates") or {}
    if not isinstance(removals, list) or not all(isinstance(key, str) for key in removals):
        raise InvalidParameter("removals must be a list of property names")
    if not isinstance(updates, dict):
        raise InvalidParameter("updates must be an object of property names and values")
    return removals, updates


def new_table(warehouse: str, levels: tuple[str, ...], body: bytes) -> tuple[TableName, NewTable]:
    # The spec makes these optional; pyiceberg's model wants them present.
    from pyiceberg.catalog.rest import CreateTableRequest  # imported here: see above `json_object`

    raw = {"location": None, "partition-spec": None, "write-order": None, **json_object(body)}
    create = parse_model(CreateTableRequest, raw, "create table request")
    table = TableName.of(warehouse, levels, create.name)
    return table, NewTable(
        create.table_schema, create.partition_spec, create.write_order, create.location,
        create.properties, create.stage_create,
    )  # fmt: skip


def commit(table: TableName, body: bytes) -> CommitTableRequest:
    """A commit to the table the path names, whatever the body's `identifier` says."""
    raw = {**json_object(body), "identifier": {"namespace": list(table.namespace), "name": table.name}}
    return parse_model(CommitTableRequest, raw, "commit")  # type: ignore[no-any-return]


def registration(warehouse: str, levels: tuple[str, ...], body: bytes) -> tuple[TableName, str, bool]:
    """A register's table, metadata file and whether it overwrites."""
    # The spec makes `overwrite` optional; pyiceberg's model wants it present.
    from pyiceberg.catalog.rest import RegisterTableRequest  # imported here: see above `json_object`

    raw = {"overwrite": False, **json_object(body)}
    request = parse_model(RegisterTableRequest, raw, "register table request")
    return TableName.of(warehouse, levels, request.name), request.metadata_location, request.overwrite


def renaming(warehouse: str, body: bytes) -> tuple[TableName, TableName]:
    raw = json_object(body)
    return _identifier(warehouse, raw.get("source"), "source"), _identifier(
        warehouse, raw.get("destination"), "destination"
    )


def transaction(warehouse: str, body: bytes) -> list[tuple[TableName, CommitTableRequest]]:
    """A multi-table commit's changes, each with the table it names."""
    changes = json_object(body).get("table-changes")
    if not isinstance(changes, list) or not changes:
        raise InvalidParameter('the body must list the commits: {"table-changes": [...]}')
    commits = []
    for raw in changes:
        change = parse_model(CommitTableRequest, raw, "table change")
        if change.identifier is None:
            raise InvalidParameter("each table change must name its table (identifier)")
        table = TableName.of(warehouse, change.identifier.namespace.root, change.identifier.name)
        commits.append((table, change))
    return commits


def new_view(warehouse: str, levels: tuple[str, ...], body: bytes) -> tuple[TableName, NewView]:
    # The spec makes `location` optional; pyiceberg's model wants it present.
    from pyiceberg.catalog.rest import CreateViewRequest  # imported here: see above `json_object`

    raw = {"location": None, **json_object(body)}
    create = parse_model(CreateViewRequest, raw, "create view request")
    view = TableName.of(warehouse, levels, create.name)
    return view, NewView(create.view_schema, create.view_version, create.location, create.properties)


def view_commit(body: bytes) -> ViewCommit:
    """A commit to the view the path names (the body's `identifier`, if any, is not read)."""
    return ViewCommit.of(json_object(body))


def view_registration(warehouse: str, levels: tuple[str, ...], body: bytes) -> tuple[TableName, str]:
    from pyiceberg.catalog.rest import RegisterViewRequest  # imported here: see above `json_object`

    request = parse_model(RegisterViewRequest, json_object(body), "register view request")
    return TableName.of(warehouse, levels, request.name), request.metadata_location


def view_result(loaded: LoadedView) -> dict[str, Any]:
    """The spec's `LoadViewResult`."""
    return {
        "metadata-location": loaded.metadata_location,
        "metadata": metadata_dict(loaded.metadata),
        "config": {},
    }


def dropped_asked(value: str | None) -> bool:
    """`?dropped=` of a table or view listing: the dropped ones instead of the live ones."""
    if value is None or value.lower() == "false":
        return False
    if value.lower() == "true":
        return True
    raise InvalidParameter("dropped must be 'true' or 'false'")


def undrop_targets(warehouse: str, body: bytes) -> list[tuple[TableName, str | None]]:
    """An undrop's tables (or views), each with the id of the dropped one meant, if given (two dropped
    tables of one name are told apart by it; without it, the latest dropped)."""
    entries = json_object(body).get("identifiers")
    shape = '{"identifiers": [{"namespace": [...], "name": "...", "id": "..." (optional)}, ...]}'
    if not isinstance(entries, list) or not entries:
        raise InvalidParameter(f"the body must list what to undrop: {shape}")
    targets = []
    for entry in entries:
        name = _identifier(warehouse, entry, "each identifier")
        table_id = entry.get("id")
        if table_id is not None and (not isinstance(table_id, str) or not table_id):
            raise InvalidParameter(f"an identifier's id is the dropped table's id, as listed: {shape}")
        targets.append((name, table_id))
    return targets


def identifiers_result(levels: Sequence[str], names: Iterable[str]) -> dict[str, Any]:
    """A table or view listing of one namespace: the spec's `ListTablesResponse` (a view listing
    has the same shape), in one page."""
    return {
        "identifiers": [{"namespace": list(levels), "name": name} for name in names],
        "next-page-token": None,
    }


def dropped_result(found: list[DroppedTable]) -> dict[str, Any]:
    """A `?dropped=true` listing: the spec's `identifiers` (a name twice if dropped twice), and each
    dropped one with its id (for an undrop to name it), when it was dropped and when it is purged."""
    return {
        "identifiers": [{"namespace": list(d.name.namespace), "name": d.name.name} for d in found],
        "dropped": [
            {
                "namespace": list(d.name.namespace),
                "name": d.name.name,
                "id": d.id,
                "dropped-at": d.dropped_at.isoformat(timespec="milliseconds"),
                "purge-after": d.purge_after.isoformat(timespec="milliseconds"),
            }
            for d in found
        ],
        "next-page-token": None,
    }


def _identifier(warehouse: str, raw: Any, what: str) -> TableName:
    if not isinstance(raw, dict) or not isinstance(raw.get("namespace"), list) or "name" not in raw:
        raise InvalidParameter(f'{what} must be {{"namespace": [...], "name": "..."}}')
    return TableName.of(warehouse, raw["namespace"], raw["name"])


def snapshots_mode(value: str | None) -> str:
    """`?snapshots=` of a table load: every snapshot, or only those a branch or tag points at."""
    mode = value or "all"
    if mode not in ("all", "refs"):
        raise InvalidParameter("snapshots must be 'all' or 'refs'")
    return mode


# -- results --------------------------------------------------------------------------------


def load_result(
    loaded: LoadedTable,
    snapshots: str = "all",
    delegation: tuple[dict[str, str], list[dict[str, Any]]] = ({}, []),
) -> dict[str, Any]:
    """The spec's `LoadTableResult`, with the `config` and `storage-credentials` of its access
    delegation (`data_access`), if any."""
    metadata = _metadata_dict(loaded)
    if snapshots == "refs":
        wanted = {ref["snapshot-id"] for ref in metadata.get("refs", {}).values()}
        metadata["snapshots"] = [s for s in metadata.get("snapshots", []) if s["snapshot-id"] in wanted]
    config, credentials = delegation
    result: dict[str, Any] = {"metadata": metadata, "config": dict(config)}
    if credentials:
        result["storage-credentials"] = credentials
    if loaded.metadata_location is not None:
        result["metadata-location"] = loaded.metadata_location
    return result


def commit_result(loaded: LoadedTable) -> dict[str, Any]:
    """The spec's `CommitTableResponse`."""
    return {"metadata-location": loaded.metadata_location, "metadata": _metadata_dict(loaded)}


# The answers as bytes: `load_result` and `commit_result` as JSON, each the same object as the
# dictionary serialised (as Starlette's JSONResponse writes one), but with the table's metadata
# spliced in as the bytes of its file (`LoadedTable.text`) rather than parsed and written again:
# on a table of 1,000 snapshots that is 660 KB, three passes over which were most of a load's time.


def load_answer(
    loaded: LoadedTable,
    snapshots: str = "all",
    delegation: tuple[dict[str, str], list[dict[str, Any]]] = ({}, []),
) -> bytes:
    """`load_result` as the response's body."""
    if snapshots != "all":  # only some snapshots: the metadata is taken apart
        return _json(load_result(loaded, snapshots, delegation))
    config, credentials = delegation
    fields: list[tuple[str, bytes]] = [("metadata", _metadata_text(loaded)), ("config", _json(dict(config)))]
    if credentials:
        fields.append(("storage-credentials", _json(credentials)))
    if loaded.metadata_location is not None:
        fields.append(("metadata-location", _json(loaded.metadata_location)))
    return _object(fields)


def commit_answer(loaded: LoadedTable) -> bytes:
    """`commit_result` as the response's body."""
    return _object(
        [("metadata-location", _json(loaded.metadata_location)), ("metadata", _metadata_text(loaded))]
    )


def _metadata_text(loaded: LoadedTable) -> bytes:
    return loaded.text if loaded.text is not None else metadata_json(loaded.metadata)


def _metadata_dict(loaded: LoadedTable) -> dict[str, Any]:
    return json.loads(loaded.text) if loaded.text is not None else metadata_dict(loaded.metadata)


def _json(value: Any) -> bytes:
    """`value` as Starlette's JSONResponse writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def _object(fields: list[tuple[str, bytes]]) -> bytes:
    """A JSON object of `fields`, each value JSON already: made in one copy of each (the metadata
    may be 660 KB, which concatenations copied four times over)."""
    parts = [b"{"]
    for index, (name, value) in enumerate(fields):
        parts += [b"," if index else b"", _json(name), b":", value]
    parts.append(b"}")
    return b"".join(parts)
