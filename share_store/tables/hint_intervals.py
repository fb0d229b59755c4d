"""Intervals of one column's values (an OR of ranges on it), searched by bisection: `Intervals`.

A hint's `lower AND upper` bounds on one column, ORed together, are one set of
intervals: whether any reaches into a file's [min, max] is then one bisection, not
one test per range.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

#: A bound as a key that orders inclusive against exclusive ends at one value: a lower
#: bound (a, 0) admits a, (a, 1) only what lies above it; an upper bound (b, 1) admits
#: b, (b, 0) only what lies below it. A value v then passes a lower bound L when
#: L <= (v, 0), and an upper bound U when U >= (v, 1).
Bound = tuple[Any, int]
#: An interval of one column's values: its lower and upper bound.
Interval = tuple[Bound, Bound]


@dataclass(frozen=True, slots=True)
class Intervals:
    """Intervals of one column (an OR of ranges), for "does any reach into [low, high]" by bisection.

    Sorted by lower bound, with the highest upper bound seen so far at each:
    among the intervals whose lower bound admits `high`, the one reaching
    furthest up decides whether any admits a value at or above `low`.
    """

    lowers: list[Bound]
    reach: list[Bound]

    @classmethod
    def of(cls, intervals: list[Interval]) -> Intervals:
        ordered = sorted(intervals)
        reach: list[Bound] = []
        for _, upper in ordered:
            reach.append(upper if not reach or upper > reach[-1] else reach[-1])
        return cls([lower for lower, _ in ordered], reach)

    def overlap(self, low: Any, high: Any) -> bool:
        """Whether some interval holds a value of [low, high]."""
        admitting = bisect_right(self.lowers, (high, 0))
        return admitting > 0 and self.reach[admitting - 1] >= (low, 1)

    def cover(self, low: Any, high: Any) -> bool:
        """Whether one interval holds all of [low, high]."""
        admitting = bisect_right(self.lowers, (low, 0))
        return admitting > 0 and self.reach[admitting - 1] >= (high, 1)
