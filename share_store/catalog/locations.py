"""Where a table of the server's own warehouses lives: the catalog decides, once, and records it.

A new table gets `<warehouse>/<namespace levels>/<table>-<uuid>`, as does one
whose create names a location relative to nothing (`engine_default`: Sail sends
`spark-warehouse/t-<uuid>`, its own default under its working folder); a location
asked for (a create's `location`, a staged create's `set-location`, a
registered metadata file's `location`) is taken only if it is normalised,
inside the table's warehouse and below its root, with no query, fragment,
dot segment or character outside the safe set, and overlaps no other table's
location. The result is recorded beside the table's pointer; from then on
commits may not move it, and every file the server writes, deletes, signs or
vends for the table must be inside it (`TableLocation.confine`). Polaris
refuses the same by default (`ALLOW_TABLE_LOCATION_OVERLAP`,
`ALLOW_EXTERNAL_METADATA_FILE_LOCATION` off); S3 Tables and AIStor keep each
table inside storage they manage.

A dropped table (a drop without purge) keeps its folder: it is the dropped
table's until its warehouse's retention has passed, and a new location over it
is refused as over a live one's, unless the caller is allowed on the dropped
table's own name (`MayTake`, which the caller's policy answers with the
operation's own action, as if the table were live) and the new location holds
the whole folder (never a part of it, which would leave the rest to anyone;
`check_free`). So a user allowed only `att_*` cannot register a dropped
`payroll_x`'s metadata as `att_x`, and the owner still can (pyiceberg's suite
registers a table it dropped under a new name).

Pure functions over the storage's addressing: nothing here reads or writes
(`table_locations` records and claims what these decide). The value they decide,
and the one check of every file acted on for a table, is the platform's
`storage.table_location.TableLocation`.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterable, Mapping

from share_store.catalog.names import TableName
from share_store.catalog.table_pointers import TablePointer
from share_store.errors import InvalidParameter
from share_store.storage.base import ObjectStorage
from share_store.storage.file_uris import file_uri
from share_store.storage.local import LocalStorage
from share_store.storage.table_location import TableLocation

#: One folder name of a location: what the catalog's own names and engines' usual paths use.
SAFE_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_=.+-]*")
S3_SCHEMES = ("s3://", "s3a://", "s3n://")
#: Table properties that tell engines where to write; each must stay inside the table.
WRITE_PATHS = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)

#: Whether the caller may take over the folder of the dropped table of that name (its own name, as
#: the caller's policy allows the operation's action on it; the provider may always).
MayTake = Callable[[TableName], bool]
#: Each table of a warehouse, dropped ones too, with the folders it claims.
Claims = list[tuple[TablePointer, list[TableLocation]]]


class LocationRefused(InvalidParameter):
    iceberg_type = "BadRequestException"


def assigned_location(
    storage: ObjectStorage, warehouse: str, namespace: tuple[str, ...], name: str
) -> TableLocation:
    """A new table's own folder: unique by its uuid, so it overlaps no other table's."""
    prefix = "/".join((*namespace, f"{name}-{uuid.uuid4().hex}"))
    return TableLocation(file_uri(storage, warehouse, prefix), warehouse, prefix)


def engine_default(text: object) -> bool:
    """Whether a create's `location` is an engine's own default relative to nothing the catalog knows
    (no scheme, not absolute, plain safe folders: Sail's `spark-warehouse/t-<uuid>`): the catalog
    then assigns the table its own folder, as for a create with no location. Anything that names a
    place (a scheme, a `/`) or has a dot segment is still checked, and refused, as asked."""
    return (
        isinstance(text, str)
        and bool(text)
        and "://" not in text
        and not text.startswith("/")
        and all(SAFE_SEGMENT.fullmatch(part) for part in text.split("/"))
    )


def requested_location(
    storage: ObjectStorage, warehouse: str, text: object, namespace: tuple[str, ...] | None = None
) -> TableLocation:
    """`text` as a table location in `warehouse`, if the catalog takes it; `LocationRefused` naming why.

    With `namespace`, the location must be in that namespace's folder: a user allowed one
    namespace cannot claim another's (Polaris' `ALLOW_UNSTRUCTURED_TABLE_LOCATION` off).
    """
    if not isinstance(text, str) or not text:
        raise LocationRefused("a table location must be a non-empty string")
    if not text.isascii() or not text.isprintable() or any(c in text for c in "?#%\\ "):
        raise LocationRefused(
            f"table location {text!r}: only ASCII letters, digits and '/_=.+-' after the scheme "
            "(no query, fragment, escapes or spaces)"
        )
    bucket, key = _bucket_and_key(storage, text.removesuffix("/"))
    if bucket != warehouse:
        raise LocationRefused(f"table location {text!r} is not inside warehouse {warehouse}")
    if not key:
        raise LocationRefused(
            f"table location {text!r} is the warehouse's root: a table needs a folder of its own"
        )
    for part in key.split("/"):
        if not SAFE_SEGMENT.fullmatch(part) or part in (".", ".."):
            raise LocationRefused(
                f"table location {text!r}: folder {part!r} is empty, a dot segment or starts with '.'"
            )
    if namespace is not None and not key.startswith("/".join(namespace) + "/"):
        where = file_uri(storage, bucket, "/".join(namespace))
        raise LocationRefused(f"table location {text!r} is not inside its namespace's folder {where}")
    location = TableLocation(file_uri(storage, bucket, key), bucket, key)
    if isinstance(storage, LocalStorage):
        # A symbolic link on the way would put the table's files somewhere else than its name says.
        folder = storage.root / bucket / key
        if os.path.realpath(folder) != os.path.normpath(folder):
            raise LocationRefused(f"table location {text!r} leads through a symbolic link")
    return location


def _bucket_and_key(storage: ObjectStorage, text: str) -> tuple[str, str]:
    if isinstance(storage, LocalStorage):
        path = text.removeprefix("file://")
        if path.startswith("//") or not path.startswith("/"):
            raise LocationRefused(f"table location {text!r}: an absolute file:// path under the storage root")
        root = str(storage.root) + "/"
        if os.path.normpath(path) != path:
            raise LocationRefused(f"table location {text!r} is not a normalised path (no '.', '..' or '//')")
        if not path.startswith(root):
            return "", path
        bucket, _, key = path[len(root) :].partition("/")
        return bucket, key
    scheme = next((s for s in S3_SCHEMES if text.startswith(s)), None)
    if scheme is None:
        raise LocationRefused(f"table location {text!r}: an s3:// location in the table's warehouse")
    bucket, _, key = text[len(scheme) :].partition("/")
    return bucket, key


def check_no_overlap(location: TableLocation, others: Iterable[TableLocation]) -> None:
    """`LocationRefused` if another table's folder holds this one's, or this one holds it.

    The other table is not named: the caller may not be allowed to know it is there.
    """
    if any(location.overlaps(other) for other in others):
        raise LocationRefused(f"table location {location.uri} overlaps another table's location")


def check_write_paths(storage: ObjectStorage, location: TableLocation, properties: Mapping[str, str]) -> None:
    """The table's `write.*.path` properties, if set, must name folders inside its location."""
    for key in WRITE_PATHS:
        value = properties.get(key)
        if value is None:
            continue
        inside = value.removesuffix("/") + "/x"
        if not location.holds_path(storage, inside):
            raise LocationRefused(f"{key} {value!r} is outside the table's location {location.uri}")


