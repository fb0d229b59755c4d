"""The storage interface the table readers and the server depend on."""

from __future__ import annotations

import builtins  # `list` is a method of storages, so the type is spelled in full
import io
import os
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import pyarrow as pa

#: Signs the object at a bucket and key: its URL and the URL's expiry in epoch milliseconds.
UrlSigning = Callable[[str, str], tuple[str, int]]
#: Signs many keys of one bucket at once: their URLs (an Arrow string array) and expiry.
BatchSigning = Callable[[str, "pa.Array"], tuple["pa.Array", int]]


class ObjectTooLarge(ValueError):
    """An object larger than its reader takes (`read_at_most`); `size` is its size where known."""

    def __init__(self, bucket: str, key: str, limit: int, size: int | None) -> None:
        super().__init__(f"{bucket}/{key} holds more than {limit} bytes")
        self.limit = limit
        self.size = size


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    modified_ms: int


class ObjectStorage(ABC):
    """A set of buckets holding table files."""

    #: How long presigned URLs live, in seconds.
    url_lifetime: int
    #: Whether `batch_signer` beats `url_signer` key by key, so that a held snapshot's files are
    #: signed a batch at a time too (a streamed one's come in record batches: those always are).
    batch_signs_faster = False

    @abstractmethod
    def list(self, bucket: str, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        """Objects whose key starts with `prefix` (a directory when it ends with '/').

        With `start_after`, only keys sorting after it: S3 then lists just the
        tail of a long `_delta_log/`, where a full listing takes a request per
        thousand files.
        """

    @abstractmethod
    def folders(self, bucket: str, prefix: str) -> builtins.list[str]:
        """The folders directly under `prefix` ('' or ending with '/'), each ending with '/'.

        For the console's table picker; no table read needs it.
        """

    @abstractmethod
    def read(self, bucket: str, key: str) -> bytes:
        """The whole object; `FileNotFoundError` if absent."""

    def read_at_most(self, bucket: str, key: str, limit: int) -> bytes:
        """The whole object if it holds at most `limit` bytes, else `ObjectTooLarge`, found out
        having read no more than `limit + 1` of its bytes (a file of 10 GB is not read to be
        refused); `FileNotFoundError` if absent."""
        with self.open(bucket, key) as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise ObjectTooLarge(bucket, key, limit, None)
        return data

    def local_file(self, bucket: str, key: str) -> tuple[Path, bool]:
        """The object as a file on this machine, and whether it is a temporary copy to delete.

        For checkpoints of million-file tables, which are read a batch at a
        time, several times, and by concurrent requests: a file on disk can be
        opened by each reader without holding the object in memory.
        """
        fd, name = tempfile.mkstemp(prefix="sharing-", suffix=".parquet")
        with os.fdopen(fd, "wb") as handle:
            handle.write(self.read(bucket, key))
        return Path(name), True

    def open(self, bucket: str, key: str) -> BinaryIO:
        """The object as a seekable binary file, fetched as it is read; `FileNotFoundError` if absent.

        For reading a few columns of a large Parquet file (equality deletes): only the
        footer and the column chunks read are fetched.
        """
        return io.BytesIO(self.read(bucket, key))

    @abstractmethod
    def write(self, bucket: str, key: str, data: bytes) -> None:
        """Store `data` as the object, whole or not at all (readers never see a part).

        Only files the server derives (deletion vector files, materialized data
        files, their indexes) are written; a storage that refuses raises `OSError`.
        """

    @abstractmethod
    def bucket_exists(self, bucket: str) -> bool:
        """Whether the bucket is there, ours or not (the catalog takes none it did not make).

        A storage that cannot tell answers True: the catalog then refuses the name
        rather than risk taking over a bucket that holds someone's data.
        """

    def create_bucket(self, bucket: str) -> None:
        """Make the bucket (the writable catalog's warehouses).

        `FileExistsError` when it is already there, so that a bucket made between
        the catalog's `bucket_exists` and this call is refused too, not adopted;
        any other `OSError` when the storage refuses.
        """
        raise PermissionError("this storage cannot create buckets")

    def delete_bucket(self, bucket: str) -> bool:
        """Remove the bucket if it is empty; whether it went (a bucket holding objects stays)."""
        return False

    def delete(self, bucket: str, keys: Iterable[str]) -> None:
        """Remove the objects (absent ones are no error): a dropped catalog table's files."""
        raise PermissionError("this storage cannot delete objects")

    def stat(self, bucket: str, key: str) -> ObjectInfo | None:
        """The object's size and time, or None when it does not exist."""
        directory = key.rpartition("/")[0]
        found = self.list(bucket, f"{directory}/" if directory else "", start_after=None)
        return next((info for info in found if info.key == key), None)

    @abstractmethod
    def missing(self, bucket: str, prefix: str, keys: Iterable[str]) -> builtins.list[str]:
        """Which of `keys` (all under `prefix`) do not exist."""

    @abstractmethod
    def presign(self, bucket: str, key: str, now: float, lifetime: int | None = None) -> tuple[str, int]:
        """A GET URL for one object and its expiry in epoch milliseconds, valid `lifetime` seconds
        (the storage's `url_lifetime` when None)."""

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        """`presign` as of `now`, for signing many URLs in a row (a response's files).

        Storages override it to do once what every URL of the batch shares.
        """

        def sign(bucket: str, key: str) -> tuple[str, int]:
            return self.presign(bucket, key, now, lifetime)

        return sign

    def batch_signer(self, now: float, lifetime: int | None = None) -> BatchSigning | None:
        """`url_signer` for a record batch of keys at once, where a storage has one (else None)."""
        return None

    def count_missing(self, locations: Iterable[tuple[str, str]]) -> int:
        """How many of these (bucket, key) objects are absent; one check per bucket."""
        by_bucket: dict[str, list[str]] = {}
        for bucket, key in locations:
            by_bucket.setdefault(bucket, []).append(key)
        count = 0
        for bucket, keys in by_bucket.items():
            count += len(self.missing(bucket, common_directory(keys), keys))
        return count


def common_directory(keys: builtins.list[str]) -> str:
    """The deepest directory (ending in '/') holding all of `keys`; '' for the bucket's root.

    From the first and last key as strings sort: what they share, all keys share.
    """
    shared = os.path.commonprefix([min(keys), max(keys)])  # noqa: RUF071 (by characters, then cut)
    return shared[: shared.rfind("/") + 1]
