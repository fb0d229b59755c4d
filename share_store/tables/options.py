"""How tables are read, as the server's settings say: plain values the HTTP side builds and passes down.

The `[iceberg]` section's settings for row-level deletes, and who hears what
resolving equality deletes cost. The table formats read them; the server's
configuration makes them without reaching into either format.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: Deletion vectors larger than this are never inlined in an `add` (they go to DV files).
MAX_INLINE_BYTES = 64 * 1024
#: What the parquet response format does with an Iceberg table's deleted rows.
PARQUET_MODES = ("refuse", "materialize")


@dataclass
class Resolution:
    """What resolving one snapshot's equality deletes cost: for the audit log and the metrics.

    `outcome` is "resolved", "over_budget", "refused" (deletes not served) or "failed"
    (a file unreadable or gone, storage down).
    """

    delete_files: int = 0
    data_files: int = 0
    bytes_scanned: int = 0
    rows_scanned: int = 0
    rows_deleted: int = 0
    seconds: float = 0.0
    outcome: str = "resolved"


DEFAULT_CACHE_PREFIX = ".delta-sharing-cache/"


@dataclass(frozen=True)
class DeleteOptions:
    """The `[iceberg]` settings for serving row-level deletes."""

    #: Bucket of the cache; None: the bucket holding the table's metadata.
    cache_bucket: str | None = None
    cache_prefix: str = DEFAULT_CACHE_PREFIX
    #: Vectors up to this many bytes are inlined in the `add`; larger ones are DV files.
    inline_dv_bytes: int = 1024
    #: "refuse" or "materialize" (write data files without their deleted rows).
    deletes_in_parquet: str = "refuse"
    #: How long resolving one snapshot's equality deletes may take before it is refused.
    equality_delete_budget_seconds: float = 30.0
    #: A history-sharing Delta table's newest versions that Iceberg REST clients see as snapshots.
    delta_snapshots: int = 10

    def __post_init__(self) -> None:
        if self.deletes_in_parquet not in PARQUET_MODES:
            raise ValueError(f"deletes_in_parquet must be one of {', '.join(PARQUET_MODES)}")
        if not 0 <= self.inline_dv_bytes <= MAX_INLINE_BYTES:
            raise ValueError(f"inline_dv_bytes must be between 0 and {MAX_INLINE_BYTES}")
        if self.delta_snapshots < 1:
            raise ValueError("delta_snapshots must be at least 1")
        if not self.equality_delete_budget_seconds > 0:
            raise ValueError("equality_delete_budget_seconds must be more than 0")
        prefix = self.cache_prefix.strip("/")
        if not prefix or ".." in prefix.split("/"):
            raise ValueError("cache_prefix must be a relative path inside the bucket")
        if not prefix.startswith("."):
            # No own-warehouse table, namespace or folder has a name starting with a dot, so none
            # can be located over the cache (and read or rewrite other tables' derived files).
            raise ValueError(f"cache_prefix must start with a dot (as {DEFAULT_CACHE_PREFIX!r} does)")


@dataclass(frozen=True)
class IcebergOptions:
    """How Iceberg snapshots are built: the `[iceberg]` settings, and who hears of equality deletes."""

    deletes: DeleteOptions = field(default_factory=DeleteOptions)
    #: Called (in the building thread) after each snapshot's equality deletes were resolved or given up.
    on_equality_resolution: Callable[[Resolution], None] | None = None
