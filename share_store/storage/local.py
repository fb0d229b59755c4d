"""Buckets as subdirectories of a local root, served by the sharing server."""

from __future__ import annotations

import builtins  # `list` is a method of storages, so the type is spelled in full
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from share_store.signing.file_urls import UrlSigner
from share_store.storage.base import BatchSigning, ObjectInfo, ObjectStorage, ObjectTooLarge, UrlSigning


class LocalStorage(ObjectStorage):
    def __init__(self, root: Path, signer: UrlSigner, url_lifetime: int = 3600) -> None:
        self.root = root.resolve()
        self.signer = signer
        self.url_lifetime = url_lifetime

    def resolve(self, bucket: str, key: str) -> Path | None:
        """The file for `bucket/key`, or None when it would leave the root or pass a symbolic link.

        No link is followed, even one that stays in the bucket: a link planted after a file
        was checked (a URL signed, a purge's list made) would make the same key another file.
        """
        if not bucket or "/" in bucket or bucket in (".", ".."):
            return None
        bucket_dir = (self.root / bucket).resolve()
        lexical = os.path.normpath(bucket_dir / key)
        candidate = Path(lexical).resolve()
        if bucket_dir.parent != self.root or not candidate.is_relative_to(bucket_dir):
            return None
        if str(candidate) != lexical:
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

    def read_at_most(self, bucket: str, key: str, limit: int) -> bytes:
        with self._path(bucket, key).open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size  # the file opened, not another one renamed since
            if size > limit:
                raise ObjectTooLarge(bucket, key, limit, size)
            data = handle.read(limit + 1)  # it may have grown since
        if len(data) > limit:
            raise ObjectTooLarge(bucket, key, limit, None)
        return data

    def _bucket_dir(self, bucket: str) -> Path:
        path = self.resolve(bucket, "")
        if path is None:
            raise PermissionError(f"bucket {bucket} would be outside the storage root")
        return path

    def bucket_exists(self, bucket: str) -> bool:
        return self._bucket_dir(bucket).is_dir()

    def create_bucket(self, bucket: str) -> None:
        path = self._bucket_dir(bucket)
        # mkdir fails on an existing entry atomically: of two racing creators, one is refused.
        path.mkdir()
        # The catalog records the warehouse once this returns: keep the directory through a crash.
        _fsync_directory(self.root)

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
        refused = 0
        for key in keys:
            path = self.resolve(bucket, key)
            if path is None:
                refused += 1  # the others still go: a purge is not stopped halfway by one
                continue
            path.unlink(missing_ok=True)
        if refused:
            raise PermissionError(
                f"{refused} key(s) of bucket {bucket} are outside it or pass a symbolic link"
            )

    def write(self, bucket: str, key: str, data: bytes) -> None:
        path = self.resolve(bucket, key)
        if path is None:
            raise PermissionError(f"{bucket}/{key} is outside the storage root")
        _make_directories(path.parent)
        # Renamed into place: a reader (or a replica sharing the directory) sees all or nothing.
        # Durable once this returns: the catalog next points a table at this file in its
        # database, and a pointer naming a file lost in a power cut is a corrupt table. So
        # the data is synced before the rename (else the rename can reach the disk before
        # the data, leaving an empty or partial file under the final name), and the
        # directory after it (else the rename itself can be lost).
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _fsync_directory(path.parent)

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

    def presign(self, bucket: str, key: str, now: float, lifetime: int | None = None) -> tuple[str, int]:
        expires = int(now) + (lifetime or self.url_lifetime)
        return self.signer.sign(bucket, key, expires), expires * 1000

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        return self.signer.signing_until(int(now) + (lifetime or self.url_lifetime))

    def batch_signer(self, now: float, lifetime: int | None = None) -> BatchSigning:
        return self.signer.batch_signing_until(int(now) + (lifetime or self.url_lifetime))


def _fsync_directory(directory: Path) -> None:
    """Make the entries created in or renamed into `directory` durable (POSIX: fsync the directory)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_directories(directory: Path) -> None:
    """`directory` and any missing parents, each new one made durable in its parent.

    A directory is only as durable as its entry in its parent: a file synced into a
    directory whose creation was lost in a crash is lost with it. Only the parents
    of directories found missing are synced, so a write into an existing directory
    costs nothing here; one made by a concurrent writer meanwhile is synced all the
    same, as this write may return before that writer syncs it.
    """
    missing: list[Path] = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for new in reversed(missing):  # top down, each in a parent that now exists
        try:
            new.mkdir()
        except FileExistsError:
            if not new.is_dir():
                raise
    # Synced once all are made, so that each parent's sync holds the entry made in it.
    for new in missing:
        _fsync_directory(new.parent)


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
