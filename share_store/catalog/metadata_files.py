"""The catalog's metadata files in storage (tables' and views'): written inside their location, read once
and kept.

A metadata file never changes once written, so parsed files are kept by
location, with a table's JSON as written (or, for a file read, as the
catalog writes it): a load answers those bytes and a commit writes and
answers the same bytes, so neither serialises a long history again. Loads and
commits look files up by the location the table's pointer names, read from the
store each time: what they get is the file that pointer names now, never
another table's, nor an older version after another replica's commit.
Every write goes through the table's recorded location
(`TableLocation.confine`); a stored file that is gone or is no metadata file
is a named error, never a bare 500. Old ones a commit stops tracking are
deleted only when the table asks, and only the catalog's own (`delete_superseded`).

No file larger than `MAX_METADATA_BYTES` is read (`read_at_most` finds out before reading more)
or written: a file registered may be anyone's, and the server holds a file's JSON and its
parsed form in memory at once, for every request reading it.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from pydantic import ValidationError
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.view.metadata import ViewMetadata

from share_store.catalog.commits import metadata_json, read_metadata
from share_store.catalog.errors import MetadataFileMissing
from share_store.catalog.metadata_text import MetadataText, metadata_text
from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.storage.base import ObjectStorage, ObjectTooLarge
from share_store.storage.file_uris import file_location
from share_store.storage.table_location import OutsideTable, TableLocation

#: Metadata files parsed and kept (they never change once written).
METADATA_CACHE = 256
METADATA_FILE = ".metadata.json"
#: The largest metadata file read or written: some 90,000 snapshots (1,000 appends leave a file
#: of 676 KB, bench/RESULTS.md); a file past it is refused, not parsed.
MAX_METADATA_BYTES = 64 * 1024 * 1024

log = logging.getLogger(__name__)


class MetadataFileTooLarge(InvalidParameter):
    """A metadata file over `MAX_METADATA_BYTES`: a 400 when registered or committed (nothing is),
    a named 5xx (`MetadataFileMissing`) when it is a table's current file."""


def _too_large(location: str, size: int | None) -> MetadataFileTooLarge:
    what = f"{size} bytes" if size is not None else "larger"
    mib, rest = divmod(MAX_METADATA_BYTES, 1 << 20)
    bound = f"{mib} MiB" if mib and not rest else f"{MAX_METADATA_BYTES} bytes"
    return MetadataFileTooLarge(
        f"the metadata file {location} is {what}, over the {bound} a metadata file may hold here "
        "(expiring old snapshots makes a table's smaller)"
    )


@dataclass
class _Kept:
    """A table's metadata file as parsed, and its JSON once made (as written, or as written again)."""

    metadata: TableMetadata
    text: MetadataText | None = None


@contextmanager
def _readable(what: str, location: str) -> Iterator[None]:
    """A stored file that is gone or is no metadata file, as the named 5xx `MetadataFileMissing`."""
    try:
        yield
    except (FileNotFoundError, InvalidParameter, UnsupportedOperation) as error:
        raise MetadataFileMissing(
            f"the {what}'s metadata file {location} cannot be read from storage: {error}"
        ) from None


