"""Recipients' requests and providers' changes, kept from the audit records for the console's
Activity page: which records are kept, in what form, and that they reach the store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from share_store.persistence import ShareStore, sqlite_url
from sharing_server.observability.activity import ActivityRecorder, admin_event_of, event_of

NOW = datetime.now(UTC).replace(microsecond=0)
HOUR = timedelta(hours=1)


def record(**fields: Any) -> dict[str, Any]:
    return {"time": NOW.isoformat(), "status": 200, "route": "query", **fields}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ShareStore]:
    opened = ShareStore(sqlite_url(tmp_path / "store.db"))
    yield opened
    opened.close()


def test_an_event_is_the_records_fields_cut_to_their_columns() -> None:
    event = event_of(record(token_id="t" * 40, share="s", schema="d", table="x" * 200, version=4,
                            files=3, file_bytes=1000, bytes=20, duration_ms=1.5))  # fmt: skip
    assert (event.time, event.route, event.status) == (NOW, "query", 200)
    assert event.token_id == "t" * 32 and event.table_name == "x" * 128
    assert (event.share_name, event.schema_name, event.version, event.files) == ("s", "d", 4, 3)
    assert event.bytes == 1000  # the files handed out, not the response that listed them
    assert event.duration_ms == 1.5


def test_an_event_without_files_counts_the_responses_bytes_and_no_version_that_is_no_number() -> None:
    event = event_of(record(bytes=20, version="3"))
    assert (event.bytes, event.files, event.version, event.token_id) == (20, 0, None, None)


def test_a_providers_change_or_refused_sign_in_is_an_admin_event_and_a_read_is_not() -> None:
    change = admin_event_of("/admin/v1/shares", record(method="POST", client="10.0.0.1"))
    assert change is not None and (change.method, change.path, change.client) == (
        "POST", "/admin/v1/shares", "10.0.0.1",
    )  # fmt: skip
    assert change.sign_in is None
    refused = admin_event_of("/console/sign-in", record(method="GET", status=401, sign_in="failed"))
    assert refused is not None and refused.sign_in == "failed" and refused.status == 401
    assert admin_event_of("/admin/v1/shares", record(method="GET")) is None
    assert admin_event_of("/delta-sharing/shares", record(method="POST")) is None


def test_the_recorder_keeps_recipients_requests_and_providers_changes(store: ShareStore) -> None:
    recorder = ActivityRecorder(store, ("/delta-sharing", "/iceberg/"), retention=HOUR, max_events=100)
    recorder.offer("/delta-sharing/shares/s/schemas/d/tables/t/query", record(share="s", table="t"))
    recorder.offer("/iceberg/v1/namespaces", record(route="iceberg_namespaces", share="s"))
    recorder.offer("/delta-sharing/files/abc", record(route="serve_file"))  # counted by its query
    recorder.offer("/_iceberg/v1/warehouses", record(route="warehouses"))  # no recipient's
    recorder.offer("/admin/v1/shares", record(method="POST"))
    recorder.flush()
    recorder.close()
    kept = store.recent_activity(NOW - HOUR, NOW + HOUR)
    assert sorted(event["route"] for event in kept) == ["iceberg_namespaces", "query"]
    assert [event["path"] for event in store.recent_admin_events(NOW - HOUR, NOW + HOUR)] == [
        "/admin/v1/shares"
    ]


@pytest.mark.parametrize(("retention", "max_events"), [(timedelta(0), 100), (HOUR, 0)])
def test_a_recorder_kept_from_keeping_anything_keeps_nothing(
    store: ShareStore, retention: timedelta, max_events: int
) -> None:
    recorder = ActivityRecorder(store, ("/delta-sharing",), retention, max_events)
    assert not recorder.enabled
    recorder.offer("/delta-sharing/shares", record(route="list_shares"))
    recorder.flush()
    assert store.recent_activity(NOW - HOUR, NOW + HOUR) == []


def test_a_record_that_cannot_be_an_event_is_left_out(store: ShareStore) -> None:
    recorder = ActivityRecorder(store, ("/delta-sharing",), HOUR, 100)
    recorder.offer("/delta-sharing/shares", {"route": "list_shares"})  # no time, no status
    recorder.flush()
    recorder.close()
    assert store.recent_activity(NOW - HOUR, NOW + HOUR) == []
