"""Object storage behind one small interface: list, read, check, presign.

`ObjectStorage` is what the table readers and the server need from a store of
buckets. Two implementations: `LocalStorage` (a directory whose
subdirectories are buckets, served back by the sharing server itself through
HMAC-signed URLs) and `S3Storage` (any S3-compatible service, presigned with
SigV4).
"""

from share_store.storage.base import ObjectInfo, ObjectStorage
from share_store.storage.local import LocalStorage
from share_store.storage.s3 import S3Storage

__all__ = ["LocalStorage", "ObjectInfo", "ObjectStorage", "S3Storage"]
