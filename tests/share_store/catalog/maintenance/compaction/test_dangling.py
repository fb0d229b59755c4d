"""Which position delete files a rewrite leaves dangling, as readers would match them (pure)."""

from __future__ import annotations

import uuid

from pyiceberg.manifest import DataFile, DataFileContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.typedef import Record

from share_store.catalog.maintenance.compaction.dangling import dangling

#: The field id of a position delete file's `file_path` column (the Iceberg spec's reserved id).
FILE_PATH_ID = 2147483546


def test_a_position_delete_is_dangling_once_no_file_left_may_hold_its_rows() -> None:
    def data(path: str, seq: int, part: str = "a") -> ManifestEntry:
        file = DataFile.from_args(content=DataFileContent.DATA, file_path=path, partition=Record(part))
        file.spec_id = 0
        return ManifestEntry.from_args(
            status=ManifestEntryStatus.EXISTING, sequence_number=seq, data_file=file
        )

    def deletes(seq: int | None, bounds: tuple[str, str] | None = None, part: str = "a") -> ManifestEntry:
        file = DataFile.from_args(
            content=DataFileContent.POSITION_DELETES, file_path=uuid.uuid4().hex, partition=Record(part),
            lower_bounds={FILE_PATH_ID: bounds[0].encode()} if bounds else None,
            upper_bounds={FILE_PATH_ID: bounds[1].encode()} if bounds else None,
        )  # fmt: skip
        file.spec_id = 0
        return ManifestEntry.from_args(
            status=ManifestEntryStatus.EXISTING, sequence_number=seq, data_file=file
        )

    removed = [data("a/1", 1), data("a/3", 3)]
    left = [data("a/2", 2), data("b/1", 1, part="b")]
    candidates = [
        deletes(4, ("a/1", "a/1")),  # 0: the removed file's only: dangling
        deletes(4, ("a/1", "a/3")),  # 1: a/2, left, is in its bounds
        deletes(4, ("a/3", "a/4")),  # 2: dangling
        deletes(1),  # 3: no bounds, and every file left in a is newer: dangling
        deletes(2),  # 4: no bounds, and a/2 is as old: stays
        deletes(0),  # 5: no bounds, older than every removed file too: it applied to none, stays
        deletes(None, ("a/1", "a/1")),  # 6: no sequence number, nothing is sure: stays
        deletes(4, ("b/1", "b/1"), part="b"),  # 7: nothing of b is removed: stays
    ]
    assert dangling(candidates, removed, left) == {0, 2, 3}
