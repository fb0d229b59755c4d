"""The folder of a restricted table's derived files: what it remembers.

Files are written to a real local storage (the server's own `LocalStorage`): what the folder
forgets it finds again by the sidecar it wrote.
"""

from __future__ import annotations

from pathlib import Path

from share_store.restrictions.derivation import Derived
from share_store.restrictions.derived_files import DerivedFiles
from share_store.signing.file_urls import UrlSigner
from share_store.storage.local import LocalStorage

BUCKET = "cache"


def _storage(root: Path) -> LocalStorage:
    (root / BUCKET).mkdir(parents=True, exist_ok=True)
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
