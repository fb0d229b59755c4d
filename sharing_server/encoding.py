"""Turning raw Delta actions into signed protocol lines, in the chosen response format."""

from __future__ import annotations

from typing import Any, Protocol

from share_store.delta import actions
from share_store.delta.actions import FileEntry
from share_store.delta.changes import Change, FileChange, MetadataChange
from share_store.delta.snapshot import DeltaSnapshot

PARQUET_KINDS = {"add": "add", "remove": "remove", "cdc": "cdf"}


class FileSigner(Protocol):
    """What a table reader offers for signing its files (Delta and Iceberg alike)."""

    def locate(self, path: str) -> tuple[str, str]: ...

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None: ...

    def sign(self, location: tuple[str, str], now: float) -> tuple[str, int]: ...


class LineEncoder:
    """Builds the lines of one response; remembers the earliest URL expiry it handed out."""

    def __init__(
        self,
        response_format: str,
        signer: FileSigner,
        now: float,
        hash_kind: str | None = None,
        history_shared: bool = True,
    ) -> None:
        self.format = response_format
        self.signer = signer
        self.now = now
        self.hash_kind = hash_kind or response_format
        self.history_shared = history_shared
        self.min_expiration: int | None = None
        #: Bytes of the data files handed out so far (for the audit record).
        self.file_bytes = 0

    def served_bytes(self) -> int:
        return self.file_bytes

    def _sign(self, location: tuple[str, str]) -> tuple[str, int]:
        url, expiration = self.signer.sign(location, self.now)
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
        return self.entry_file(kind, FileEntry(action, partition_columns), version, timestamp)

    def change(self, change: Change) -> dict[str, Any]:
        """One line of a streaming or change data feed read."""
        if isinstance(change, FileChange):
            return self.file(
                change.kind, change.action, change.partition_columns, change.version, change.timestamp
            )
        if isinstance(change, MetadataChange):
            return self.metadata(change.snapshot, version=change.version)
        return {"protocol": actions.delta_protocol(change.snapshot)["protocol"] | {"version": change.version}}

    def entry_file(
        self, kind: str, entry: FileEntry, version: int | None = None, timestamp: int | None = None
    ) -> dict[str, Any]:
        """`file` for an action already wrapped, as a snapshot's files are."""
        action = entry.action
        url, expiration = self._sign(self.signer.locate(action["path"]))
        self.file_bytes += action.get("size") or 0
        if self.format == "delta":
            dv_url = None
            descriptor = action.get("deletionVector")
            location = self.signer.locate_dv(descriptor) if descriptor else None
            if location is not None:
                dv_url, _ = self._sign(location)
            return actions.delta_file(
                kind, action, url, expiration, self.hash_kind, dv_url, version, timestamp
            )
        line_kind = "file" if kind == "add" and timestamp is None else PARQUET_KINDS[kind]
        return actions.parquet_file(entry, url, expiration, self.hash_kind, version, timestamp, line_kind)
