"""Pre-encoded file lines (`sharing_server.delta_sharing.line_templates`, `LineEncoder.snapshot_files`).

A snapshot's file lines are encoded once with holes for URLs and expiry, then
filled per response. What is checked: the filled bytes are exactly what
encoding the line whole gives, in both formats, with deletion vectors on disk
and inline, at a pinned version; a later response (another time, so other
URLs and expiry) fills the same templates with its own values; lines that
cannot be cut (a placeholder's text in the file's values, integers beyond 64
bits) are encoded whole; streamed snapshots keep no templates; and the batch
URL signers give the very URLs single signing does.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from share_store.delta import replay
from share_store.model import SharedTable
from share_store.readers.table_readers import TableReaders
from share_store.signing.file_urls import UrlSigner
from share_store.signing.sigv4 import Credentials, S3Presigner
from share_store.storage.local import LocalStorage
from share_store.storage.s3 import S3Settings, S3Storage
from share_store.tables.actions import FileEntry, entries
from share_store.tables.active_files import StreamedFileSet
from share_store.tables.snapshot import TableSnapshot
from sharing_server.delta_sharing import line_templates
from sharing_server.delta_sharing.capabilities import Capabilities
from sharing_server.delta_sharing.queries import TableQueries
from sharing_server.delta_sharing.requests import QueryRequest
from sharing_server.http.ndjson import line_bytes
from tests.sharing_server.delta_sharing.test_encoding import (
    ADD,
    DV_INLINE,
    DV_ON_DISK,
    METADATA,
    NOW,
    PROTOCOL,
    Signer,
    encoder,
)

DV_ADD = ADD | {"path": "p=a/part-0002.parquet", "deletionVector": DV_ON_DISK}
INLINE_ADD = ADD | {"path": "p=a/part-0003.parquet", "deletionVector": DV_INLINE}
# The URL placeholder's text inside the file's own stats: the line cannot be cut there.
TRICKY_ADD = ADD | {"path": "p=a/part-0004.parquet", "stats": '{"numRecords":1,"x":"\x00U\x00"}'}
HUGE_ADD = ADD | {"path": "p=a/part-0005.parquet", "size": 2**70}
ADDS = [ADD, DV_ADD, INLINE_ADD, TRICKY_ADD, HUGE_ADD]


def whole(
    response_format: str, adds: list[dict[str, Any]], now: float = NOW, version: int | None = None
) -> list[bytes]:
    """Each file's line encoded whole, as before pre-encoding."""
    lines = encoder(response_format)
    lines.now = now
    snapshot = TableSnapshot(7, PROTOCOL, METADATA, adds)
    return [line_bytes(lines.entry_file("add", entry, version=version)) for entry in entries(snapshot)]


def pre_encoded(
    snapshot: TableSnapshot, response_format: str, now: float = NOW, version: int | None = None
) -> list[bytes]:
    lines = encoder(response_format)
    lines.now = now
    return [line_bytes(line) for line in lines.snapshot_files(snapshot, entries(snapshot), version)]


@pytest.mark.parametrize("response_format", ["parquet", "delta"])
@pytest.mark.parametrize("version", [None, 5])
def test_filled_lines_are_the_lines_encoded_whole(response_format: str, version: int | None) -> None:
    snapshot = TableSnapshot(7, PROTOCOL, METADATA, ADDS)
    first = pre_encoded(snapshot, response_format, version=version)
    assert first == whole(response_format, ADDS, version=version)
    assert len(snapshot.memo) == 1  # the templates stay with the snapshot
    every = encoder(response_format)  # no entries: all the snapshot's files, none wrapped
    assert [line_bytes(line) for line in every.snapshot_files(snapshot, version=version)] == first
    # An hour later: other URLs and expiry, spliced into the same templates.
    later = pre_encoded(snapshot, response_format, NOW + 3600, version=version)
    assert later == whole(response_format, ADDS, NOW + 3600, version)
    assert later != first
    parsed = [orjson.loads(line) for line in later] if response_format == "parquet" else []
    assert all(line["file"]["expirationTimestamp"] == 1_700_007_200_000 for line in parsed)


def test_templates_are_kept_per_format_and_version() -> None:
    snapshot = TableSnapshot(7, PROTOCOL, METADATA, [ADD])
    pre_encoded(snapshot, "parquet")
    pre_encoded(snapshot, "delta")
    pre_encoded(snapshot, "parquet", version=7)
    assert len(snapshot.memo) == 3
    assert pre_encoded(snapshot, "parquet") == whole("parquet", [ADD])


def test_a_planned_subset_fills_the_held_snapshots_templates() -> None:
    # What Iceberg planning hands the encoder per hinted query: some of the held snapshot's files.
    held = TableSnapshot(7, PROTOCOL, METADATA, ADDS)
    subset = held.narrowed(list(held.adds)[:2])
    assert subset.num_files == 2 and held.num_files == len(ADDS)
    assert pre_encoded(subset, "delta") == whole("delta", ADDS[:2])
    (templates,) = held.memo.values()  # made once, kept with the held snapshot
    assert set(templates) == {id(action) for action in list(held.adds)[:2]}
    again = held.narrowed(list(held.adds)[:2])
    assert pre_encoded(again, "delta") == whole("delta", ADDS[:2])
    assert held.memo[next(iter(held.memo))] is templates and len(templates) == 2


