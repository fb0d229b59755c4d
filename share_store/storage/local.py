"""Buckets as subdirectories of a local root, served by the sharing server."""

from __future__ import annotations

import builtins  # `list` is a method of storages, so the type is spelled in full
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from share_store.signing.file_urls import UrlSigner
from share_store.storage.base import BatchSigning, ObjectInfo, ObjectStorage, UrlSigning


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

    def list(self, bucket: str, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        directory, _, name_prefix = prefix.rpartition("/")
        base = self._path(bucket, directory)
        try:
            entries = list(os.scandir(base))
        except FileNotFoundError:
            return
        for entry in entries:
            if not entry.name.startswith(name_prefix) or _staged(entry.name):
                continue
            key = f"{directory}/{entry.name}" if directory else entry.name
            if start_after is not None and key <= start_after:
                continue
            try:
                if not entry.is_file():
                    continue
                stat = entry.stat()
            except FileNotFoundError:
                # Gone since the directory was read: a writer's temporary file
                # renamed into place, or a file cleaned up. Not there, then.
                continue
            yield ObjectInfo(key=key, size=stat.st_size, modified_ms=stat.st_mtime_ns // 1_000_000)

    def folders(self, bucket: str, prefix: str) -> builtins.list[str]:
        try:
            entries = list(os.scandir(self._path(bucket, prefix.rstrip("/"))))
        except (FileNotFoundError, NotADirectoryError):
            return []
        # Symbolic links are not followed: they could lead out of the bucket.
        return sorted(f"{prefix}{e.name}/" for e in entries if e.is_dir(follow_symlinks=False))

    def read(self, bucket: str, key: str) -> bytes:
        return self._path(bucket, key).read_bytes()

    def create_bucket(self, bucket: str) -> None:
        path = self.resolve(bucket, "")
        if path is None:
            raise PermissionError(f"bucket {bucket} would be outside the storage root")
        path.mkdir(exist_ok=True)

    def delete_bucket(self, bucket: str) -> bool:
        path = self.resolve(bucket, "")
        if path is None or not path.is_dir():
            return False
        # Folders left empty by deleted tables are pruned first; any file keeps the bucket.
        for folder in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            try:
                folder.rmdir()
            except OSError:
                return False
        try:
            path.rmdir()
        except OSError:
            return False
        return True

    def delete(self, bucket: str, keys: Iterable[str]) -> None:
        for key in keys:
            path = self.resolve(bucket, key)
            if path is None:
                raise PermissionError(f"{bucket}/{key} is outside the storage root")
            path.unlink(missing_ok=True)

    def write(self, bucket: str, key: str, data: bytes) -> None:
        path = self.resolve(bucket, key)
        if path is None:
            raise PermissionError(f"{bucket}/{key} is outside the storage root")
        path.parent.mkdir(parents=True, exist_ok=True)
        # Renamed into place: a reader (or a replica sharing the directory) sees all or nothing.
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def stat(self, bucket: str, key: str) -> ObjectInfo | None:
        path = self.resolve(bucket, key)
        if path is None or not path.is_file():
            return None
        try:
            found = path.stat()
        except FileNotFoundError:  # removed since
            return None
        return ObjectInfo(key=key, size=found.st_size, modified_ms=found.st_mtime_ns // 1_000_000)

    def open(self, bucket: str, key: str) -> BinaryIO:
        return self._path(bucket, key).open("rb")

    def local_file(self, bucket: str, key: str) -> tuple[Path, bool]:
        path = self._path(bucket, key)
        if not path.is_file():
            raise FileNotFoundError(f"{bucket}/{key}")
        return path, False

    def missing(self, bucket: str, prefix: str, keys: Iterable[str]) -> builtins.list[str]:
        # One directory read per directory instead of a stat per file: a 100,000-file
        # table is checked in a tenth of the time. The bucket is resolved once; keys
        # that could climb out count as missing (serving a file resolves it fully).
        base = self._path(bucket, "")
        missing: list[str] = []
        by_directory: dict[str, list[tuple[str, str]]] = {}
        for key in keys:
            if key.startswith("/") or ".." in key.split("/"):
                missing.append(key)
                continue
            directory, _, name = key.rpartition("/")
            by_directory.setdefault(directory, []).append((key, name))
        for directory, entries in by_directory.items():
            present = _file_names(os.path.join(base, directory))
            missing += [key for key, name in entries if name not in present]
        return missing

    def count_missing(self, locations: Iterable[tuple[str, str]]) -> int:
        by_bucket: dict[str, list[str]] = {}
        for bucket, key in locations:
            by_bucket.setdefault(bucket, []).append(key)
        return sum(len(self.missing(bucket, "", keys)) for bucket, keys in by_bucket.items())

    def presign(self, bucket: str, key: str, now: float) -> tuple[str, int]:
        expires = int(now) + self.url_lifetime
        return self.signer.sign(bucket, key, expires), expires * 1000

    def url_signer(self, now: float) -> UrlSigning:
        return self.signer.signing_until(int(now) + self.url_lifetime)

    def batch_signer(self, now: float) -> BatchSigning:
        return self.signer.batch_signing_until(int(now) + self.url_lifetime)


def _staged(name: str) -> bool:
    """Whether `name` is an upload still being written by object_store (delta-rs, `….json#1`).

    object_store writes `name#N` and renames it to `name` once complete, and its
    own listings leave such files out; so do ours, as S3 shows no upload in progress.
    """
    _, hash_sign, suffix = name.rpartition("#")
    return bool(hash_sign) and suffix.isdigit()


def _file_names(directory: str) -> set[str]:
    """Names of the files in `directory` (symlinks followed), empty if it does not exist."""
    try:
        with os.scandir(directory) as entries:
            return {entry.name for entry in entries if entry.is_file()}
    except (FileNotFoundError, NotADirectoryError):
        return set()
