"""Where one table of the server's own warehouses lives, and the one check of every file acted on
for it: `TableLocation.holds` (a bucket and key), `TableLocation.confine` (a file's URI).

A platform value: the catalog decides a table's location (`catalog.locations`) and records it
(`catalog.table_locations`); the catalog's writes and purges, maintenance, the writers' signer,
the keys vended for a table (`vending_scope`) and the table readers all bound what they touch
with it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from share_store.errors import UnsupportedOperation
from share_store.signing.vended_scope import VendingScope, prefixes_of
from share_store.storage.base import ObjectStorage
from share_store.storage.file_uris import file_location
from share_store.storage.local import LocalStorage


class OutsideTable(UnsupportedOperation):
    """A path that is not inside the table's own location: nothing is read, written, signed or deleted."""

    iceberg_type = "BadRequestException"


@dataclass(frozen=True)
class TableLocation:
    """Where one table of the server's own warehouses lives, decided by the catalog and fixed for good.

    `bucket` is the table's warehouse and `prefix` the key of its folder (no
    slash at either end); `uri` is the same as Iceberg names it. Everything
    the server writes, deletes, signs or vends for the table passes `confine`.
    """

    uri: str
    bucket: str
    prefix: str

    @property
    def folder(self) -> str:
        """The folder's key with its slash, as it is listed and held: `ns/t-abc` holds no `ns/t-abcd/...`."""
        return self.prefix + "/"

    def holds(self, bucket: str, key: str) -> bool:
        """Whether the object is inside the table's folder, by its key as the storage takes it.

        Dot segments and empty segments are refused outright: a store or proxy that
        normalises `a/../b` would read another object than the one checked.
        """
        if bucket != self.bucket or not key.startswith(self.folder):
            return False
        return all(part not in ("", ".", "..") for part in key.split("/"))

    def holds_folder(self, other: TableLocation) -> bool:
        """Whether `other`'s folder is inside this one's, or is it."""
        return self.bucket == other.bucket and other.folder.startswith(self.folder)

    def vending_scope(self, write: bool) -> VendingScope:
        """What keys vended for the table may reach: its folder, as `holds` bounds it, and nothing
        else; with `write`, writes and deletes there too."""
        return VendingScope(prefixes_of([(self.bucket, self.prefix)]), write=write)

    def overlaps(self, other: TableLocation) -> bool:
        """Whether one of the two folders is inside the other (or they are the same)."""
        return self.holds_folder(other) or other.holds_folder(self)

    def confine(self, storage: ObjectStorage, path: str) -> tuple[str, str]:
        """Bucket and key of `path` if it is inside the table's folder; `OutsideTable` otherwise.

        The one check for every file of an own-warehouse table the server acts on.
        The key checked is the key acted on (`file_location`'s, decoded as it
        decodes); on local storage the file's real path must be inside too, so a
        symbolic link planted in the table's folder leads nowhere else.
        """
        # The message never names the path: it may be another table's file, and the answer may
        # go to a recipient of this one.
        outside = OutsideTable(f"the table names a file outside its location {self.uri}")
        if not isinstance(path, str) or "?" in path or "#" in path:
            raise outside
        # As written: what pyarrow and engines open, undecoded, must be in the folder too.
        rest = self._below(storage, path)
        if rest is None or any(part in ("", ".", "..") for part in rest.split("/")):
            raise outside
        try:
            bucket, key = file_location(storage, path)
        except UnsupportedOperation:
            raise outside from None
        # As decoded: the bucket and key the server signs, reads and deletes.
        if not self.holds(bucket, key) or not self._real_path_holds(storage, bucket, key, path):
            raise outside
        return bucket, key

    def holds_path(self, storage: ObjectStorage, path: str) -> bool:
        try:
            self.confine(storage, path)
        except OutsideTable:
            return False
        return True

    def _below(self, storage: ObjectStorage, path: str) -> str | None:
        """What follows the folder in `path` as written (no decoding), or None if it is not there."""
        if isinstance(storage, LocalStorage):
            folder = str(storage.root / self.bucket / self.prefix)
            written = (
                path.removeprefix("file://") if path.startswith("file:///") else path.removeprefix("file:")
            )
            spellings = [folder + "/"]
        else:
            written = path
            spellings = [f"{scheme}{self.bucket}/{self.prefix}/" for scheme in ("s3://", "s3a://", "s3n://")]
        for spelling in spellings:
            if written.startswith(spelling):
                return written[len(spelling) :]
        return None

    def _real_path_holds(self, storage: ObjectStorage, bucket: str, key: str, path: str) -> bool:
        """On local storage, both the decoded file and the one opened as written are in the
        folder once symbolic links are resolved: a link planted in the folder leads nowhere else."""
        if not isinstance(storage, LocalStorage):
            return True
        folder = _real_folder(str(storage.root / bucket / self.prefix))
        written = urlparse(path).path if path.startswith("file:") else path
        # One real path when the two spellings are one file name (the common case: no escapes).
        candidates = {str(storage.root / bucket / key), written}
        return all(os.path.realpath(candidate).startswith(folder) for candidate in candidates)


@functools.lru_cache(maxsize=1024)
def _real_folder(folder: str) -> str:
    """A table folder's real path, resolved once: it is checked when the table is made, and one
    replaced by a link later only makes the files below it fail this check, never pass it."""
    return os.path.realpath(folder) + os.sep


def table_location_of(table: Any) -> TableLocation | None:
    """The recorded location of a pyiceberg table loaded from the server's own warehouses, else None.

    Own-warehouse tables are loaded with a FileIO that carries it
    (`catalog.file_io.ConfinedFileIO`); tables of external catalogs have none.
    """
    location = getattr(getattr(table, "io", None), "table_location", None)
    return location if isinstance(location, TableLocation) else None


def locate_file(
    storage: ObjectStorage, path: str, confined: TableLocation | None, cache: Any = None
) -> tuple[str, str]:
    """Bucket and key of a file a table reader serves: for a table of the server's own warehouses,
    inside its recorded location, or one of the server's own derived files in `cache`
    (`iceberg.derived.DerivedFiles`: copies materialized without deleted rows, vectors)."""
    if confined is None:
        return file_location(storage, path)
    try:
        return confined.confine(storage, path)
    except OutsideTable:
        location = file_location(storage, path)
        if cache is not None and cache.holds(*location):
            return location
        raise