def test_lines_that_cannot_be_cut_are_encoded_whole() -> None:
    action = {"file": {"url": line_templates.URL, "expirationTimestamp": line_templates.EXPIRY}}
    assert line_templates.make_template(action, ("b", "k")) is not None
    tricky = {"file": action["file"] | {"stats": line_templates.URL}}
    assert line_templates.make_template(tricky, ("b", "k")) is None
    huge = {"file": action["file"] | {"size": 2**70}}
    assert line_templates.make_template(huge, ("b", "k")) is None
    missing = {"file": {"url": line_templates.URL}}
    assert line_templates.make_template(missing, ("b", "k")) is None


def test_min_expiration_covers_deletion_vectors() -> None:
    short = Signer(lifetimes={"sales/orders/dv/6.bin": 60})
    lines = encoder("delta", short)
    snapshot = TableSnapshot(7, PROTOCOL, METADATA, [ADD, DV_ADD])
    list(lines.snapshot_files(snapshot, entries(snapshot)))
    assert lines.min_expiration == (int(NOW) + 60) * 1000


def test_streamed_snapshots_keep_no_templates(tmp_path: Path) -> None:
    # No checkpoint parts: only the files added after it, which is enough to stream.
    adds = StreamedFileSet([], False, {(ADD["path"], ""): ADD}, set(), dict, lambda add: (add["path"], ""))
    snapshot = TableSnapshot(7, PROTOCOL, METADATA, adds)
    assert snapshot.streamed
    lines = [line_bytes(line) for line in encoder("parquet").snapshot_files(snapshot, entries(snapshot))]
    assert lines == whole("parquet", [ADD])
    assert snapshot.memo == {}


def test_hinted_subsets_use_the_snapshots_templates() -> None:
    """Files a hint keeps come as entries of the snapshot's own actions."""
    snapshot = TableSnapshot(7, PROTOCOL, METADATA, [ADD, DV_ADD])
    pre_encoded(snapshot, "parquet")
    second = FileEntry(DV_ADD, ("p",))
    lines = encoder("parquet")
    (line,) = (line_bytes(x) for x in lines.snapshot_files(snapshot, [second]))
    assert line == whole("parquet", [DV_ADD])[0]


# -- batch URL signing ----------------------------------------------------------------------------------


KEYS = ["t/part-0.parquet", "t/a b/ü%.parquet", "t/_delta_log/../x"]


def test_local_batch_signer_matches_single_signing(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"), 600)
    sign = storage.url_signer(NOW)
    for key in KEYS:
        assert sign("b", key) == storage.presign("b", key, NOW)


@pytest.mark.parametrize("token", [None, "tok/en+="])
def test_sigv4_batch_signer_matches_single_signing(token: str | None) -> None:
    presigner = S3Presigner("http://127.0.0.1:9000", "eu-west-1", Credentials("AK", "SK", token))
    moment = datetime(2026, 11, 23, 16, 0, 5, tzinfo=UTC)
    sign = presigner.signing(600, moment)
    for key in KEYS:
        assert sign("b", key) == presigner.presign("b", key, 600, moment)


def test_s3_storage_batch_signer_gives_its_expiry() -> None:
    settings = S3Settings(endpoint="http://127.0.0.1:1", access_key="AK", secret_key="SK")
    url, expiry = S3Storage(settings, 600).url_signer(NOW)("b", "t/part-0.parquet")
    assert url.startswith("http://127.0.0.1:1/b/t/part-0.parquet?X-Amz-Algorithm=")
    assert expiry == int(NOW + 600) * 1000


# -- which responses are chunked on the event loop ------------------------------------------------------


def _queries(root: Path) -> TableQueries:
    storage = LocalStorage(root, UrlSigner(b"k" * 32, "http://h/delta-sharing/files"))
    return TableQueries(TableReaders(storage), b"s" * 32)


def _table(name: str) -> SharedTable:
    return SharedTable("id-" + name, "s", "default", name, "delta", "b", name, True, datetime.now(UTC))


def test_only_held_snapshots_without_hints_are_made_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_deltalake(str(tmp_path / "b" / "held"), pa.table({"id": [1, 2]}))
    write_deltalake(str(tmp_path / "b" / "streamed"), pa.table({"id": [1, 2]}))
    DeltaTable(str(tmp_path / "b" / "streamed")).create_checkpoint()
    monkeypatch.setattr(replay, "STREAM_THRESHOLD_BYTES", 0)  # any checkpoint is streamed
    queries, plain = _queries(tmp_path), Capabilities()
    assert queries.query(_table("held"), QueryRequest.parse(b"{}"), plain, None).from_memory
    hint = json.dumps(
        {
            "op": "equal",
            "children": [
                {"op": "column", "name": "id", "valueType": "int"},
                {"op": "literal", "value": "1", "valueType": "int"},
            ],
        }
    )
    hinted = QueryRequest.parse(json.dumps({"jsonPredicateHints": hint}).encode())
    assert not queries.query(_table("held"), hinted, plain, None).from_memory
    streamed = queries.query(_table("streamed"), QueryRequest.parse(b"{}"), plain, None)
    assert not streamed.from_memory
    assert sum(b'"file"' in line for line in map(line_bytes, streamed.lines)) == 1
