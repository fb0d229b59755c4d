"""The door into tables: what the HTTP side may ask of one shared table, whatever its format.

Delta and Iceberg tables answer through the same `TableReader` methods with
neutral values (`TableSnapshot`, `Commit`, raw action dictionaries), which is
all the protocol side knows of either. A listing is opaque to callers: they
read its latest version and hand it back to the reader it came from.
"""

from __future__ import annotations

from typing import Any, Protocol

from share_store.storage.base import ObjectStorage, UrlSigning
from share_store.tables.commit_times import Commit
from share_store.tables.snapshot import TableSnapshot


class VersionListing(Protocol):
    """The versions a table's log (or catalog) holds as of one look; readers cache it."""

    @property
    def latest_version(self) -> int: ...

    #: Each version's commit time (epoch ms) as listed, where the store lists one.
    commit_times: dict[int, int]


class TableReader(Protocol):
    """One shared table's versions, snapshots, commits and file locations."""

    @property
    def storage(self) -> ObjectStorage:
        """Where the table's files are read from (an Iceberg catalog may name storage of its own)."""
        ...

    @property
    def holds_snapshot(self) -> bool:
        """Whether the snapshot cache still holds one of the table's versions."""
        ...

    def listing(self) -> VersionListing:
        """The table's versions as of now (cheap to ask again: readers cache it)."""
        ...

    def snapshot(self, version: int | None = None, listing: Any = None) -> TableSnapshot:
        """The snapshot of `version` (the latest when None)."""
        ...

    def built(self, snapshot: TableSnapshot) -> TableSnapshot:
        """`snapshot` with its files held, once a build of it behind its first reader lands
        (itself when there is none): what the snapshot warmer makes ready."""
        ...

    def head(self, listing: Any = None) -> TableSnapshot:
        """The latest version for its head lines only (its files may not be listable)."""
        ...

    def planned(self, snapshot: TableSnapshot, hint: dict[str, Any]) -> TableSnapshot:
        """`snapshot`'s files as the table format's own planning prunes them with a predicate hint."""
        ...

    def for_parquet(self, snapshot: TableSnapshot) -> TableSnapshot:
        """`snapshot` as the parquet response format can carry it (Iceberg deletes materialized)."""
        ...

    def commit(self, listing: Any, version: int) -> list[dict[str, Any]]:
        """The raw actions of one version, as Delta writes them."""
        ...

    def parquet_commit(self, listing: Any, version: int) -> list[dict[str, Any]]:
        """One version's actions as the parquet format can carry them (Iceberg deletes materialized)."""
        ...

    def commits(self, listing: Any, snapshot: TableSnapshot | None = None) -> list[Commit]:
        """Version and timestamp of every version still in the log, up to `snapshot`'s."""
        ...

    def locate(self, path: str) -> tuple[str, str]:
        """Bucket and key of a file named in the log."""
        ...

    def locate_dv(self, descriptor: dict[str, Any]) -> tuple[str, str] | None:
        """Bucket and key of a deletion vector's file; None for inline vectors."""
        ...

    def url_signer(self, now: float, lifetime: int | None = None) -> UrlSigning:
        """`sign` as of `now`, for the many URLs of one response, each valid `lifetime` seconds
        (the storage's own `url_lifetime` when None)."""
        ...

    def check_files_exist(self, snapshot: TableSnapshot, with_dvs: bool = False, ahead: float = 0.0) -> bool:
        """Refuse a snapshot whose files were removed from storage; `ahead`: check unless
        an earlier check is trusted that many seconds from now still. Whether it looked."""
        ...

    def check_exist(self, locations: list[tuple[str, str]]) -> None:
        """Refuse when any of `locations` is missing from storage."""
        ...
