"""The requests-per-hour chart: bars computed here, drawn as inline SVG by the template."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 720
HEIGHT = 160
MARGIN = 24


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    hour: datetime
    count: int


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int
    width: int = WIDTH
    height: int = HEIGHT
    baseline: float = HEIGHT - MARGIN


def hourly(counts: Mapping[datetime, int], since: datetime, until: datetime) -> Chart:
    """One bar per hour from `since` to `until`, its height the requests of that hour.

    `counts`: requests per hour, keyed by the hour's start (UTC); hours missing had none.
    """
    start = since.replace(minute=0, second=0, microsecond=0)
    hours = []
    hour = start
    while hour < until:
        hours.append(hour)
        hour += timedelta(hours=1)
    peak = max((counts.get(h, 0) for h in hours), default=0)
    slot = (WIDTH - 2 * MARGIN) / max(len(hours), 1)
    usable = HEIGHT - 2 * MARGIN
    bars = []
    for index, hour in enumerate(hours):
        count = counts.get(hour, 0)
        height = usable * count / peak if peak else 0.0
        bars.append(
            Bar(
                x=round(MARGIN + index * slot, 2),
                y=round(HEIGHT - MARGIN - height, 2),
                width=round(max(slot * 0.8, 1.0), 2),
                height=round(height, 2),
                hour=hour,
                count=count,
            )
        )
    return Chart(bars, peak)
