"""The console's pure parts: the hourly chart, the picker's table paths, formatting, schemas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sharing_server.console.chart import hourly
from sharing_server.console.formatting import ago, size, when
from sharing_server.console.picker import delta_tables
from sharing_server.console.table_view import columns_of
from sharing_server.console.web import safe_path

T0 = datetime(2026, 5, 1, 10, 30, tzinfo=UTC)


def test_hourly_bars_count_requests_per_hour() -> None:
    hour = T0.replace(minute=0)
    counts = {hour: 2, hour + timedelta(hours=2): 1}
    chart = hourly(counts, T0 - timedelta(minutes=30), T0 + timedelta(hours=3))
    assert [bar.count for bar in chart.bars] == [2, 0, 1, 0]  # 10:00, 11:00, 12:00, 13:00
    assert chart.peak == 2
    tallest = max(chart.bars, key=lambda bar: bar.height)
    assert tallest.count == 2 and tallest.y + tallest.height == chart.baseline
    assert hourly({}, T0, T0 + timedelta(hours=1)).bars[0].height == 0


def test_picker_finds_folders_holding_a_delta_log(tmp_path) -> None:
    from share_store.signing.file_urls import UrlSigner
    from share_store.storage import LocalStorage

    for folder in ("sales/orders/_delta_log", "sales/orders/part=1", "raw", "x/_delta_log", "_delta_log"):
        (tmp_path / "b" / folder).mkdir(parents=True)
    (tmp_path / "b" / "raw" / "file.csv").write_text("a,b")
    storage = LocalStorage(tmp_path, UrlSigner(b"k" * 32, "http://x/files"))
    # The bucket's root holds a log too, but has no path to share it by.
    assert delta_tables(storage, "b") == []
    (tmp_path / "b" / "_delta_log").rmdir()
    assert sorted(delta_tables(storage, "b")) == ["sales/orders", "x"]
    assert delta_tables(storage, "b", "sales") == ["sales/orders"]
    assert delta_tables(storage, "absent") == []


def test_formatting() -> None:
    assert (size(0), size(1536), size(5 * 1024**3)) == ("0 B", "1.5 KB", "5.0 GB")
    assert when("2026-05-01T10:30:00Z") == "2026-05-01 10:30:00 UTC" and when(None) == "—"
    assert ago(T0 - timedelta(minutes=3), now=T0) == "3 min ago"
    assert ago(T0 + timedelta(days=2), now=T0) == "in 2 d" and ago(None) == "never"


def test_nested_schema_columns() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": False},
            {
                "name": "address",
                "type": {"type": "struct", "fields": [{"name": "city", "type": "string", "nullable": True}]},
                "nullable": True,
            },
            {
                "name": "tags",
                "type": {"type": "array", "elementType": "string", "containsNull": True},
                "nullable": True,
            },
        ],
    }
    id_, address, tags = columns_of(schema)
    assert (id_.type, id_.nullable) == ("long", False)
    assert [(child.name, child.type) for child in address.children] == [("city", "string")]
    assert tags.type == "array<string>"


def test_redirect_targets_stay_in_the_console() -> None:
    assert safe_path("/console/shares/x") == "/console/shares/x"
    for hostile in ("https://evil.example/", "//evil.example/console/", "/console//evil", "/admin/v1", None):
        assert safe_path(hostile) == "/console/shares"


def test_a_long_message_is_cut_to_fit_the_cookie() -> None:
    from share_store.authentication.console_sessions import FLASH_CHARS, Session, SessionCodec

    session = Session().with_flash("error", "invalid table spec " + "x" * 100_000)
    assert len(session.flash[1]) == FLASH_CHARS + 1
    assert len(SessionCodec(b"k", None, 60).encode(session)) < 4000


def test_activity_time_ranges() -> None:
    from sharing_server.console.activity import time_range

    now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    assert time_range({}, now) == ("24h", now - timedelta(hours=24), now)
    assert time_range({"range": "1h"}, now) == ("1h", now - timedelta(hours=1), now)
    assert time_range({"range": "nonsense"}, now)[0] == "24h"
    custom = time_range({"from": "2026-04-30T08:00", "to": "2026-04-30T10:30"}, now)
    assert custom == (
        "custom",
        datetime(2026, 4, 30, 8, 0, tzinfo=UTC),
        datetime(2026, 4, 30, 10, 30, tzinfo=UTC),
    )
    # Reversed or malformed bounds fall back to the preset.
    assert time_range({"from": "2026-04-30T10:00", "to": "2026-04-30T08:00"}, now)[0] == "24h"
    assert time_range({"from": "yesterday", "to": "2026-04-30T08:00"}, now)[0] == "24h"
    # At most a month: one bar an hour.
    wide = time_range({"from": "2025-01-01T00:00", "to": "2026-04-30T00:00"}, now)
    assert wide[2] - wide[1] == timedelta(days=31)


def test_suggested_names_are_names_the_store_accepts() -> None:
    from share_store.model import NAME_PATTERN
    from sharing_server.console.picker import suggested_name

    for folder in ("orders", "café", "数据", "-data", "a b.c", ""):
        assert NAME_PATTERN.fullmatch(suggested_name(folder)), folder
    assert suggested_name("orders") == "orders"


def test_the_chart_has_a_time_axis_that_fits_the_range() -> None:
    start = datetime(2026, 5, 1, 0, 0, tzinfo=UTC)
    day = hourly({}, start, start + timedelta(hours=24))
    assert [tick.label for tick in day.ticks] == ["00:00", "06:00", "12:00", "18:00"]
    week = hourly({}, start, start + timedelta(days=7))
    assert [tick.label for tick in week.ticks] == [f"May {d:02d}" for d in range(1, 8)]
    month = hourly({}, start, start + timedelta(days=31))
    assert len(month.ticks) == 8 and month.ticks[0].label == "May 01" and month.ticks[1].label == "May 05"
    hour = hourly({}, start + timedelta(minutes=30), start + timedelta(hours=1, minutes=30))
    assert [tick.label for tick in hour.ticks] == ["00:00", "01:00"]
    assert all(0 < tick.x < 720 for chart in (day, week, month) for tick in chart.ticks)
