"""pyiceberg's FileIO over the server's own storage, for reading manifests of warehouse tables.

The catalog writes metadata files through `ObjectStorage`; reading a table's
manifests (to share it, or to find what a purge may delete) goes through
pyiceberg, which needs a FileIO speaking to the same store with the same keys.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.io.pyarrow import PyArrowFileIO

from share_store.storage.base import ObjectStorage
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.storage.table_location import TableLocation


def file_io_properties(storage: ObjectStorage) -> dict[str, str]:
    """pyiceberg's `s3.*` properties for `storage` (none for local storage: `file://` needs none)."""
    if not isinstance(storage, S3Storage):
        return {}
    return settings_io_properties(storage.settings)


def settings_io_properties(settings: S3Settings) -> dict[str, str]:
    """pyiceberg's `s3.*` properties for a store's settings (its endpoint, region and keys)."""
    props = {"s3.region": settings.region}
    optional = {
        "s3.endpoint": settings.endpoint,
        "s3.access-key-id": settings.access_key,
        "s3.secret-access-key": settings.secret_key,
        "s3.session-token": settings.session_token,
    }
    props.update({key: value for key, value in optional.items() if value})
    props["s3.force-virtual-addressing"] = "false" if settings.path_style else "true"
    return props


def file_io_for(storage: ObjectStorage) -> Any:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    return PyArrowFileIO(file_io_properties(storage))


class ConfinedFileIO(PyArrowFileIO):  # type: ignore[misc]
    """`file_io_for(storage)` that opens only files inside one table's recorded location.

    An own-warehouse table's metadata names its manifests and their files; the
    caller who committed it chose those names. Read through this FileIO, a
    manifest list or manifest outside the table is refused before it is
    opened, so sharing, signing or purging the table never reads another
    table's manifests (and their column statistics) on the caller's behalf.
    """

    def __init__(self, storage: ObjectStorage, table_location: TableLocation) -> None:
        super().__init__(file_io_properties(storage))
        self.storage = storage
        self.table_location = table_location

    def new_input(self, location: str) -> Any:
        self.table_location.confine(self.storage, location)
        return super().new_input(location)

    def new_output(self, location: str) -> Any:
        self.table_location.confine(self.storage, location)
        return super().new_output(location)

    def delete(self, location: Any) -> None:
        path = location if isinstance(location, str) else location.location
        self.table_location.confine(self.storage, path)
        super().delete(location)
