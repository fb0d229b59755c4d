"""Where an Iceberg file is in the object storage the server signs for, and back.

Iceberg names its files by absolute URI (`s3://bucket/key`, `file:///root/bucket/key`);
the storage interface takes a bucket and a key. A file outside that storage cannot be
handed out, and is refused.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

from share_store.errors import UnsupportedOperation
from share_store.storage.base import ObjectStorage
from share_store.storage.local import LocalStorage


def file_location(storage: ObjectStorage, path: str) -> tuple[str, str]:
    """Bucket and key in `storage` of a file named by an absolute Iceberg URI."""
    parsed = urlparse(path)
    if parsed.scheme in ("s3", "s3a", "s3n") and not isinstance(storage, LocalStorage):
        return parsed.netloc, unquote(parsed.path.lstrip("/"))
    if parsed.scheme in ("file", "") and isinstance(storage, LocalStorage):
        root = str(storage.root)
        # Lexically first (realpath costs ten system calls a file); serving a file
        # resolves it fully and refuses any symlink out of its bucket.
        for resolve in (os.path.normpath, os.path.realpath):
            absolute = resolve(unquote(parsed.path))
            if absolute.startswith(root + os.sep):
                bucket, _, key = absolute[len(root) + 1 :].partition(os.sep)
                if bucket and key:
                    return bucket, key
    # A file outside the storage this server signs for cannot be handed out.
    raise UnsupportedOperation(
        "the Iceberg table has data files outside the configured object storage; "
        "configure the storage (or the catalog's s3.* settings) that holds them"
    )


def file_uri(storage: ObjectStorage, bucket: str, key: str) -> str:
    """The absolute URI `file_location` maps back to (bucket, key)."""
    if isinstance(storage, LocalStorage):
        return (storage.root / bucket / key).as_uri()
    return f"s3://{bucket}/{key}"
