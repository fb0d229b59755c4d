"""pyiceberg's FileIO over the server's own storage, for reading manifests of warehouse tables.

The catalog writes metadata files through `ObjectStorage`; reading a table's
manifests (to share it, or to find what a purge may delete) goes through
pyiceberg, which needs a FileIO speaking to the same store with the same keys.
"""

from __future__ import annotations

from typing import Any

from share_store.storage.base import ObjectStorage
from share_store.storage.s3 import S3Storage


def file_io_properties(storage: ObjectStorage) -> dict[str, str]:
    """pyiceberg's `s3.*` properties for `storage` (none for local storage: `file://` needs none)."""
    if not isinstance(storage, S3Storage):
        return {}
    settings = storage.settings
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
