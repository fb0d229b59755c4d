"""The delete files a rewrite leaves dangling: position deletes that can apply to no data file left.

As Iceberg's `remove-dangling-deletes` does, read as readers apply them: a position delete file is
dangling when it applied to a rewritten file and can apply to no data file left in its partition,
by its `referenced_data_file`, else the range of its `file_path` bounds, else (no bounds) any data
file of the partition with a sequence number up to its own. One that might still apply stays.
Pure: manifest entries in, positions out; `commit` removes them with the rewrite.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pyiceberg.manifest import INITIAL_SEQUENCE_NUMBER, DataFile, DataFileContent, ManifestEntry

#: The field id of a position delete file's `file_path` column (the Iceberg spec's reserved id).
FILE_PATH_ID = 2147483546


def dangling(
    deletes: list[ManifestEntry], removed: list[ManifestEntry], left: list[ManifestEntry]
) -> set[int]:
    """The positions in `deletes` (live delete entries) of the position delete files that applied to
    a `removed` data file and can apply to none of the data files `left` (live entries of the same
    partitions): as readers match them, by spec and partition, then by `referenced_data_file`, else
    the range of their `file_path` bounds, else by sequence number (a data file's at most the delete's).
    Equality deletes, and anything unsure (no sequence number), are never dangling."""
    removed_by, left_by = _by_partition(removed), _by_partition(left)
    gone = set()
    for position, entry in enumerate(deletes):
        file = entry.data_file
        if file.content != DataFileContent.POSITION_DELETES or entry.sequence_number is None:
            continue
        key = _partition_key(file)
        if key not in removed_by:
            continue
        if removed_by[key].may_hold(file, entry.sequence_number) and not (
            key in left_by and left_by[key].may_hold(file, entry.sequence_number)
        ):
            gone.add(position)
    return gone


def _partition_key(file: DataFile) -> tuple[int, tuple[Any, ...]]:
    partition: Any = file.partition  # a Record: iterable by index, which its type does not say
    return (file.spec_id or 0, tuple(partition) if partition is not None else ())


@dataclass
class _DataFiles:
    """One partition's data files, as a position delete file is matched with them."""

    paths: list[str]  # sorted
    oldest: int  # the smallest data sequence number

    def may_hold(self, delete: DataFile, sequence_number: int) -> bool:
        """Whether the position delete file (with its entry's sequence number) may apply to one of them."""
        referenced = getattr(delete, "referenced_data_file", None)  # read only from v3 manifests on
        if referenced:
            index = bisect_left(self.paths, referenced)
            return index < len(self.paths) and self.paths[index] == referenced
        bounds = _path_bounds(delete)
        if bounds is not None:
            index = bisect_left(self.paths, bounds[0])
            return index < len(self.paths) and self.paths[index] <= bounds[1]
        return self.oldest <= sequence_number


def _by_partition(entries: list[ManifestEntry]) -> dict[tuple[int, tuple[Any, ...]], _DataFiles]:
    grouped: dict[tuple[int, tuple[Any, ...]], list[ManifestEntry]] = defaultdict(list)
    for entry in entries:
        grouped[_partition_key(entry.data_file)].append(entry)
    return {
        key: _DataFiles(
            sorted(e.data_file.file_path for e in group),
            # A data file without a sequence number is taken as the oldest: it keeps deletes.
            min(e.sequence_number or INITIAL_SEQUENCE_NUMBER for e in group),
        )
        for key, group in grouped.items()
    }


def _path_bounds(delete: DataFile) -> tuple[str, str] | None:
    """The delete file's `file_path` lower and upper bounds; None without both, or undecodable."""
    try:
        lower = (delete.lower_bounds or {}).get(FILE_PATH_ID)
        upper = (delete.upper_bounds or {}).get(FILE_PATH_ID)
        if lower is None or upper is None:
            return None
        return bytes(lower).decode(), bytes(upper).decode()
    except (UnicodeDecodeError, TypeError):
        return None
