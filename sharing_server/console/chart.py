"""The requests-per-hour chart: bars computed here, drawn as inline SVG by the template."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
class Tick:
    """A mark of the time axis under the bars: its x and its label (UTC)."""

    x: float
    label: str


#: Hours between the axis' marks, by the range's length in hours: about six to twelve marks.
TICK_STEPS = ((12, 1), (48, 6), (24 * 8, 24), (24 * 32, 24 * 4))


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int
    ticks: list[Tick] = field(default_factory=list)
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
    return Chart(bars, peak, ticks(bars))


def ticks(bars: list[Bar]) -> list[Tick]:
    """Marks at round hours (every 1, 6, 24 or 96 hours as the range grows), labelled "HH:00" within
    a day and "Mon DD" beyond: the chart reads as a time line, not a row of bars."""
    if not bars:
        return []
    step = next((hours for limit, hours in TICK_STEPS if len(bars) <= limit), 24 * 7)
    daily = step >= 24
    marks = []
    for bar in bars:
        hour = bar.hour
        if daily and hour.hour != 0:
            continue
        if not daily and hour.hour % step:
            continue
        if daily and (hour - bars[0].hour.replace(hour=0)).days % (step // 24):
            continue
        label = hour.strftime("%b %d") if daily else hour.strftime("%H:00")
        marks.append(Tick(round(bar.x + bar.width / 2, 2), label))
    return marks
