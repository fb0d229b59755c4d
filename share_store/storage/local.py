"""Buckets as subdirectories of a local root, served by the sharing server."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from share_store.signing import UrlSigner
from share_store.storage.base import ObjectInfo, ObjectStorage


class LocalStorage(ObjectStorage):
    def __init__(self, root: Path, signer: UrlSigner, url_lifetime: int = 3600) -> None:
        self.root = root.resolve()
        self.signer = signer
        self.url_lifetime = url_lifetime

    def resolve(self, bucket: str, key: str) -> Path | None:
        """The file for `bucket/key`, or None when it would leave the root."""
        if not bucket or "/" in bucket or bucket in (".", ".."):
            return None
        bucket_dir = (self.root / bucket).resolve()
        candidate = (bucket_dir / key).resolve()
        if bucket_dir.parent != self.root or not candidate.is_relative_to(bucket_dir):
            return None
        return candidate

    def _path(self, bucket: str, key: str) -> Path:
        path = self.resolve(bucket, key)
        if path is None:
            raise FileNotFoundError(f"{bucket}/{key}")
        return path

    def table_uri(self, bucket: str, path: str) -> str:
        return str(self._path(bucket, path))

    def deltalake_options(self) -> dict[str, str]:
        return {}

    def list(self, bucket: str, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        directory, _, name_prefix = prefix.rpartition("/")
        base = self._path(bucket, directory)
        try:
            entries = list(os.scandir(base))
        except FileNotFoundError:
            return
        for entry in entries:
            if entry.is_file() and entry.name.startswith(name_prefix):
                stat = entry.stat()
                key = f"{directory}/{entry.name}" if directory else entry.name
                if start_after is not None and key <= start_after:
                    continue
                yield ObjectInfo(key=key, size=stat.st_size, modified_ms=stat.st_mtime_ns // 1_000_000)

    def read(self, bucket: str, key: str) -> bytes:
        return self._path(bucket, key).read_bytes()

    def local_file(self, bucket: str, key: str) -> tuple[Path, bool]:
        path = self._path(bucket, key)
        if not path.is_file():
            raise FileNotFoundError(f"{bucket}/{key}")
        return path, False

    def missing(self, bucket: str, prefix: str, keys: Iterable[str]) -> list[str]:
        # Resolving every key (a system call per path component) dominated large
        # tables; the bucket is resolved once, and keys that could climb out count
        # as missing. Serving a file still resolves it fully.
        base = self._path(bucket, "")
        missing = []
        for key in keys:
            parts = key.split("/")
            if ".." in parts or key.startswith("/") or not os.path.isfile(os.path.join(base, key)):
                missing.append(key)
        return missing

    def presign(self, bucket: str, key: str, now: float) -> tuple[str, int]:
        expires = int(now) + self.url_lifetime
        return self.signer.sign(bucket, key, expires), expires * 1000
