"""Turning raw Delta actions into signed protocol lines, in the chosen response format."""

from __future__ import annotations

from typing import Any

from share_store.delta import actions
from share_store.delta.actions import FileEntry
from share_store.delta.deletion_vectors import dv_storage_path
from share_store.delta.snapshot import DeltaSnapshot, file_key
from share_store.storage.base import ObjectStorage

PARQUET_KINDS = {"add": "add", "remove": "remove", "cdc": "cdf"}


class LineEncoder:
    """Builds the lines of one response; remembers the earliest URL expiry it handed out."""

    def __init__(
        self,
        response_format: str,
        storage: ObjectStorage,
        bucket: str,
        table_path: str,
        now: float,
        hash_kind: str | None = None,
        history_shared: bool = True,
    ) -> None:
        self.format = response_format
        self.storage = storage
        self.bucket = bucket
        self.table_path = table_path
        self.now = now
        self.hash_kind = hash_kind or response_format
        self.history_shared = history_shared
        self.min_expiration: int | None = None

    def _sign(self, key: str) -> tuple[str, int]:
        url, expiration = self.storage.presign(self.bucket, key, self.now)
        if self.min_expiration is None or expiration < self.min_expiration:
            self.min_expiration = expiration
        return url, expiration

    def protocol(self, snapshot: DeltaSnapshot) -> dict[str, Any]:
        if self.format == "delta":
            return actions.delta_protocol(snapshot)
        return actions.parquet_protocol()

    def metadata(self, snapshot: DeltaSnapshot, version: int | None = None) -> dict[str, Any]:
        if self.format == "delta":
            return actions.delta_metadata(snapshot, version)
        return actions.parquet_metadata(snapshot, self.history_shared, version)

    def file(
        self,
        kind: str,
        action: dict[str, Any],
        partition_columns: tuple[str, ...] = (),
        version: int | None = None,
        timestamp: int | None = None,
    ) -> dict[str, Any]:
        """One data file: `kind` is `add` (snapshot or change), `remove` or `cdc`.

        A snapshot file is an `add` without a timestamp; in the parquet format it
        is written as a `file` line.
        """
        url, expiration = self._sign(file_key(self.table_path, action["path"]))
        if self.format == "delta":
            dv_url = None
            descriptor = action.get("deletionVector")
            if descriptor:
                relative = dv_storage_path(descriptor)
                if relative is not None:
                    dv_url, _ = self._sign(f"{self.table_path}/{relative}")
            return actions.delta_file(
                kind, action, url, expiration, self.hash_kind, dv_url, version, timestamp
            )
        line_kind = "file" if kind == "add" and timestamp is None else PARQUET_KINDS[kind]
        entry = FileEntry(action, partition_columns)
        return actions.parquet_file(entry, url, expiration, self.hash_kind, version, timestamp, line_kind)

    def dv_keys(self, adds: list[dict[str, Any]]) -> list[str]:
        """Object keys of the on-disk deletion vectors these actions point to."""
        keys = []
        for add in adds:
            descriptor = add.get("deletionVector")
            relative = dv_storage_path(descriptor) if descriptor else None
            if relative is not None:
                keys.append(f"{self.table_path}/{relative}")
        return keys
