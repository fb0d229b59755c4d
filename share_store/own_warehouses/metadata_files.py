"""The catalog's metadata files in storage (tables' and views'): written inside their location, read once
and kept.

A metadata file never changes once written, so parsed files are kept by
location. Every write goes through the table's recorded location
(`TableLocation.confine`); a stored file that is gone or is no metadata file
is a named error, never a bare 500.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import suppress

from pydantic import ValidationError
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.view.metadata import ViewMetadata

from share_store.errors import InvalidParameter, UnsupportedOperation
from share_store.iceberg.locations import TableLocation, file_location
from share_store.own_warehouses.commits import metadata_json, read_metadata
from share_store.own_warehouses.errors import MetadataFileMissing
from share_store.storage.base import ObjectStorage

#: Metadata files parsed and kept (they never change once written).
METADATA_CACHE = 256


class MetadataFiles:
    def __init__(self, storage: ObjectStorage) -> None:
        self.storage = storage
        self._parsed: OrderedDict[str, TableMetadata] = OrderedDict()
        self._views: OrderedDict[str, ViewMetadata] = OrderedDict()
        self._lock = threading.Lock()

    def write(self, table: TableLocation, location: str, metadata: TableMetadata | ViewMetadata) -> None:
        """A table's or a view's metadata file, inside its location (`confine`)."""
        bucket, key = table.confine(self.storage, location)
        self.storage.write(bucket, key, metadata_json(metadata))
        if isinstance(metadata, ViewMetadata):
            with self._lock:
                self._views[location] = metadata
        else:
            self._remember(location, metadata)

    def read_view(self, location: str) -> ViewMetadata:
        """A view's current metadata; `MetadataFileMissing` (a named 5xx) if storage lost it."""
        try:
            return self.parse_view(location)
        except (FileNotFoundError, InvalidParameter, UnsupportedOperation) as error:
            raise MetadataFileMissing(
                f"the view's metadata file {location} cannot be read from storage: {error}"
            ) from None

    def parse_view(self, location: str) -> ViewMetadata:
        """The view metadata file at `location`; `FileNotFoundError`, or `InvalidParameter` if not one."""
        with self._lock:
            if location in self._views:
                return self._views[location]
        bucket, key = file_location(self.storage, location)
        data = self.storage.read(bucket, key)
        try:
            metadata = ViewMetadata.model_validate_json(data)
        except (ValidationError, ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError):
            raise InvalidParameter(f"{location} is not an Iceberg view metadata file") from None
        with self._lock:
            self._views[location] = metadata
            while len(self._views) > METADATA_CACHE:
                self._views.popitem(last=False)
        return metadata

    def forget(self, table: TableLocation, location: str) -> None:
        """Delete a file written for a commit that did not happen (an orphan would be harmless)."""
        with suppress(Exception):
            bucket, key = table.confine(self.storage, location)
            self.storage.delete(bucket, [key])

    def read(self, location: str) -> TableMetadata:
        """The table's current metadata; `MetadataFileMissing` (a named 5xx) if storage lost it."""
        try:
            return self.parse(location)
        except (FileNotFoundError, InvalidParameter, UnsupportedOperation) as error:
            raise MetadataFileMissing(
                f"the table's metadata file {location} cannot be read from storage: {error}"
            ) from None

    def parse(self, location: str) -> TableMetadata:
        """The metadata file at `location`; `FileNotFoundError`, or `InvalidParameter` if it is not one."""
        with self._lock:
            if location in self._parsed:
                self._parsed.move_to_end(location)
                return self._parsed[location]
        bucket, key = file_location(self.storage, location)
        data = self.storage.read(bucket, key)
        try:
            metadata = read_metadata(data)
        except (ValidationError, ValueError, UnicodeDecodeError, TypeError, KeyError, AttributeError):
            raise InvalidParameter(f"{location} is not an Iceberg table metadata file") from None
        self._remember(location, metadata)
        return metadata

    def _remember(self, location: str, metadata: TableMetadata) -> None:
        with self._lock:
            self._parsed[location] = metadata
            while len(self._parsed) > METADATA_CACHE:
                self._parsed.popitem(last=False)
