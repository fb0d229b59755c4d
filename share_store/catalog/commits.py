"""Table metadata transitions of the writable catalog: a new table, and a commit applied to one.

pyiceberg's models and update logic do the work (each requirement's `validate`,
`update_table_metadata`, `new_table_metadata`). What it lacks is written here
and tested hardest: writing format-version 3 metadata (pyiceberg 0.12 refuses
to serialize it) and v3 row lineage, where a table's `next-row-id` must start
at 0 and grow by each added snapshot's `added-rows`, including a table upgraded
to v3 in the same commit that adds a snapshot.

Pure functions on metadata values: no storage, no store.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertCreate,
    AssignUUIDUpdate,
    SetLocationUpdate,
    SetPartitionStatisticsUpdate,
    SetStatisticsUpdate,
    UpgradeFormatVersionUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
    update_table_metadata,
)
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.utils.datetime import datetime_to_millis

from share_store.catalog.errors import CommitConflict, NoSuchTable
from share_store.errors import InvalidParameter

#: Tables are created at v2 unless the create, its namespace's or its warehouse's `table-default.*`
#: asks for another: Iceberg's own default, and what every engine writes (pyiceberg 0.12 and
#: DuckDB 1.4 cannot write v3 data). v3 is served in full on request.
DEFAULT_FORMAT_VERSION = 2
TABLE_DEFAULT = "table-default."
FORMAT_VERSIONS = (1, 2, 3)


def parse_model(model: type[Any], body: bytes | dict[str, Any], what: str) -> Any:
    """A request body as one of pyiceberg's models; a 400 naming the first problem otherwise."""
    try:
        if isinstance(body, dict):
            return model.model_validate(body)
        return model.model_validate_json(body)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "body"
        raise InvalidParameter(f"invalid {what}: {where}: {first.get('msg', 'invalid value')}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        # pyiceberg's validators raise these on shapes they do not expect (a field type of
        # null, a statistics update without its statistics): the body's fault, never a 500.
        raise InvalidParameter(f"invalid {what}: {type(error).__name__}: {error}") from None


def metadata_json(metadata: IcebergBaseModel) -> bytes:
    """The metadata file's bytes, every format version included (pyiceberg refuses to write v3)."""
    return IcebergBaseModel.model_dump_json(metadata).encode()


def metadata_dict(metadata: IcebergBaseModel) -> dict[str, Any]:
    """The metadata as the REST responses carry it."""
    return json.loads(metadata_json(metadata))


def read_metadata(data: bytes) -> TableMetadata:
    return TableMetadataUtil.parse_raw(data.decode())


def format_version(properties: dict[str, str]) -> int:
    raw = properties.get("format-version", str(DEFAULT_FORMAT_VERSION))
    try:
        version = int(raw)
    except ValueError:
        raise InvalidParameter(f"invalid format-version {raw!r}: use 1, 2 or 3") from None
    if version not in FORMAT_VERSIONS:
        raise InvalidParameter(f"invalid format-version {version}: use 1, 2 or 3")
    return version


def created_metadata(
    schema: Any, partition_spec: Any, sort_order: Any, location: str, properties: dict[str, str]
) -> TableMetadata:
    """A new table's first metadata, at the format version asked for (3 by default)."""
    properties = dict(properties)
    properties["format-version"] = str(format_version(properties))
    try:
        metadata = new_table_metadata(
            schema, partition_spec or UNPARTITIONED_PARTITION_SPEC, sort_order or UNSORTED_SORT_ORDER,
            location, properties,
        )  # fmt: skip
    except ValueError as error:
        raise InvalidParameter(f"invalid table: {error}") from None
    return with_row_lineage(metadata, None)


def metadata_file_location(table_location: str, version: int) -> str:
    """Where the metadata file of `version` goes: `<location>/metadata/NNNNN-<uuid>.metadata.json`.

    `table_location` is the table's recorded location, never the metadata's own field.
    """
    return f"{table_location.rstrip('/')}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"


def creates(request: CommitTableRequest) -> bool:
    """Whether the commit creates its table (a staged create's `assert-create`)."""
    return any(isinstance(r, AssertCreate) for r in request.requirements)


def set_locations(request: CommitTableRequest) -> list[str]:
    """The locations the commit's `set-location` updates ask for."""
    return [u.location for u in request.updates if isinstance(u, SetLocationUpdate)]


def named_files(request: CommitTableRequest) -> list[tuple[str, str]]:
    """Every file the commit's updates name, with what it is: the catalog checks each is in the table."""
    named: list[tuple[str, str]] = []
    for update in request.updates:
        if isinstance(update, AddSnapshotUpdate):
            named.append(("manifest list", update.snapshot.manifest_list))
        elif isinstance(update, SetStatisticsUpdate):
            named.append(("statistics file", update.statistics.statistics_path))
        elif isinstance(update, SetPartitionStatisticsUpdate):
            named.append(("partition statistics file", update.partition_statistics.statistics_path))
    return named


def next_file_version(metadata_location: str | None) -> int:
    if metadata_location is None:
        return 0
    return MetastoreCatalog._parse_metadata_version(metadata_location) + 1


def committed_metadata(
    base: TableMetadata | None, base_location: str | None, request: CommitTableRequest
) -> TableMetadata:
    """`base` with the commit's updates applied, after every requirement held."""
    check_requirements(base, request)
    return updated_metadata(base, base_location, request)


def updated_metadata(
    base: TableMetadata | None, base_location: str | None, request: CommitTableRequest
) -> TableMetadata:
    """`base` with the commit's updates applied; its requirements are the caller's to have checked
    (`check_requirements`), as the catalog does before it looks at the locations a commit asks for."""
    start, updates = _upgraded_to_v3(
        base if base is not None else MetastoreCatalog._empty_table_metadata(), request.updates
    )
    try:
        if base is None:
            updated = update_table_metadata(
                base_metadata=start, updates=updates, enforce_validation=True, metadata_location=None
            )
        else:
            updated = applied_updates(start, updates, base_location)
    except (ValueError, ValidationError, TypeError, KeyError, AttributeError, IndexError) as error:
        raise InvalidParameter(f"invalid commit: {error}") from None
    except StopIteration:
        # pyiceberg looks up the default spec, schema or sort order with next(): one the commit
        # leaves out (a create without `add-spec`) ends the search.
        missing = "invalid commit: it names a spec, schema or sort order it does not add"
        raise InvalidParameter(missing) from None
    added = [u.snapshot for u in request.updates if isinstance(u, AddSnapshotUpdate)]
    return with_row_lineage(updated, base, added)


def applied_updates(
    base: TableMetadata, updates: tuple[Any, ...], base_location: str | None
) -> TableMetadata:
    """pyiceberg's `update_table_metadata(base, updates, metadata_location=base_location)` for an
    existing table, but for its last step, a deep copy of the whole result.

    That copy (`model_copy(deep=True)`) is a commit's largest cost on a long history (18 ms at
    1,000 snapshots, growing with them), and buys nothing here: each update makes a new model with
    `model_copy(update=...)` and new lists and dicts, the models they share with `base` are never
    changed in place (the catalog keeps parsed files as they are, `MetadataFiles`), and pyiceberg
    offers no way to skip it. Each update is applied and validated by pyiceberg's own
    `_apply_table_update`, in order, followed by its metadata log, `last-updated-ms` and the default
    spec's and sort order's checks against the current schema: the same steps, the same errors,
    the same metadata (tests/share_store/catalog/test_metadata_cache.py compares them).
    """
    context = _TableMetadataUpdateContext()
    new = base
    for update in updates:
        new = _apply_table_update(update, new, context)
    if context.has_changes():
        if base_location:
            new = _update_table_metadata_log(new, base_location, base.last_updated_ms)
        if base.last_updated_ms == new.last_updated_ms:
            new = new.model_copy(update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    new.spec().check_compatible(new.schema())
    new.sort_order().check_compatible(new.schema())
    return new


#: Iceberg's table property (`TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED`): a commit
#: deletes the metadata files its new metadata log no longer tracks. How many that log keeps is
#: `write.metadata.previous-versions-max` (default 100), which pyiceberg's `update_table_metadata`
#: applies when it appends the base file to the log.
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
#: Iceberg's default is false, for file-system catalogs where a reader may hold any old file's
#: path. This catalog hands out only its current file, and a table written by a streaming job
#: would otherwise keep every metadata file it ever had (each holding every snapshot: 357 MB after
#: 1,000 appends of 100 rows), so its tables keep the newest 101 unless they set it to false, as
#: S3 Tables and AIStor manage their tables' metadata files themselves.
DELETE_AFTER_COMMIT_DEFAULT = "true"


def removed_metadata_files(
    base: TableMetadata, base_location: str, new: TableMetadata, new_location: str
) -> list[str]:
    """The metadata files a commit from `base` (the file at `base_location`) to `new` (written at
    `new_location`) stops tracking, unless `new` asks to keep them; none otherwise.

    As Java's `CatalogUtil.deleteRemovedMetadataFiles`: the base's log, less the new log. The base
    file itself too: a commit that changes nothing logs nothing, yet moves the pointer. Never the
    new file. The paths are the metadata's, which a caller may have written (a registered table's
    log names what it likes): the catalog deletes only those that are its own (`MetadataFiles.
    delete_superseded`).
    """
    # Java's Boolean.parseBoolean: "true" in any case, anything else is false (never an error
    # after a commit that has happened).
    if new.properties.get(DELETE_AFTER_COMMIT, DELETE_AFTER_COMMIT_DEFAULT).lower() != "true":
        return []
    kept = {entry.metadata_file for entry in new.metadata_log} | {new_location}
    removed = [entry.metadata_file for entry in base.metadata_log] + [base_location]
    return list(dict.fromkeys(path for path in removed if path not in kept))


def check_requirements(base: TableMetadata | None, request: CommitTableRequest) -> None:
    """Every requirement of the commit holds on `base`, or the commit conflicts.

    Without a base (the table does not exist) only a commit that asserts
    creation applies (a staged create); otherwise the table is missing. Checked
    before anything else about the commit, as the spec orders it: a commit
    whose base has moved on is a 409 whatever else it asks.
    """
    if base is None and not creates(request):
        raise NoSuchTable(f"Table does not exist: {'.'.join(request.identifier.namespace.root)}"
                          f".{request.identifier.name}")  # fmt: skip
    if base is not None and creates(request):
        raise CommitConflict("Table already exists: the commit asserts it is being created")
    if base is not None:
        for update in request.updates:
            # As Iceberg's own TableMetadata refuses: a table's uuid is its identity for good.
            if isinstance(update, AssignUUIDUpdate) and update.uuid != base.table_uuid:
                raise InvalidParameter(f"cannot reassign a table's uuid: it is {base.table_uuid}")
    for requirement in request.requirements:
        try:
            requirement.validate(base)
        except CommitFailedException as error:
            # pyiceberg's own messages already say "Requirement failed: …"; said once is enough.
            message = str(error)
            if not message.startswith("Requirement failed"):
                message = f"Requirement failed: {message}"
            raise CommitConflict(message) from None


def _upgraded_to_v3(base: TableMetadata, updates: tuple[Any, ...]) -> tuple[TableMetadata, tuple[Any, ...]]:
    """An upgrade to v3 applied by hand, ahead of the other updates (pyiceberg 0.12 refuses it).

    Moved first, the other updates apply to the v3 table as they would after
    it: none of them reads the format version but to allow v3-only fields. A
    create at v3 through a staged transaction upgrades the empty metadata this way.
    """
    upgrades = [u for u in updates if isinstance(u, UpgradeFormatVersionUpdate) and u.format_version == 3]
    if not upgrades or base.format_version == 3:
        return base, updates
    fields = {"format_version": 3, "next_row_id": 0}
    upgraded = TableMetadataUtil._construct_without_validation(base.model_copy(update=fields))
    return upgraded, tuple(u for u in updates if not any(u is up for up in upgrades))


def with_row_lineage(
    metadata: TableMetadata, base: TableMetadata | None, added: Sequence[Any] = ()
) -> TableMetadata:
    """v3 row lineage: `next-row-id` starts at 0 and grows by each added snapshot's rows.

    pyiceberg keeps `next-row-id` only when the base had one, so a table created
    or upgraded to v3 by this very commit would lose it: it is worked out here
    from the base's value and the snapshots the commit adds, each of which must
    start at or after the rows assigned before it.
    """
    if metadata.format_version < 3:
        return metadata
    next_row_id = getattr(base, "next_row_id", None) or 0
    for snapshot in added:
        first = snapshot.first_row_id
        if first is None:
            raise InvalidParameter(f"snapshot {snapshot.snapshot_id} has no first-row-id (required in v3)")
        if first < next_row_id:
            raise CommitConflict(
                f"snapshot {snapshot.snapshot_id} starts at row id {first}, below the table's "
                f"next-row-id {next_row_id}: refresh and retry"
            )
        if snapshot.added_rows is None:
            raise InvalidParameter(f"snapshot {snapshot.snapshot_id} has no added-rows (required in v3)")
        next_row_id = first + snapshot.added_rows
    return metadata.model_copy(update={"next_row_id": next_row_id})


def table_defaults(*levels: dict[str, str]) -> dict[str, str]:
    """The `table-default.*` properties tables created start with, from the warehouse's and then the
    namespace's (a later level wins; a table's own properties win over all).

    Iceberg's own convention (its catalogs' `table-default.` prefix), so that engines which
    cannot ask for a property get it anyway: `table-default.format-version = 3` on a warehouse
    makes every new table of it v3 unless its namespace or the create says otherwise.
    """
    defaults: dict[str, str] = {}
    for properties in levels:
        defaults.update(
            {
                key[len(TABLE_DEFAULT) :]: value
                for key, value in properties.items()
                if key.startswith(TABLE_DEFAULT)
            }
        )
    return defaults


def changed_properties(
    properties: dict[str, str], removals: list[str], updates: dict[str, Any]
) -> tuple[dict[str, str], list[str], list[str], list[str]]:
    """`properties` with `removals` removed and `updates` set, and the updated, removed and missing
    keys, as the spec's properties response lists them."""
    overlap = set(removals) & set(updates)
    if overlap:
        raise InvalidParameter(f"a key cannot be both updated and removed: {', '.join(sorted(overlap))}")
    missing = [key for key in removals if key not in properties]
    removed = [key for key in removals if key in properties]
    changed = {key: value for key, value in properties.items() if key not in removed}
    changed.update(string_properties(updates))
    return changed, sorted(updates), removed, missing


def string_properties(properties: dict[str, Any]) -> dict[str, str]:
    """Properties as the spec keeps them, strings. A number or boolean is written as JSON writes it
    ("true", as a table's own properties are, not Python's "True"); a null, object or array is
    refused, as pyiceberg's model refuses it in a table's properties."""
    if not isinstance(properties, dict):
        raise InvalidParameter("properties must be an object of strings")
    return {str(key): _property_text(str(key), value) for key, value in properties.items()}


def _property_text(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return json.dumps(value)
    raise InvalidParameter(f"property {key!r} must be a string, not {json.dumps(value)[:40]}")