def check_files(storage: ObjectStorage, location: TableLocation, paths: Iterable[tuple[str, str]]) -> None:
    """Each `(what, path)` a commit names (manifest list, statistics) must be inside the table."""
    for what, path in paths:
        if not location.holds_path(storage, path):
            raise LocationRefused(f"the {what} {path!r} is outside the table's location {location.uri}")


def no_one(name: TableName) -> bool:
    """The `MayTake` of the catalog's own callers (maintenance, a legacy table's location recorded):
    a dropped table's folder is its own. `CatalogAccess` gives the caller's (the provider may)."""
    return False


def check_free(
    location: TableLocation, claims: Claims, may_take: MayTake, reading: bool = False
) -> list[TablePointer]:
    """`LocationRefused` if `location` overlaps another table's folder, or a dropped table's the caller
    may not take; else the dropped tables whose folders it takes (to forget when it is recorded).

    `reading`: the folder of a metadata file about to be read (a register's), which may be inside
    a dropped table's folder the caller may take. Otherwise a take needs the new location to hold the
    dropped folder whole. The refusal names no table: the caller may not know it is there.
    """
    taken: list[TablePointer] = []
    for pointer, folders in claims:
        overlapping = [folder for folder in folders if location.overlaps(folder)]
        if not overlapping:
            continue
        takes = pointer.dropped_at is not None and pointer.location is not None and may_take(pointer.table)
        if takes and not reading:
            takes = all(location.holds_folder(folder) for folder in overlapping)
        if not takes:
            check_no_overlap(location, overlapping)  # raises: they overlap
        taken.append(pointer)
    return taken
