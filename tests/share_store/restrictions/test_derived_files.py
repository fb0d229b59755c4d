"""The folder of a restricted table's derived files: what it remembers, and when it needs its bucket.

Files are written to a real local storage (the server's own `LocalStorage`): what the folder
forgets it finds again by the sidecar it wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from share_store.model import SharedTable
from share_store.restrictions.derivation import Derived
from share_store.restrictions.derived_files import DerivedFiles, derived_files_of
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage

BUCKET = "cache"


def _storage(root: Path) -> LocalStorage:
    (root / BUCKET).mkdir(parents=True, exist_ok=True)
    (root / "warehouse-data").mkdir(parents=True, exist_ok=True)
    return LocalStorage(root, UrlSigner(b"k" * 32, "http://127.0.0.1:1"))


def _uri(bucket: str, key: str) -> str:
    return f"file:///{bucket}/{key}"


def _derived(rows: int) -> Derived:
    return Derived(b"PAR1-not-read-here" if rows else None, rows, f'{{"numRecords":{rows}}}')


def test_the_files_remembered_stay_bounded_and_one_forgotten_is_found_by_its_sidecar(tmp_path: Path) -> None:
    files = DerivedFiles(_storage(tmp_path), BUCKET, "restricted/t1", _uri, known_files=50)
    names = [f"{i:064x}" for i in range(500)]
    for name in names:
        files.put(name, _derived(3))
    assert len(files._known) == 50  # the most recent 50 of 500
    first = files.find(names[0])  # long forgotten: its sidecar says what it is
    assert first is not None and first.num_records == 3 and first.key.endswith(names[0] + ".parquet")
    assert len(files._known) == 50
    # Reading keeps a file remembered: the one just found outlives 49 newer ones.
    for name in names[100:149]:
        files.put(name, _derived(1))
    assert names[0] in files._known
    assert files.find("f" * 64) is None  # never made
    # What the folder forgot, it still signs: the locations of files made are all kept.
    assert files.location(_uri(BUCKET, files._key(names[1]) + ".parquet")) is not None


class _CountingReader:
    """The whole table's reader of an Iceberg table, as far as the folder asks it: its snapshot."""

    def __init__(self) -> None:
        self.snapshots = 0

    def snapshot(self, version: int | None = None, listing: Any = None) -> Any:
        self.snapshots += 1
        return type("Snapshot", (), {"adds": [{"path": "s3://warehouse-data/t/data/0.parquet"}]})()

    def locate(self, path: str) -> tuple[str, str]:
        bucket, _, key = path.removeprefix("s3://").partition("/")
        return bucket, key


def test_an_iceberg_tables_folder_reads_no_snapshot_until_a_file_needs_its_bucket(tmp_path: Path) -> None:
    table = SharedTable("t1", "s", "sales", "orders", "uniform", "warehouse", "sales/orders", False,
                        datetime.now(UTC))  # fmt: skip
    inner = _CountingReader()
    files = derived_files_of(table, inner, _storage(tmp_path), None, "cache-prefix", _uri)  # type: ignore[arg-type]
    assert inner.snapshots == 0
    # A key outside the folder is not its file, whatever the bucket: no snapshot for it.
    assert not files.holds("warehouse-data", "t/data/0.parquet")
    assert inner.snapshots == 0
    made = files.put("a" * 64, _derived(2))
    assert (made.bucket, inner.snapshots) == ("warehouse-data", 1)
    assert files.holds("warehouse-data", made.key) and files.bucket == "warehouse-data"
    assert inner.snapshots == 1  # worked out once
    # With a cache bucket configured, no snapshot is ever read.
    configured = derived_files_of(table, inner, _storage(tmp_path), BUCKET, "cache-prefix", _uri)  # type: ignore[arg-type]
    assert configured.bucket == BUCKET and inner.snapshots == 1