class MetadataFiles:
    def __init__(self, storage: ObjectStorage) -> None:
        self.storage = storage
        self._parsed: OrderedDict[str, _Kept] = OrderedDict()
        self._views: OrderedDict[str, ViewMetadata] = OrderedDict()
        self._lock = threading.Lock()

    def write(
        self,
        table: TableLocation,
        location: str,
        metadata: TableMetadata | ViewMetadata,
        text: MetadataText | None = None,
    ) -> bytes:
        """A table's or a view's metadata file, inside its location (`confine`); the bytes written.

        `text` is a table's `metadata_text(metadata)` when the caller made it already (a commit,
        whose answer carries the same bytes); kept, it makes the table's next file quicker."""
        bucket, key = table.confine(self.storage, location)
        if text is None:
            text = MetadataText(metadata_json(metadata))
        if len(text.data) > MAX_METADATA_BYTES:  # nothing is written that could not be read again
            raise _too_large(location, len(text.data))
        self.storage.write(bucket, key, text.data)
        if isinstance(metadata, ViewMetadata):
            with self._lock:
                self._views[location] = metadata
        else:
            self._remember(location, _Kept(metadata, text))
        return text.data

    def read_view(self, location: str) -> ViewMetadata:
        """A view's current metadata; `MetadataFileMissing` (a named 5xx) if storage lost it."""
        with _readable("view", location):
            return self.parse_view(location)

    def parse_view(self, location: str) -> ViewMetadata:
        """The view metadata file at `location`; `FileNotFoundError`, or `InvalidParameter` if not one."""
        with self._lock:
            if location in self._views:
                return self._views[location]
        data = self._bounded(location)
        try:
            metadata = ViewMetadata.model_validate_json(data)
        except (ValidationError, ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError):
            raise InvalidParameter(f"{location} is not an Iceberg view metadata file") from None
        with self._lock:
            self._views[location] = metadata
            while len(self._views) > METADATA_CACHE:
                self._views.popitem(last=False)
        return metadata

    def replaced(self, location: str) -> None:
        """A table's file its pointer no longer names (a commit replaced it): not kept any more.

        Loads and commits ask for the file a pointer names, so a replaced one would only take
        memory, up to a whole history's JSON per commit of a long table (parsed versions share
        their snapshots; their JSON does not). One still asked for is read again from storage."""
        with self._lock:
            self._parsed.pop(location, None)

    def forget(self, table: TableLocation, location: str) -> None:
        """Delete a file written for a commit that did not happen (an orphan would be harmless)."""
        with suppress(Exception):
            bucket, key = table.confine(self.storage, location)
            self.storage.delete(bucket, [key])

    def delete_superseded(self, table: TableLocation, removed: Iterable[str], kept: Iterable[str]) -> int:
        """Delete the metadata files a commit stopped tracking (`commits.removed_metadata_files`); how
        many were asked to go. Storage errors are raised: the caller decides what they mean.

        `removed` comes from metadata a caller may have written, so a path goes only if it is a
        file the catalog itself writes for this table: inside its recorded location (`confine`,
        which refuses `..`, other buckets and links out), directly in its `metadata/` folder and
        named `*.metadata.json`; never another table's, a data file, or a file `kept` (the new
        pointer and the new log), however it is spelt: they are compared by the key deleted.
        """
        keep = {key for key in (self._own_metadata_key(table, path) for path in kept) if key is not None}
        doomed: dict[str, str] = {}
        for path in removed:
            key = self._own_metadata_key(table, path)
            if key is None or key in keep:
                # The message names no path: it may be another table's file.
                log.debug("kept a superseded metadata file of %s: not its own, or still tracked", table.uri)
                continue
            doomed[path] = key
        if doomed:
            self.storage.delete(table.bucket, sorted(set(doomed.values())))
            with self._lock:  # nor read back from memory as if it were there
                for path in doomed:
                    self._parsed.pop(path, None)
        return len(set(doomed.values()))

    def _own_metadata_key(self, table: TableLocation, path: str) -> str | None:
        """The key of `path` if it is a metadata file the catalog writes for `table`, else None."""
        try:
            _, key = table.confine(self.storage, path)
        except OutsideTable:
            return None
        name = key.removeprefix(f"{table.prefix}/metadata/")
        if name == key or "/" in name or not name.endswith(METADATA_FILE):
            return None
        return key

    def read(self, location: str) -> TableMetadata:
        """The table's current metadata; `MetadataFileMissing` (a named 5xx) if storage lost it."""
        return self._read(location).metadata

    def read_with_json(self, location: str) -> tuple[TableMetadata, bytes]:
        """`read(location)` and its JSON as the catalog writes it (`metadata_json`), made once per file.

        Not the stored bytes of a file the catalog did not write (a registered table's): those
        may say more, or otherwise, than the metadata parsed from them, and a load answers what
        the catalog understood."""
        metadata, text = self.read_with_text(location)
        return metadata, text.data

    def read_with_text(self, location: str) -> tuple[TableMetadata, MetadataText]:
        """`read_with_json`, the JSON with where its snapshots are (`metadata_text`), for a commit
        to make the next file from."""
        kept = self._read(location)
        if kept.text is None:
            # Outside the lock: two first loads at once may both make it, the same bytes.
            kept.text = metadata_text(kept.metadata)
        return kept.metadata, kept.text

    def _read(self, location: str) -> _Kept:
        with _readable("table", location):
            return self._parsed_file(location)

    def parse(self, location: str) -> TableMetadata:
        """The metadata file at `location`; `FileNotFoundError`, or `InvalidParameter` if it is not one."""
        return self._parsed_file(location).metadata

    def _parsed_file(self, location: str) -> _Kept:
        with self._lock:
            if location in self._parsed:
                self._parsed.move_to_end(location)
                return self._parsed[location]
        data = self._bounded(location)
        try:
            metadata = read_metadata(data)
        except (ValidationError, ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError):
            raise InvalidParameter(f"{location} is not an Iceberg table metadata file") from None
        kept = _Kept(metadata)
        self._remember(location, kept)
        return kept

    def _bounded(self, location: str) -> bytes:
        """The file's bytes; `MetadataFileTooLarge` past `MAX_METADATA_BYTES`, `FileNotFoundError`."""
        bucket, key = file_location(self.storage, location)
        try:
            return self.storage.read_at_most(bucket, key, MAX_METADATA_BYTES)
        except ObjectTooLarge as error:
            raise _too_large(location, error.size) from None

    def _remember(self, location: str, kept: _Kept) -> None:
        with self._lock:
            self._parsed[location] = kept
            while len(self._parsed) > METADATA_CACHE:
                self._parsed.popitem(last=False)
